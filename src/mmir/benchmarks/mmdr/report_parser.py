"""How the MMDR-Bench evaluator reads a report (spec §2): references, citations, sentences, words, headings.

URL schemes are ``http``, ``https`` and ``file`` (the published code); offline corpora need
``schemes=URL_SCHEMES + ("mmir",)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from mmir.config.models.mmdr_evaluator import URL_SCHEMES

#: URL schemes of the published code (references, markdown links, bare URLs).
#: The scheme of our offline-corpus URIs (``mmir://<dataset>/<doc_id>``); opt in via ``schemes``.
LOCAL_SCHEME = "mmir"

#: Header words that open a references block, matched case-insensitively (spec §2).
REFERENCE_HEADERS: tuple[str, ...] = ("references", "reference", "参考文献", "参考资料", "引用", "來源", "来源")

WORD_RE = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z0-9]+)?|[\u4e00-\u9fff]")
CITATION_RE = re.compile(r"\[(\d{1,4})\]")
SENTENCE_SPLIT_RE = re.compile(r"(?<=[。！？!?.])\s+|\n{2,}")
HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*$")
PARAGRAPH_SPLIT_RE = re.compile(r"\n{2,}")
MD_IMAGE_HTTP_RE = re.compile(r"!\[[^\]]*\]\((https?://[^)]+)\)", re.IGNORECASE)

IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".bmp", ".tiff")


def _scheme_alt(schemes: Sequence[str]) -> str:
    if not schemes:
        raise ValueError("at least one URL scheme is needed")
    return "|".join(re.escape(s) for s in sorted(set(s.lower() for s in schemes), key=len, reverse=True))


@lru_cache(maxsize=16)
def _patterns(schemes: tuple[str, ...]) -> dict[str, re.Pattern[str]]:
    alt = _scheme_alt(schemes)
    return {
        # "[1] url", "1. url", "1: url", "[1]- url" ...: the whole (stripped) line
        "ref": re.compile(rf"^\[?(\d{{1,4}})\]?\s*[:.\-]?\s*((?:{alt})://\S+)\s*$", re.IGNORECASE),
        # "- [1] url", "* 1 url"
        "ref_bullet": re.compile(rf"^[\-*]\s*\[?(\d{{1,4}})\]?\s*((?:{alt})://\S+)\s*$", re.IGNORECASE),
        "url": re.compile(rf"(?:{alt})://[^\s\])]+", re.IGNORECASE),
        "md_link": re.compile(rf"\[([^\]]+)\]\(((?:{alt})://[^)]+)\)", re.IGNORECASE),
    }


def url_pattern(schemes: Sequence[str] = URL_SCHEMES) -> re.Pattern[str]:
    """Compiled bare-URL pattern (``scheme://`` then anything up to whitespace, ``]`` or ``)``)."""
    return _patterns(tuple(schemes))["url"]


def markdown_link_pattern(schemes: Sequence[str] = URL_SCHEMES) -> re.Pattern[str]:
    """Compiled markdown-link pattern ``[text](scheme://...)``; group 1 = anchor text, group 2 = URL."""
    return _patterns(tuple(schemes))["md_link"]


def tokenize_words(text: str) -> list[str]:
    """Words of ``text`` (spec §2): ASCII letter/digit runs with an optional ``'suffix``, or one CJK character."""
    return WORD_RE.findall(text or "")


def split_sentences(text: str) -> list[str]:
    """Sentences (spec §2): split after 。！？!?. when whitespace follows, or at 2+ newlines; stripped, non-empty."""
    return [c.strip() for c in SENTENCE_SPLIT_RE.split(text or "") if c and c.strip()]


def markdown_headings(text: str) -> list[str]:
    """Heading texts: lines ``^\\s{0,3}#{1,6}\\s+text`` (spec §2), stripped, in order."""
    out = []
    for line in (text or "").splitlines():
        m = HEADING_RE.match(line)
        if m:
            out.append(m.group(1).strip())
    return out


def count_paragraphs(text: str) -> int:
    """Number of non-blank blocks separated by 2+ newlines (spec §2)."""
    return sum(1 for p in PARAGRAPH_SPLIT_RE.split(text or "") if p.strip())


def markdown_image_urls(text: str) -> list[str]:
    """``http(s)`` URLs of markdown images ``![alt](http...)``, in order, duplicates kept (spec §4.1 img_cnt)."""
    return MD_IMAGE_HTTP_RE.findall(text or "")


def citation_ids(text: str) -> list[str]:
    """The numbers of the ``[n]`` markers (1-4 digits) in ``text``, as strings, in order, duplicates kept."""
    return CITATION_RE.findall(text or "")


def strip_citations(text: str) -> str:
    """``text`` with the ``[n]`` markers removed (nothing else changed)."""
    return CITATION_RE.sub("", text or "")


def looks_like_image_url(url: str) -> bool:
    """True when the URL path (query string dropped, case-insensitive) ends in an image extension (§5.1)."""
    u = (url or "").lower().split("?", 1)[0]
    return u.endswith(IMAGE_EXTENSIONS)


def find_references_block(report_text: str, headers: Sequence[str] = REFERENCE_HEADERS) -> str:
    """The references block (spec §2): from the last case-insensitive header word to the end (the whole report if none).

    ``reference`` is a header word, so a later mention of it moves the start there (the "last-occurrence rule").
    """
    text = report_text or ""
    lower = text.lower()
    idx = max((lower.rfind(h.lower()) for h in headers), default=-1)
    return text[idx:] if idx != -1 else text


def parse_references(report_text: str, schemes: Sequence[str] = URL_SCHEMES) -> dict[str, str]:
    """Citation map ``{"1": url, ...}`` of a report (spec §2, "Reference lines"); later lines replace earlier ones.

    Line patterns ``^\\[?(\\d{1,4})\\]?\\s*[:.\\-]?\\s*(URL)\\s*$`` and ``^[-*]\\s*\\[?(\\d{1,4})\\]?\\s*(URL)\\s*$``;
    keys keep the digits as written (``"01"`` != ``"1"``).
    """
    pats = _patterns(tuple(schemes))
    refs: dict[str, str] = {}
    for line in find_references_block(report_text).splitlines():
        line = line.strip()
        if not line:
            continue
        m = pats["ref"].match(line) or pats["ref_bullet"].match(line)
        if m:
            refs[m.group(1)] = m.group(2).strip()
    return refs
