"""Typed records shared by the M2RAG modules (spec ``m2rag.md`` §1, §3, §5), from the dev set or a retrieval run.

Conventions: an image's identity (image recall, spec §6.6) is ``cached_image_url``; page text marks an image
as ``<IMAGE_PLACEHOLDER>[k]`` (bare ``<IMAGE_PLACEHOLDER>`` after selection, spec §3 step 8); scores are
0-10 or ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from mmir.core.errors import DataError

#: A bare image slot in model-facing or output text (spec §3 step 8, §5).
PLACEHOLDER = "<IMAGE_PLACEHOLDER>"
#: An indexed image slot in stored page text: ``<IMAGE_PLACEHOLDER>[k]`` (spec §1).
INDEXED_PLACEHOLDER_RE = re.compile(r"<IMAGE_PLACEHOLDER>\[(\d+)\]")
#: Extension used when an image URL has none.
DEFAULT_EXT = "png"


@dataclass
class Chunk:
    """One text element of a page (spec §1 ``cleaned_webpage_splits[*]``).

    Attributes:
        split_id: 0-based chunk index in page order.
        score: 0-10 relevance to the query (spec §2.1), ``None`` when not scored.
        image_ids: ids of the page images whose placeholder lies in this chunk.
        doc_id, retrieval_score: the source passage (knowledge bases built from a retrieval run).
    """

    split_id: int
    text: str
    score: float | None = None
    evaluation: str | None = None
    image_ids: list[int] = field(default_factory=list)
    doc_id: str | None = None
    retrieval_score: float | None = None


@dataclass
class ImageItem:
    """A page image or an auxiliary image (spec §1 ``images[*]`` / ``aux_images[*]``).

    Attributes:
        image_id: page-local index ``k`` (int) or ``"aux-<i>"`` for auxiliary images.
        cached_image_url: identity of the image (metrics compare these); for our prepared data the image path.
        split_id: chunk holding the placeholder; ``None`` when unknown.
        valid: usable as model input (spec §1).
        final_score: 0-10 relevance (spec §2.2), ``None`` = filtered out or failed.
        caption: ``detailed_image_caption``.
        anchored: placeholder position known (``False``: placed at the end of its page).
        clip_score: CLIP ``logits_per_image`` when the CLIP hook ran (spec §2.2 step 3).
        drop_reason: why a curation filter removed it (``"pixel_area"``, ``"file_size"``, ``"duplicate"``, ...).
    """

    image_id: int | str
    cached_image_url: str
    image_url: str = ""
    split_id: int | None = None
    valid: bool = True
    final_score: float | None = None
    caption: str | None = None
    is_aux: bool = False
    alt: str = ""
    ocr: str = ""
    path: Path | None = None
    data: bytes | None = None
    anchored: bool = True
    clip_score: float | None = None
    drop_reason: str | None = None
    width: int | None = None
    height: int | None = None

    @property
    def ext(self) -> str:
        """Extension of ``cached_image_url`` (spec §3 step 9), lower-case, without the dot; ``"png"`` if none."""
        return url_extension(self.cached_image_url)

    def load_bytes(self) -> bytes:
        """The encoded image: ``data`` if held, else the bytes of ``path``.

        Raises:
            DataError: neither is available, or the file cannot be read.
        """
        if self.data is not None:
            return bytes(self.data)
        if self.path is None:
            raise DataError(self.cached_image_url, "image bytes are not available (no data and no resolved local file)")
        try:
            return Path(self.path).read_bytes()
        except OSError as e:
            raise DataError(str(self.path), f"cannot read image file: {e}") from e


@dataclass
class Webpage:
    """One page (spec §1 ``webpages[*]``); ``chunks is None``: failed, skipped by selection (spec §3 step 1)."""

    webpage_id: int | str
    title: str
    url: str
    chunks: list[Chunk] | None
    images: list[ImageItem] = field(default_factory=list)


@dataclass
class M2RAGQuery:
    """One query with its multimodal knowledge base (spec §1 record); ``level`` is the dev-set subset tag (1..3) or ``None``."""

    query_id: str
    content: str
    webpages: list[Webpage]
    aux_images: list[ImageItem] = field(default_factory=list)
    level: int | None = None

    def all_images(self) -> list[ImageItem]:
        """Every page image (pages in order) followed by the auxiliary images."""
        return [im for p in self.webpages for im in p.images] + list(self.aux_images)


def url_extension(url: str) -> str:
    """Lower-case extension of the last path segment of ``url`` (query string ignored); ``"png"`` when none.

    >>> url_extension("http://host/a/b/3.JPEG?x=1")
    'jpeg'
    """
    path = urlparse(url).path if "://" in url else url
    suffix = PurePosixPath(path).suffix
    ext = suffix[1:].lower() if suffix else ""
    return ext if re.fullmatch(r"[a-z0-9]{1,5}", ext or "") else DEFAULT_EXT


def image_description(image: ImageItem) -> str:
    """One-line text standing for ``image`` for text-only backends (spec §3, LLM backbone): the caption, alt, OCR.

    ``"(no description available)"`` when none is known.
    """
    parts = []
    if image.caption and image.caption.strip():
        parts.append(image.caption.strip())
    if image.alt and image.alt.strip():
        parts.append(f"Alt text: {image.alt.strip()}" if parts else image.alt.strip())
    if image.ocr and image.ocr.strip():
        parts.append(f"Text in the image: {image.ocr.strip()}")
    text = " ".join(parts) if parts else "(no description available)"
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


MAX_EXAMPLES = 5


@dataclass
class CountReport:
    """Counts by name, with up to five example messages each (what a stage met and how it handled it)."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, key: str, n: int = 1, example: str | None = None) -> None:
        """Add ``n`` to count ``key``, keeping ``example`` (cut to 300 characters) while fewer than five are kept."""
        if n <= 0:
            return
        self.counts[key] = self.counts.get(key, 0) + n
        if example is not None:
            ex = self.examples.setdefault(key, [])
            if len(ex) < MAX_EXAMPLES:
                ex.append(example[:300])

    def merge(self, other: CountReport) -> None:
        """Add ``other``'s counts and examples (up to five per count) into this report."""
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        for k, ex in other.examples.items():
            mine = self.examples.setdefault(k, [])
            mine.extend(ex[: max(0, MAX_EXAMPLES - len(mine))])

    def get(self, key: str) -> int:
        """The count ``key`` (0 if never counted)."""
        return self.counts.get(key, 0)

    def to_dict(self) -> dict:
        """JSON-serialisable ``{"counts", "examples"}`` (keys sorted)."""
        return {"counts": dict(sorted(self.counts.items())),
                "examples": {k: list(v) for k, v in sorted(self.examples.items())}}

