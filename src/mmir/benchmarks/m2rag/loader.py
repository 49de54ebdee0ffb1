"""M2RAG-Bench dev set: fetch it from the hub at a pinned revision, or read a local copy (spec §1, §8 "Loader").

Hub dataset ``ylwt/M2RAG-Bench``: ``dev_set.jsonl.tar.gz`` and ``images/ELI5/dev_set/dev_set-{0..9}.tar``.
:func:`load_dev_set` tolerates and counts (:class:`LoadReport`) the irregularities of spec §1
(``webpages_failed``, ``images_invalid``, ``images_null_score``, ``placeholders_dangling``) and more
(``chunks_unscored``, ``chunks_malformed``, ``images_malformed``, ``images_split_missing``,
``records_malformed``, ``records_duplicate_id``, ``records_other_level``, ``images_unresolved``).
"""

from __future__ import annotations

import io
import json
import logging
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from mmir.benchmarks.m2rag.records import (
    INDEXED_PLACEHOLDER_RE,
    Chunk,
    CountReport,
    ImageItem,
    M2RAGQuery,
    Webpage,
)
from mmir.core.errors import DataError
from mmir.data.images import resolve_inside

log = logging.getLogger(__name__)

HUB_REPO = "ylwt/M2RAG-Bench"
#: Hub commit that holds ``dev_set.jsonl.tar.gz`` and the image tars ("Upload folder using huggingface_hub").
#: The only later commit on ``main`` edits README.md.
PINNED_REVISION = "5d21b90f17b39aac0acda9e6610c904f70d99fc0"
DEV_SET_ARCHIVE = "dev_set.jsonl.tar.gz"
DEV_SET_FILE = "dev_set.jsonl"
IMAGE_TARS = tuple(f"images/ELI5/dev_set/dev_set-{i}.tar" for i in range(10))
#: Where the image tars are unpacked, relative to the fetch folder (the authors' layout).
IMAGE_DIR = "images/ELI5/dev_set"


# ------------------------------------------------------------------------------------------------ report
@dataclass
class LoadReport(CountReport):
    """Counts (``{name: n}``, names in the module docstring) and up to five examples each of what the loader met."""

    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable ``{"source", "counts", "examples"}`` (keys sorted)."""
        return {"source": self.source, **super().to_dict()}


@dataclass
class DevSet:
    """Loaded dev-set queries (file order) and the :class:`LoadReport`."""

    queries: list[M2RAGQuery]
    report: LoadReport


# ------------------------------------------------------------------------------------------------- fetch
def fetch_dev_set(dest: str | Path, *, revision: str = PINNED_REVISION, images: bool = False,
                  repo_id: str = HUB_REPO) -> Path:
    """Download the dev set (and optionally its images, several GB) into ``dest`` and unpack it there.

    Returns:
        ``dest``, to pass as the ``source`` of :func:`load_dev_set`.

    Raises:
        DataError: the hub cannot be reached (the message gives the manual download recipe), or an archive
            is unsafe (member paths leaving ``dest``) or not a tar.
    """
    dest = Path(dest)
    patterns = [DEV_SET_ARCHIVE, *(IMAGE_TARS if images else ())]
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns, local_dir=str(dest))
    except Exception as exc:  # offline, DNS, HTTP, auth: all end in the same instruction
        raise DataError(
            f"hf://{repo_id}@{revision}",
            f"cannot download ({type(exc).__name__}: {str(exc)[:200]}). On a machine with network run "
            f"`hf download {repo_id} --repo-type dataset --revision {revision} --local-dir DIR "
            f"--include {DEV_SET_ARCHIVE}` (add 'images/*' for the images), copy DIR here and pass it as the "
            "dev-set source",
        ) from exc
    _extract_tar(dest / DEV_SET_ARCHIVE, dest)
    if images:
        for name in IMAGE_TARS:
            _extract_tar(dest / name, dest / IMAGE_DIR)
    return dest


def _extract_tar(archive: Path, into: Path) -> None:
    """Unpack ``archive`` into ``into``, refusing members that would land outside it (and links/devices)."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise DataError(str(archive), f"cannot unpack: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------------------------- images
class DevSetImageResolver:
    """Maps a ``cached_image_url`` to a file under ``root`` (its path, then with leading segments dropped).

    Paths are confined to ``root`` (:func:`mmir.data.images.resolve_inside`); ``strip_prefix`` is a URL prefix
    to drop first.
    """

    def __init__(self, root: str | Path, strip_prefix: str | None = None):
        self.root = Path(root)
        self.strip_prefix = strip_prefix

    def candidates(self, url: str) -> list[str]:
        """Relative paths tried for ``url``, most specific first."""
        if self.strip_prefix and url.startswith(self.strip_prefix):
            rel = url[len(self.strip_prefix):]
            return [rel.lstrip("/")] if rel else []
        path = unquote(urlparse(url).path) if "://" in url else url
        parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".", "")]
        return ["/".join(parts[i:]) for i in range(len(parts))]

    def resolve(self, url: str) -> Path | None:
        """The existing file for ``url``, or ``None`` (unsafe paths count as not found)."""
        for rel in self.candidates(url):
            try:
                p = resolve_inside(self.root, rel)
            except DataError:
                continue
            if p.is_file():
                return p
        return None


# ----------------------------------------------------------------------------------------------- read
def find_dev_set(source: str | Path) -> Path:
    """The dev-set file: ``source`` itself, or in a folder ``dev_set.jsonl`` (shortest path first) or ``dev_set.jsonl.tar.gz``.

    Raises:
        DataError: nothing usable is there.
    """
    p = Path(source)
    if p.is_file():
        return p
    if p.is_dir():
        for pattern in (DEV_SET_FILE, DEV_SET_ARCHIVE, "*.jsonl"):
            hits = sorted(p.rglob(pattern), key=lambda x: (len(x.parts), str(x)))
            if hits:
                return hits[0]
    raise DataError(str(p), f"no {DEV_SET_FILE} or {DEV_SET_ARCHIVE} found (fetch it with fetch_dev_set)")


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` of the JSONL, from a plain file or the first ``*.jsonl`` member of a tar.

    Raises:
        DataError: the archive holds no ``.jsonl`` member or cannot be read.
    """
    if tarfile.is_tarfile(path):
        try:
            with tarfile.open(path) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".jsonl")]
                if not members:
                    raise DataError(str(path), "archive holds no .jsonl file")
                members.sort(key=lambda m: (PurePosixPath(m.name).name != DEV_SET_FILE, m.name))
                fh = tar.extractfile(members[0])
                assert fh is not None  # isfile() members always give a file object
                for i, line in enumerate(io.TextIOWrapper(fh, encoding="utf-8"), 1):
                    yield i, line
        except (tarfile.TarError, OSError) as e:
            raise DataError(str(path), f"cannot read archive: {type(e).__name__}: {e}") from e
        return
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            yield i, line


def load_dev_set(source: str | Path, *, image_root: str | Path | None = None, levels: Iterable[int] | None = (1,),
                 strip_prefix: str | None = None, limit: int | None = None) -> DevSet:
    """Read the dev set into typed records (spec §1), tolerating and counting its irregularities.

    Args:
        image_root: folder of the unpacked images; each image's ``path`` is resolved (``images_unresolved``).
        levels: keep records whose ``level`` is in this set; default ``(1,)`` (spec §1). ``None`` keeps all.
        limit: stop after this many kept records.

    Returns:
        :class:`DevSet` (queries in file order, :class:`LoadReport`).

    Raises:
        DataError: the source holds no dev set or cannot be read.
    """
    path = find_dev_set(source)
    report = LoadReport(source=str(path))
    resolver = DevSetImageResolver(image_root, strip_prefix) if image_root is not None else None
    keep_levels = None if levels is None else {int(x) for x in levels}
    queries: list[M2RAGQuery] = []
    seen: set[str] = set()
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            report.add("records_malformed", example=f"{where}: not JSON ({e.msg})")
            continue
        record_report = LoadReport()  # merged only when the record is kept
        try:
            q = parse_record(obj, where=where, report=record_report, resolver=resolver)
        except _Malformed as e:
            report.add("records_malformed", example=f"{where}: {e}")
            continue
        report.add("records_read")
        if keep_levels is not None and q.level not in keep_levels:
            report.add("records_other_level")
            continue
        if q.query_id in seen:
            report.add("records_duplicate_id", example=f"{where}: query_id {q.query_id!r} repeated; first kept")
            continue
        seen.add(q.query_id)
        report.merge(record_report)
        queries.append(q)
        if limit is not None and len(queries) >= limit:
            break
    report.add("queries", len(queries))
    irregular = {k: v for k, v in report.counts.items() if k not in ("records_read", "queries", "webpages", "chunks",
                                                                      "images", "aux_images")}
    if irregular:
        log.info("%s: %d queries loaded; irregularities handled: %s", path, len(queries), irregular)
    return DevSet(queries=queries, report=report)


class _Malformed(ValueError):
    """A record that cannot become a query (missing id or text, wrong types)."""


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if value == value else None  # NaN -> None
    return None


def parse_record(obj: Any, *, where: str = "record", report: LoadReport | None = None,
                 resolver: DevSetImageResolver | None = None) -> M2RAGQuery:
    """One dev-set JSON object (spec §1) as an :class:`M2RAGQuery`; irregularities go to ``report``.

    Raises:
        ValueError (``_Malformed``): not an object, or ``query_id`` / ``content`` missing or empty.
    """
    report = report if report is not None else LoadReport()
    if not isinstance(obj, Mapping):
        raise _Malformed(f"expected a JSON object, got {type(obj).__name__}")
    qid = obj.get("query_id")
    if qid is None or (isinstance(qid, str) and not qid.strip()) or isinstance(qid, (list, dict, bool)):
        raise _Malformed("missing query_id")
    content = obj.get("content")
    if not isinstance(content, str) or not content.strip():
        raise _Malformed(f"query {qid!r}: missing or empty content")
    level = _int_or_none(obj.get("level"))
    pages_raw = obj.get("webpages")
    if pages_raw is None:
        pages_raw = []
        report.add("records_without_webpages", example=f"{where}: no webpages field")
    if not isinstance(pages_raw, list):
        raise _Malformed(f"query {qid!r}: webpages is {type(pages_raw).__name__}, not a list")
    pages = []
    for j, wp in enumerate(pages_raw):
        page = _parse_webpage(wp, f"{where}, webpage {j}", report, resolver)
        if page is not None:
            pages.append(page)
    aux = []
    aux_raw = obj.get("aux_images") or []
    if not isinstance(aux_raw, list):
        report.add("aux_images_malformed", example=f"{where}: aux_images is {type(aux_raw).__name__}")
        aux_raw = []
    for i, im in enumerate(aux_raw):
        item = _parse_image(im, f"{where}, aux image {i}", report, resolver, aux=True, index=i)
        if item is not None:
            aux.append(item)
    return M2RAGQuery(query_id=str(qid), content=content, webpages=pages, aux_images=aux, level=level)


def _parse_webpage(wp: Any, where: str, report: LoadReport, resolver: DevSetImageResolver | None) -> Webpage | None:
    if not isinstance(wp, Mapping):
        report.add("webpages_malformed", example=f"{where}: not an object")
        return None
    report.add("webpages")
    wid = wp.get("webpage_id")
    images = []
    imgs_raw = wp.get("images")
    if imgs_raw is None:
        imgs_raw = []
    if not isinstance(imgs_raw, list):
        report.add("images_malformed", example=f"{where}: images is {type(imgs_raw).__name__}")
        imgs_raw = []
    for i, im in enumerate(imgs_raw):
        item = _parse_image(im, f"{where}, image {i}", report, resolver, aux=False)
        if item is not None:
            images.append(item)
    images.sort(key=lambda im: im.image_id if isinstance(im.image_id, int) else 10**9)
    splits = wp.get("cleaned_webpage_splits")
    chunks: list[Chunk] | None
    if not isinstance(splits, list):
        report.add("webpages_failed", example=f"{where}: cleaned_webpage_splits is {type(splits).__name__}")
        chunks = None
    else:
        known = {im.image_id for im in images}
        chunks = []
        for s, sp in enumerate(splits):
            chunk = _parse_chunk(sp, f"{where}, split {s}", report, known, default_id=s)
            if chunk is not None:
                chunks.append(chunk)
        split_ids = {c.split_id for c in chunks}
        for im in images:
            if im.split_id is not None and im.split_id not in split_ids:
                report.add("images_split_missing", example=f"{where}: image {im.image_id} names split {im.split_id}")
    return Webpage(webpage_id=wid if wid is not None else -1, title=str(wp.get("title") or ""),
                   url=str(wp.get("url") or wp.get("link") or ""), chunks=chunks, images=images)


def _parse_chunk(sp: Any, where: str, report: LoadReport, known_images: set, default_id: int) -> Chunk | None:
    if not isinstance(sp, Mapping) or not isinstance(sp.get("text"), str):
        report.add("chunks_malformed", example=f"{where}: no text")
        return None
    report.add("chunks")
    split_id = _int_or_none(sp.get("split_id"))
    if split_id is None:
        report.add("chunks_without_split_id", example=f"{where}: split_id missing; list position used")
        split_id = default_id
    score = _score(sp.get("score"))
    if score is None:
        report.add("chunks_unscored", example=f"{where}: score {sp.get('score')!r}")
    text = sp["text"]
    dangling = [m.group(0) for m in INDEXED_PLACEHOLDER_RE.finditer(text) if int(m.group(1)) not in known_images]
    if dangling:
        report.add("placeholders_dangling", len(dangling), example=f"{where}: {', '.join(dangling[:3])} not in images")
        text = INDEXED_PLACEHOLDER_RE.sub(lambda m: m.group(0) if int(m.group(1)) in known_images else "", text)
    ids = sp.get("image_ids")
    image_ids = [i for i in (_int_or_none(x) for x in ids) if i is not None] if isinstance(ids, list) else []
    evaluation = sp.get("evaluation")
    return Chunk(split_id=split_id, text=text, score=score,
                 evaluation=evaluation if isinstance(evaluation, str) else None, image_ids=image_ids)


def _parse_image(im: Any, where: str, report: LoadReport, resolver: DevSetImageResolver | None, *, aux: bool,
                 index: int = 0) -> ImageItem | None:
    prefix = "aux_images" if aux else "images"
    if not isinstance(im, Mapping):
        report.add(f"{prefix}_malformed", example=f"{where}: not an object")
        return None
    cached = im.get("cached_image_url")
    if not isinstance(cached, str) or not cached:
        report.add(f"{prefix}_malformed", example=f"{where}: no cached_image_url")
        return None
    report.add(prefix)
    raw_id = im.get("image_id")
    image_id: int | str
    if aux:
        image_id = str(raw_id) if raw_id is not None else f"aux-{index}"
    else:
        iid = _int_or_none(raw_id)
        if iid is None:
            report.add(f"{prefix}_malformed", example=f"{where}: image_id {raw_id!r}")
            return None
        image_id = iid
    valid = im.get("valid") is True
    if not valid:
        report.add(f"{prefix}_invalid")
    score = _score(im.get("final_score"))
    if score is None:
        report.add(f"{prefix}_null_score")
    if valid and score is None:  # valid implies a score in the released export; never use such an image
        report.add(f"{prefix}_valid_without_score", example=f"{where}: valid but final_score null; marked invalid")
        valid = False
    caption = im.get("detailed_image_caption")
    item = ImageItem(
        image_id=image_id, cached_image_url=cached, image_url=str(im.get("image_url") or cached),
        split_id=None if aux else _int_or_none(im.get("split_id")), valid=valid, final_score=score,
        caption=caption if isinstance(caption, str) else None, is_aux=aux,
    )
    if resolver is not None:
        item.path = resolver.resolve(cached)
        if item.path is None:
            report.add(f"{prefix}_unresolved", example=f"{where}: {cached} not under {resolver.root}")
    return item


def dump_record(query: M2RAGQuery) -> dict[str, Any]:
    """The dev-set JSON form (spec §1) of ``query``: the inverse of :func:`parse_record` for the fields the
    pipeline uses (handy to write test fixtures and filtered subsets)."""
    def img(im: ImageItem) -> dict[str, Any]:
        d = {"image_id": im.image_id, "image_url": im.image_url, "cached_image_url": im.cached_image_url,
             "valid": im.valid, "final_score": im.final_score, "detailed_image_caption": im.caption}
        if not im.is_aux:
            d["split_id"] = im.split_id
        return d

    return {
        "query_id": query.query_id, "content": query.content, "level": query.level,
        "webpages": [{
            "webpage_id": p.webpage_id, "url": p.url, "title": p.title,
            "cleaned_webpage_splits": None if p.chunks is None else [
                {"split_id": c.split_id, "text": c.text, "score": c.score, "evaluation": c.evaluation,
                 "image_ids": list(c.image_ids)} for c in p.chunks],
            "images": [img(i) for i in p.images]} for p in query.webpages],
        "aux_images": [img(i) for i in query.aux_images],
    }


__all__ = [
    "DEV_SET_ARCHIVE", "DEV_SET_FILE", "HUB_REPO", "IMAGE_DIR", "IMAGE_TARS", "PINNED_REVISION",
    "DevSet", "DevSetImageResolver", "LoadReport", "dump_record", "fetch_dev_set", "find_dev_set", "iter_lines",
    "load_dev_set", "parse_record",
]
