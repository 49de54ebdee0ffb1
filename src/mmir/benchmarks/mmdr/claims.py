"""Claim-URL extraction (spec §5.1, ``extract_claim_pairs``): the pairs TRACE audits.

Sources in order until ``max_pairs``: sentence ``[n]`` citations, markdown links, bare URLs; de-duplicated by
``(claim[:180], url)``. Code behaviour kept (spec §10.8, §10.11): ``sentence_urls`` dropped unless
``keep_sentence_urls=True``; a references block without blank lines yields pseudo-claims.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.report_parser import (
    CITATION_RE,
    URL_SCHEMES,
    looks_like_image_url,
    markdown_link_pattern,
    parse_references,
    split_sentences,
    url_pattern,
)
from mmir.config.models.mmdr_evaluator import MAX_PAIRS

DEDUP_CLAIM_CHARS = 180
NO_CLAIM_TEXT = "Evidence referenced in report."

CAUSAL_CUES_EN = ("because", "therefore", "causes", "due to", "impact", "trend", "increase", "decrease", "compare", "contrast")
CAUSAL_CUES_ZH = ("因此", "所以", "导致", "影响", "趋势", "上升", "下降", "对比", "比较", "原因")
KEY_CUES_EN = ("key finding", "conclusion", "recommend", "main reason")
KEY_CUES_ZH = ("结论", "建议", "关键", "主要原因", "核心发现")
IMAGE_CUES = (
    "figure", "fig.", "chart", "graph", "plot", "diagram", "table", "screenshot", "image",
    "as shown", "shown below", "see below",
    "图", "如下图", "见图", "截图", "屏摄", "图表", "曲线", "柱状", "折线",
)
_DIGIT = re.compile(r"\d")
_WS = re.compile(r"\s+")


@dataclass
class ClaimPair:
    """One claim-URL pair; ``source`` ``"citation"``, ``"markdown_link"`` or ``"bare_url"``; enrichment fields ``None`` on raw pairs."""

    claim: str
    url: str
    citation_id: str | None = None
    source: str = "citation"
    sentence_citation_ids: list[str] = field(default_factory=list)
    sentence_urls: list[str] | None = None
    relevance_weight: float | None = None
    is_key_claim: bool | None = None
    depends_on_image: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (``sentence_urls`` omitted when ``None``)."""
        d = asdict(self)
        if d["sentence_urls"] is None:
            d.pop("sentence_urls")
        return d


# --------------------------------------------------------------------------------------------- enrichment
def relevance_weight(claim: str) -> float:
    """``1 + 0.3[len >= 120] + 0.2[digit] + 0.2[English causal/trend cue] + 0.2[Chinese cue]`` (§5.1)."""
    c = claim or ""
    w = 1.0
    if len(c) >= 120:
        w += 0.3
    if _DIGIT.search(c):
        w += 0.2
    if any(k in c.lower() for k in CAUSAL_CUES_EN):
        w += 0.2
    if any(k in c for k in CAUSAL_CUES_ZH):
        w += 0.2
    return w


def is_key_claim(claim: str) -> bool:
    """Key claim (§5.1): 50+ characters; or a digit and 25+ characters; or a key-finding cue."""
    c = claim or ""
    return (
        len(c) >= 50
        or (bool(_DIGIT.search(c)) and len(c) >= 25)
        or any(k in c.lower() for k in KEY_CUES_EN)
        or any(k in c for k in KEY_CUES_ZH)
    )


def is_image_dependent_claim(claim: str) -> bool:
    """The claim text holds an image cue (figure, chart, table, "as shown", 图表, ...; spec §5.1)."""
    c = (claim or "").lower()
    return any(k in c for k in IMAGE_CUES)


# -------------------------------------------------------------------------------------------- extraction
def _from_citations(report: str, max_pairs: int, schemes: Sequence[str]) -> list[ClaimPair]:
    refs = parse_references(report, schemes)
    pairs: list[ClaimPair] = []
    for sent in split_sentences(report):
        cids = CITATION_RE.findall(sent)
        if not cids:
            continue
        sent_urls: list[str] = []
        for cid in cids:
            u = refs.get(cid)
            if u and u not in sent_urls:
                sent_urls.append(u)
        claim = _WS.sub(" ", CITATION_RE.sub("", sent).strip())
        if not claim:
            continue
        uniq = list(dict.fromkeys(cids))
        for cid in uniq:
            url = refs.get(cid)
            if not url:
                continue
            pairs.append(ClaimPair(claim, url, cid, "citation", list(uniq), list(sent_urls)))
            if len(pairs) >= max_pairs:
                return pairs
    return pairs


def _from_markdown_links(report: str, max_pairs: int, schemes: Sequence[str]) -> list[ClaimPair]:
    md = markdown_link_pattern(schemes)
    pairs: list[ClaimPair] = []
    for sent in split_sentences(report):
        for m in md.finditer(sent):
            url = (m.group(2) or "").strip()
            if not url:
                continue
            claim = _WS.sub(" ", md.sub("", sent).strip()) or m.group(1).strip()
            pairs.append(ClaimPair(claim, url, None, "markdown_link"))
            if len(pairs) >= max_pairs:
                return pairs
    return pairs


def _from_bare_urls(report: str, max_pairs: int, schemes: Sequence[str]) -> list[ClaimPair]:
    up = url_pattern(schemes)
    pairs: list[ClaimPair] = []
    for line in (report or "").splitlines():
        urls = up.findall(line)
        if not urls:
            continue
        claim = _WS.sub(" ", up.sub("", line).strip(" \t-")) or NO_CLAIM_TEXT
        for u in urls:
            pairs.append(ClaimPair(claim, u, None, "bare_url"))
            if len(pairs) >= max_pairs:
                return pairs
    return pairs


def extract_claim_pairs(
    report: str,
    max_pairs: int = MAX_PAIRS,
    *,
    schemes: Sequence[str] = URL_SCHEMES,
    keep_sentence_urls: bool = False,
) -> tuple[list[ClaimPair], list[ClaimPair]]:
    """Claim-URL pairs of a report (spec §5.1).

    Args:
        keep_sentence_urls: keep ``sentence_urls`` (the paper's reading); the published code drops it (default).

    Returns:
        ``(raw_pairs, enriched_pairs)``: enriched pairs de-duplicated by ``(claim[:180], url)`` with
        ``relevance_weight``, ``is_key_claim``, ``depends_on_image``.
    """
    raw = _from_citations(report, max_pairs, schemes)
    if len(raw) < max_pairs:
        raw += _from_markdown_links(report, max_pairs - len(raw), schemes)
    if len(raw) < max_pairs:
        raw += _from_bare_urls(report, max_pairs - len(raw), schemes)

    seen: set[tuple[str, str]] = set()
    enriched: list[ClaimPair] = []
    for p in raw:
        claim, url = (p.claim or "").strip(), (p.url or "").strip()
        if not claim or not url:
            continue
        key = (claim[:DEDUP_CLAIM_CHARS], url)
        if key in seen:
            continue
        seen.add(key)
        enriched.append(ClaimPair(
            claim=claim, url=url, citation_id=p.citation_id, source=p.source,
            sentence_citation_ids=list(p.sentence_citation_ids),
            sentence_urls=list(p.sentence_urls or []) if keep_sentence_urls else None,
            relevance_weight=relevance_weight(claim),
            is_key_claim=is_key_claim(claim),
            depends_on_image=is_image_dependent_claim(claim) or looks_like_image_url(url),
        ))
        if len(enriched) >= max_pairs:
            break
    return raw, enriched
