"""Element scoring, image curation (spec §2) and the K_In-Doc input builder (spec §3).

Curation (only for knowledge bases without scores): :func:`score_chunks` (spec §2.1), :func:`dedup_page_images`,
:func:`image_filter_reason`, an optional CLIP hook, :func:`score_images` (spec §2.2), all run by
:func:`curate_images`. Selection: :func:`select_input` (spec §3 steps 1-9), every threshold a
:class:`SelectionConfig` field; :meth:`SelectionConfig.murar` gives the MuRAR baseline's settings (spec §4.3).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from mmir.benchmarks.m2rag.calls import prompt, render_around_slot
from mmir.benchmarks.m2rag.media import image_size, thumbnail_bytes
from mmir.benchmarks.m2rag.records import (
    INDEXED_PLACEHOLDER_RE,
    PLACEHOLDER,
    Chunk,
    ImageItem,
    M2RAGQuery,
    Webpage,
    image_description,
)
from mmir.core.errors import DataError
from mmir.llm.client import LLMClient
from mmir.llm.messages import ImagePart, user_messages
from mmir.llm.parsers import FIRST_INTEGER, LAST_INTEGER
from mmir.llm.records import CallRecord

log = logging.getLogger(__name__)

T = TypeVar("T")
_TEMP = "\x00KEEP_IMAGE\x00"
CHUNK_SCORE_PROMPT = "chunk_score_v1"
IMAGE_SCORE_PROMPT = "image_score_v1"


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class SelectionConfig:
    """Thresholds and caps of spec §2.2 and §3 (defaults = the released ``summarize_custom_*.yaml`` and ``score_image.yaml``).

    Attributes:
        max_pages: keep the first N pages (``None`` = all).
        min_chunk_score: chunks need ``score >= this`` (3).
        max_chunks_per_page: top-k chunks per page by score (20; ``None`` = no cap).
        min_image_score, max_image_score: images need ``min <= final_score < max`` (3, 1e10).
        max_images_per_page, max_aux_images, max_images: top-k caps (5, 5, 10; ``None`` = no cap).
        apply_image_filters: apply steps 4-7 (score range and caps); ``False`` for MuRAR.
        thumbnail_size: images reach models shrunk to fit this square (512 px).
        min_pixel_area, max_pixel_area: curation pixel-area window (10,000 .. 4,000,000 px).
        min_file_bytes: curation minimum file size (20,480 bytes).
        min_clip_score: optional CLIP threshold (``None`` = record only, as released).
        phash_max_distance: pHash Hamming distance (of 64 bits) at or below which two images of one page are
            duplicates (10, the imagededup default).
    """

    max_pages: int | None = None
    min_chunk_score: float = 3
    max_chunks_per_page: int | None = 20
    min_image_score: float = 3
    max_image_score: float = 1e10
    max_images_per_page: int | None = 5
    max_aux_images: int | None = 5
    max_images: int | None = 10
    use_aux_images: bool = True
    apply_image_filters: bool = True
    thumbnail_size: int = 512
    min_pixel_area: int = 10_000
    max_pixel_area: int = 4_000_000
    min_file_bytes: int = 20_480
    min_clip_score: float | None = None
    phash_max_distance: int = 10

    @classmethod
    def murar(cls, **overrides: Any) -> SelectionConfig:
        """The separate (MuRAR) baseline's settings (spec §4.3): ``min_chunk_score=0.1``, top 20 chunks per
        page, no auxiliary images, no image score range or caps (every valid image of a kept chunk)."""
        return replace(cls(min_chunk_score=0.1, use_aux_images=False, apply_image_filters=False), **overrides)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (for run records)."""
        return asdict(self)


def top_k_stable(items: Sequence[T], key: Callable[[T], float], k: int | None) -> list[T]:
    """The ``k`` items with the highest ``key``, **in their original order**; ties keep the earlier item
    (a stable sort by descending key, as the released code). ``k=None`` keeps all."""
    if k is None or k >= len(items):
        return list(items)
    if k <= 0:
        return []
    order = sorted(range(len(items)), key=lambda i: -key(items[i]))[:k]  # sorted() is stable
    keep = set(order)
    return [it for i, it in enumerate(items) if i in keep]


# -------------------------------------------------------------------------------------------- selection
@dataclass
class SelectedPage:
    """A page of the model input (spec §3 step 8).

    Attributes:
        index: position among kept pages (``## Webpage {index}``).
        content: kept chunk texts concatenated, each kept image a bare ``<IMAGE_PLACEHOLDER>``, others deleted.
        images: kept images in placeholder order (``content``'s k-th placeholder = ``images[k]``).
    """

    index: int
    webpage: Webpage
    chunks: list[Chunk]
    content: str
    images: list[ImageItem]


@dataclass
class InputImage:
    """An image of the model input under its global index (spec §3 step 9); ``page`` is ``None`` for an auxiliary image."""

    index: int
    image: ImageItem
    page: int | None

    @property
    def pseudo_url(self) -> str:
        """``images/{index}.{ext}``, the URL the model sees (spec §3 step 9)."""
        return f"images/{self.index}.{self.image.ext}"


@dataclass
class SelectedInput:
    """K_In-Doc of one query: what the generator is given (spec §3) and what the metrics need (§6).

    ``images[i].index == i``; ``report`` counts what each step removed (``pages_failed``, ``chunks_below_min`` ...).
    """

    query_id: str
    query: str
    pages: list[SelectedPage]
    aux_images: list[ImageItem]
    images: list[InputImage]
    config: SelectionConfig
    report: dict[str, int] = field(default_factory=dict)

    def important_images(self, threshold: float = 8) -> set[str]:
        """``cached_image_url`` of the input images with ``final_score >= threshold`` (spec §6.6)."""
        return {ii.image.cached_image_url for ii in self.images
                if ii.image.final_score is not None and ii.image.final_score >= threshold}

    def page_contents(self) -> list[str]:
        """Each kept page's ``content`` (placeholders included): the retrieved contexts of §6.3."""
        return [p.content for p in self.pages]


def select_input(query: M2RAGQuery, config: SelectionConfig | None = None) -> SelectedInput:
    """Build K_In-Doc for ``query`` exactly as spec §3 (steps 1-9).

    Unscored chunks never pass (``chunks_unscored``); an unanchored image survives step 3 and goes at the end of
    its page; an anchored image whose placeholder is missing is dropped at step 8 as released
    (``images_without_placeholder``); a repeated placeholder keeps its first occurrence (``placeholders_repeated``).
    """
    cfg = config or SelectionConfig()
    rep: Counter[str] = Counter()
    pages_in = query.webpages if cfg.max_pages is None else query.webpages[: cfg.max_pages]
    rep["pages_beyond_max"] = len(query.webpages) - len(pages_in)
    staged: list[tuple[Webpage, list[Chunk], list[ImageItem]]] = []
    for wp in pages_in:
        if wp.chunks is None:  # step 1
            rep["pages_failed"] += 1
            continue
        scored = [c for c in wp.chunks if c.score is not None]
        rep["chunks_unscored"] += len(wp.chunks) - len(scored)
        above = [c for c in scored if c.score >= cfg.min_chunk_score]  # step 2
        rep["chunks_below_min"] += len(scored) - len(above)
        kept = top_k_stable(above, lambda c: c.score, cfg.max_chunks_per_page)
        rep["chunks_over_page_cap"] += len(above) - len(kept)
        kept = sorted(kept, key=lambda c: c.split_id)
        if not kept:
            rep["pages_without_chunks"] += 1
            continue
        kept_ids = {c.split_id for c in kept}
        imgs = []
        for im in wp.images:  # step 3
            if not im.valid:
                rep["images_invalid"] += 1
            elif im.anchored and im.split_id not in kept_ids:
                rep["images_chunk_dropped"] += 1
            else:
                imgs.append(im)
        staged.append((wp, kept, imgs))

    aux: list[ImageItem] = []
    if cfg.apply_image_filters:
        in_range = _in_range(cfg)
        for n, (wp, kept, imgs) in enumerate(staged):
            ranged = [im for im in imgs if in_range(im)]  # step 4
            rep["images_score_out_of_range"] += len(imgs) - len(ranged)
            capped = top_k_stable(ranged, _score, cfg.max_images_per_page)  # step 5
            rep["images_over_page_cap"] += len(ranged) - len(capped)
            staged[n] = (wp, kept, capped)
        if cfg.use_aux_images:  # step 6
            valid_aux = [im for im in query.aux_images if im.valid]
            rep["aux_images_invalid"] += len(query.aux_images) - len(valid_aux)
            ranged_aux = [im for im in valid_aux if in_range(im)]
            rep["aux_images_score_out_of_range"] += len(valid_aux) - len(ranged_aux)
            aux = top_k_stable(ranged_aux, _score, cfg.max_aux_images)
            rep["aux_images_over_cap"] += len(ranged_aux) - len(aux)
        pool = [im for _, _, imgs in staged for im in imgs] + aux  # step 7
        keep = {id(im) for im in top_k_stable(pool, _score, cfg.max_images)}
        rep["images_over_global_cap"] += len(pool) - len(keep)
        staged = [(wp, kept, [im for im in imgs if id(im) in keep]) for wp, kept, imgs in staged]
        aux = [im for im in aux if id(im) in keep]
    elif query.aux_images:
        rep["aux_images_ignored"] += len(query.aux_images)

    pages: list[SelectedPage] = []
    for wp, kept, imgs in staged:  # step 8
        content, ordered = _reorganise(kept, imgs, rep)
        pages.append(SelectedPage(index=len(pages), webpage=wp, chunks=kept, content=content, images=ordered))
    images: list[InputImage] = []  # step 9
    for p in pages:
        for im in p.images:
            images.append(InputImage(index=len(images), image=im, page=p.index))
    for im in aux:
        images.append(InputImage(index=len(images), image=im, page=None))
    rep["pages_kept"] = len(pages)
    rep["chunks_kept"] = sum(len(p.chunks) for p in pages)
    rep["images_kept"] = len(images)
    return SelectedInput(query_id=query.query_id, query=query.content, pages=pages, aux_images=aux, images=images,
                         config=cfg, report={k: v for k, v in sorted(rep.items()) if v or k.endswith("_kept")})


def _score(im: ImageItem) -> float:
    return float(im.final_score) if im.final_score is not None else float("-inf")


def _in_range(cfg: SelectionConfig) -> Callable[[ImageItem], bool]:
    def ok(im: ImageItem) -> bool:
        return im.final_score is not None and cfg.min_image_score <= im.final_score < cfg.max_image_score

    return ok


def _reorganise(kept: list[Chunk], imgs: list[ImageItem], rep: Counter[str]) -> tuple[str, list[ImageItem]]:
    """Spec §3 step 8 for one page: returns (content, images in placeholder order)."""
    text = "".join(c.text for c in kept)
    by_id = {im.image_id: im for im in imgs if im.anchored}
    ordered: list[ImageItem] = []
    used: set = set()

    def repl(m) -> str:
        k = int(m.group(1))
        im = by_id.get(k)
        if im is None:
            rep["placeholders_removed"] += 1
            return ""
        if k in used:
            rep["placeholders_repeated"] += 1
            return ""
        used.add(k)
        ordered.append(im)
        return _TEMP

    text = INDEXED_PLACEHOLDER_RE.sub(repl, text)
    stray = text.count(PLACEHOLDER)
    if stray:
        rep["placeholders_bare_removed"] += stray
        text = text.replace(PLACEHOLDER, "")
    text = text.replace(_TEMP, PLACEHOLDER)
    missing = [im for im in imgs if im.anchored and im.image_id not in used]
    rep["images_without_placeholder"] += len(missing)
    for im in imgs:
        if not im.anchored:
            text = text.rstrip("\n") + "\n" + PLACEHOLDER + "\n"
            ordered.append(im)
    return text, ordered


# ---------------------------------------------------------------------------------------------- curation
@dataclass
class CurationReport:
    """Curation counts: ``scored``, ``failed`` (score left ``None``), ``unparsed`` (no integer), and removals per ``drop_reason``."""

    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        """Add ``n`` to ``key`` (nothing for ``n <= 0``)."""
        if n > 0:
            self.counts[key] = self.counts.get(key, 0) + n

    def merge(self, other: CurationReport) -> None:
        """Add ``other``'s counts and failures."""
        for k, v in other.counts.items():
            self.add(k, v)
        self.failures.extend(other.failures)


def _pmap(fn: Callable[[T], Any], items: Sequence[T], workers: int) -> list[Any]:
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="m2rag-score") as pool:
        return list(pool.map(fn, items))


def _workers(caller: LLMClient) -> int:
    return max(1, int(getattr(caller.backend, "max_concurrency", 1) or 1))


def score_chunks(query: M2RAGQuery, caller: LLMClient, *, overwrite: bool = False, max_tokens: int = 256) -> CurationReport:
    """Score every text chunk of ``query`` 0-10 against the query text (spec §2.1), in place.

    ``score``: last integer clamped to [0, 10], 0 when none (counted ``unparsed``, retried next run); a failed
    call leaves ``None`` (``failed``; selection drops the chunk). Scored chunks are skipped unless ``overwrite``.

    Returns:
        :class:`CurationReport`.
    """
    tpl = prompt(CHUNK_SCORE_PROMPT)
    todo = [c for p in query.webpages if p.chunks for c in p.chunks if overwrite or c.score is None]
    rep = CurationReport()

    def one(chunk: Chunk) -> tuple[Chunk, CallRecord]:
        msgs = user_messages([tpl.render(query=query.content, text=chunk.text)])
        return chunk, caller.call(msgs, tpl, label="score_chunk", parser=LAST_INTEGER,
                                  context={"query": query.query_id, "chunk": chunk.split_id}, max_tokens=max_tokens)

    for chunk, r in _pmap(one, todo, _workers(caller)):
        if r.status == "failed":
            chunk.score, chunk.evaluation = None, None
            rep.add("failed")
            rep.failures.append(f"query {query.query_id}, chunk {chunk.split_id}: {r.error}")
            continue
        value = r.value
        if r.status == "rejected":
            rep.add("unparsed")
            value = 0
        chunk.score, chunk.evaluation = float(value), r.text
        rep.add("scored")
    return rep


def score_images(query_text: str, images: Sequence[ImageItem], caller: LLMClient, *, vision: bool,
                 thumbnail_size: int = 512, max_tokens: int = 16, overwrite: bool = False) -> CurationReport:
    """Score images 0-10 for relevance to the query (spec §2.2 step 4), in place.

    ``final_score``: the first integer clamped to [0, 10]; ``None`` when none (``unparsed``) or on a failed call
    (``failed``). Images with a ``drop_reason`` are skipped, scored ones unless ``overwrite``.

    Args:
        vision: send a ``thumbnail_size`` thumbnail (VLM) or the text description (text-only judge).

    Returns:
        :class:`CurationReport`; undecodable images are dropped (``drop_reason="undecodable"``) and counted.
    """
    tpl = prompt(IMAGE_SCORE_PROMPT)
    rep = CurationReport()
    todo = [im for im in images if im.drop_reason is None and (overwrite or im.final_score is None)]

    def one(im: ImageItem) -> tuple[ImageItem, CallRecord | None, str | None]:
        before, after = render_around_slot(tpl, query=query_text)
        try:
            if vision:
                slot = ImagePart(thumbnail_bytes(im.load_bytes(), size=thumbnail_size, source=im.cached_image_url))
            else:
                slot = f"Image description: {image_description(im)}"
        except DataError as e:
            return im, None, f"undecodable: {e}"
        return im, caller.call(user_messages([before, slot, after]), tpl, label="score_image", parser=FIRST_INTEGER,
                               context={"image": im.image_id}, max_tokens=max_tokens), None

    for im, r, err in _pmap(one, todo, _workers(caller)):
        if r is None or r.status == "failed":
            im.final_score = None
            if r is None:
                im.drop_reason = "undecodable"
                rep.add("dropped_undecodable")
            else:
                rep.add("failed")
            rep.failures.append(f"image {im.cached_image_url}: {err if r is None else r.error}")
            continue
        rep.add("unparsed" if r.status == "rejected" else "scored")
        im.final_score = None if r.status == "rejected" else float(r.value)
    return rep


def image_filter_reason(image: ImageItem, config: SelectionConfig | None = None) -> str | None:
    """Why the size filters of spec §2.2 (steps 1-2) reject ``image``, or ``None``; sets ``image.width``/``height``.

    Returns ``"unreadable"``, ``"undecodable"``, ``"pixel_area"`` or ``"file_size"`` (of the stored bytes; the
    released code measures its re-saved file).
    """
    cfg = config or SelectionConfig()
    try:
        data = image.load_bytes()
    except DataError:
        return "unreadable"
    try:
        w, h = image_size(data)
    except DataError:
        return "undecodable"
    image.width, image.height = w, h
    if not cfg.min_pixel_area <= w * h <= cfg.max_pixel_area:
        return "pixel_area"
    if len(data) < cfg.min_file_bytes:
        return "file_size"
    return None


def dedup_page_images(images: Sequence[ImageItem], max_distance: int = 10) -> list[ImageItem]:
    """Mark near-duplicate images of one page (spec §2.2 "pHash dedup", ``drop_reason="duplicate"``); returns those removed.

    64-bit DCT pHash (``imagehash.phash``); an image within ``max_distance`` bits of an earlier kept one is a
    duplicate (imagededup's ``find_duplicates_to_remove`` in file order).

    Raises:
        ImportError: ``imagehash`` is not installed (``pip install imagehash==4.3.2``).
    """
    try:
        import imagehash
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("pHash de-duplication needs imagehash: pip install imagehash==4.3.2") from e
    from mmir.data.images import decode_image

    kept: list[Any] = []
    removed: list[ImageItem] = []
    for im in images:
        if im.drop_reason is not None:
            continue
        try:
            h = imagehash.phash(decode_image(im.load_bytes(), source=im.cached_image_url), hash_size=8)
        except DataError:
            im.drop_reason = "undecodable"
            continue
        if any((h - k) <= max_distance for k in kept):
            im.drop_reason = "duplicate"
            removed.append(im)
        else:
            kept.append(h)
    return removed


ClipScorer = Callable[[str, bytes], float]


def curate_images(query: M2RAGQuery, config: SelectionConfig | None = None, *, scorer: LLMClient | None = None,
                  vision: bool = False, clip_scorer: ClipScorer | None = None, dedup: bool = True,
                  max_tokens: int = 16) -> CurationReport:
    """The per-page image pipeline of spec §2.2 for every page and auxiliary image of ``query``, in place.

    Order: pHash dedup (pages only), size filters, optional CLIP hook (``clip_failed`` / ``clip_score`` drops),
    relevance scoring (skipped when ``scorer`` is None). Then ``valid = valid and drop_reason is None and
    final_score is not None``.

    Args:
        clip_scorer: ``(query_text, image_bytes) -> CLIP score`` (100 x cosine).
        max_tokens: reply limit of the image scorer (``m2rag.image_score_max_tokens``).

    Returns:
        :class:`CurationReport` with ``dropped_<reason>`` counts.

    Raises:
        ImportError: ``dedup`` without ``imagehash`` installed.
    """
    cfg = config or SelectionConfig()
    rep = CurationReport()
    groups: list[list[ImageItem]] = [list(p.images) for p in query.webpages] + [list(query.aux_images)]
    for g, imgs in enumerate(groups):
        is_aux = g == len(groups) - 1
        if dedup and not is_aux:
            rep.add("dropped_duplicate", len(dedup_page_images(imgs, cfg.phash_max_distance)))
        for im in imgs:
            if im.drop_reason is not None:
                continue
            reason = image_filter_reason(im, cfg)
            if reason is None and clip_scorer is not None:
                reason = _clip(im, query.content, clip_scorer, cfg, rep)
            if reason is not None:
                im.drop_reason = reason
                rep.add(f"dropped_{reason}")
    if scorer is not None:
        rep.merge(score_images(query.content, [im for imgs in groups for im in imgs], scorer, vision=vision,
                               thumbnail_size=cfg.thumbnail_size, max_tokens=max_tokens))
    for imgs in groups:
        for im in imgs:
            if im.drop_reason is not None:
                im.final_score = None
            im.valid = bool(im.valid and im.drop_reason is None and im.final_score is not None)
    return rep


def _clip(im: ImageItem, query_text: str, clip_scorer: ClipScorer, cfg: SelectionConfig, rep: CurationReport) -> str | None:
    try:
        im.clip_score = float(clip_scorer(query_text, im.load_bytes()))
    except Exception as e:  # a failing hook removes the image (spec §2.2 step 3); any error type counts
        rep.failures.append(f"clip {im.cached_image_url}: {type(e).__name__}: {e}")
        return "clip_failed"
    if cfg.min_clip_score is not None and im.clip_score < cfg.min_clip_score:
        return "clip_score"
    return None


def iter_chunks(pages: Iterable[Webpage]) -> Iterable[Chunk]:
    """Every chunk of ``pages`` (failed pages contribute none)."""
    for p in pages:
        yield from p.chunks or ()


__all__ = [
    "ClipScorer", "CurationReport", "InputImage", "SelectedInput", "SelectedPage", "SelectionConfig",
    "curate_images", "dedup_page_images", "image_filter_reason", "iter_chunks", "score_chunks", "score_images",
    "select_input", "top_k_stable",
]
