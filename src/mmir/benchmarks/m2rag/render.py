"""A generated answer as one self-contained HTML page, every image embedded as a data URI (spec §5).

Input: an :class:`~mmir.benchmarks.m2rag.generate.Answer` (k-th placeholder = ``output_images[k]``) or a markdown
string with ``![caption](images/{i}.{ext})``; ``images`` by global input index (sequence or mapping). An
unresolvable image is rendered as a ``[missing image ...]`` marker and listed in the :class:`RenderReport`.
Raw HTML from the model is disabled.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.m2rag.media import data_uri
from mmir.benchmarks.m2rag.records import PLACEHOLDER
from mmir.core.errors import DataError
from mmir.llm.backends import UnsupportedInputError

log = logging.getLogger(__name__)

_MD_IMAGE_REF = re.compile(r"!\[((?:\\.|[^\]\\])*)\]\(\s*(images/(\d+)\.[A-Za-z0-9]+)\s*\)")
_ANY_PLACEHOLDER = re.compile(r"<IMAGE_PLACEHOLDER>(?:\[\d+\])?")
_TOKEN = "MMIRFIGURE{}TOKEN"
_TOKEN_RE = re.compile(r"MMIRFIGURE(\d+)TOKEN")
_STYLE = """body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}
figure{text-align:center;margin:1.5rem auto}figure img{max-width:100%}figcaption{font-size:.9em;color:#444}
.dangling-image{color:#a00;font-weight:bold}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em}
.query{color:#333;border-left:4px solid #ccc;padding-left:.8em}"""


@dataclass
class RenderReport:
    """What :func:`render_html_with_report` did: ``embedded`` images, and ``dangling`` references (one
    human-readable line each)."""

    embedded: int = 0
    dangling: list[str] = field(default_factory=list)


@dataclass
class _Figure:
    caption: str
    uri: str | None
    problem: str | None = None


def _entry_bytes(entry: Any) -> tuple[bytes | None, str | None]:
    """(bytes, cached_image_url) of an images entry (InputImage, ImageItem or bytes)."""
    if isinstance(entry, (bytes, bytearray, memoryview)):
        return bytes(entry), None
    item = getattr(entry, "image", entry)  # InputImage -> ImageItem
    url = getattr(item, "cached_image_url", None)
    loader = getattr(item, "load_bytes", None)
    if loader is None:
        return None, url
    try:
        return loader(), url
    except DataError as e:
        log.debug("image %s unreadable: %s", url, e)
        return None, url


def _lookup(images: Sequence[Any] | Mapping[Any, Any], index: int | None, url: str | None) -> tuple[Any, str | None]:
    """The images entry for ``index`` (checked against ``url`` when the entry has one), else the entry whose
    cached_image_url is ``url``; returns (entry or None, problem or None)."""
    entry = None
    if index is not None:
        if isinstance(images, Mapping):
            entry = images.get(index, images.get(str(index)))
        elif 0 <= index < len(images):
            entry = images[index]
    if entry is not None and url is not None:
        item = getattr(entry, "image", entry)
        have = getattr(item, "cached_image_url", None)
        if have is not None and have != url:
            entry = None
    if entry is None and url is not None:
        if isinstance(images, Mapping) and url in images:
            entry = images[url]
        else:
            values = images.values() if isinstance(images, Mapping) else images
            entry = next((e for e in values if getattr(getattr(e, "image", e), "cached_image_url", None) == url), None)
    if entry is None:
        what = f"index {index}" if index is not None else "no index"
        return None, f"{what}{f' ({url})' if url else ''} not among the {len(images)} given images"
    return entry, None


def _figure(images, index: int | None, url: str | None, caption: str) -> _Figure:
    entry, problem = _lookup(images, index, url)
    if entry is None:
        return _Figure(caption, None, problem)
    data, _ = _entry_bytes(entry)
    if data is None:
        return _Figure(caption, None, f"image {index if index is not None else url}: bytes unavailable")
    try:
        return _Figure(caption, data_uri(data))
    except UnsupportedInputError as e:
        return _Figure(caption, None, f"image {index if index is not None else url}: {e}")


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _markdown_to_html(text: str) -> str:
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # pragma: no cover - markdown-it-py comes with rich, a pinned dependency
        return "".join(f"<p>{html.escape(p)}</p>\n" for p in re.split(r"\n\s*\n", text) if p.strip())
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return md.render(text)


def render_html_with_report(answer: Any, images: Sequence[Any] | Mapping[Any, Any], *,
                            title: str | None = None) -> tuple[str, RenderReport]:
    """A self-contained HTML page of ``answer`` (object or markdown string) with its images embedded.

    Returns:
        ``(html, RenderReport)``; valid UTF-8 HTML with no external resource.
    """
    report = RenderReport()
    figures: list[_Figure] = []

    def token(fig: _Figure) -> str:
        figures.append(fig)
        return "\n\n" + _TOKEN.format(len(figures) - 1) + "\n\n"

    if isinstance(answer, str):
        text, query = answer, None
        text = _MD_IMAGE_REF.sub(lambda m: token(_figure(images, int(m.group(3)), None,
                                                         re.sub(r"\\(.)", r"\1", m.group(1)))), text)
        text = _ANY_PLACEHOLDER.sub(lambda m: token(_Figure("", None, f"{m.group(0)} with no image attached")), text)
    else:
        query = getattr(answer, "user_query", None)
        outputs = list(getattr(answer, "output_images", []) or [])
        parts = str(getattr(answer, "placeholder_response", "")).split(PLACEHOLDER)
        pieces = [parts[0]]
        for k, seg in enumerate(parts[1:]):
            if k < len(outputs):
                o = outputs[k]
                fig = _figure(images, _field(o, "id"), _field(o, "cached_image_url"), str(_field(o, "image_caption") or ""))
            else:
                fig = _Figure("", None, f"placeholder {k} has no output image (answer lists {len(outputs)})")
            pieces.append(token(fig))
            pieces.append(seg)
        text = "".join(pieces)
    body = _markdown_to_html(text)

    def fig_html(m: re.Match) -> str:
        fig = figures[int(m.group(1))]
        cap = f"<figcaption>{html.escape(fig.caption)}</figcaption>" if fig.caption else ""
        if fig.uri is None:
            report.dangling.append(fig.problem or "unresolved image")
            return f'<span class="dangling-image">[missing image: {html.escape(fig.problem or "")}]</span>'
        report.embedded += 1
        return f'<figure><img src="{fig.uri}" alt="{html.escape(fig.caption, quote=True)}" />{cap}</figure>'

    body = re.sub(r"<p>\s*(MMIRFIGURE\d+TOKEN)\s*</p>", lambda m: _TOKEN_RE.sub(fig_html, m.group(1)), body)
    body = _TOKEN_RE.sub(fig_html, body)
    page_title = title or query or "M2RAG answer"
    head_q = f'<p class="query"><strong>Query:</strong> {html.escape(query)}</p>\n' if query else ""
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(page_title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"{head_q}{body}</body>\n</html>\n")
    return page, report


def render_html(answer: Any, images: Sequence[Any] | Mapping[Any, Any], *, title: str | None = None) -> str:
    """:func:`render_html_with_report` returning only the page; each dangling image is logged as a warning
    (use :func:`render_html_with_report` to get them as data)."""
    page, report = render_html_with_report(answer, images, title=title)
    for d in report.dangling:
        log.warning("render_html: dangling image placeholder: %s", d)
    return page


__all__ = ["RenderReport", "render_html", "render_html_with_report"]
