"""BEIR-format collections (Thakur et al., NeurIPS 2021 Datasets track; the layout of BEIR's ``GenericDataLoader``,
shared by MTEB retrieval sets and ViDoRe's BEIR exports):

- ``corpus.jsonl`` (or ``.jsonl.gz``; or parquet ``corpus.parquet`` / ``corpus/*.parquet``): ``_id``, ``title``, ``text``,
  optionally ``image`` (bytes, or the hub's ``{bytes, path}`` struct) for image corpora;
- ``queries.jsonl`` (same forms): ``_id``, ``text``;
- ``qrels/<split>.tsv`` (header ``query-id corpus-id score``; or ``qrels/<split>*.parquet``).

As BEIR's loader does, only the queries judged in the split are kept, and a document's text is ``title + " " + text``
(``title: false`` keeps the text alone). Image files ``<image_dir>/<corpus-id>.<ext>`` or an ``image`` column make the
corpus images of Task 3 (a query's positive images: the images of its judged documents). Local (``root``) or fetched
from the hub (``repo_id`` at ``revision``, :func:`mmir.data.hub.fetch_files`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from mmir.config.models import BeirDataset
from mmir.core.errors import DataError
from mmir.core.paths import resolve_path
from mmir.data.frames import SourceFrames, docs_frame, examples_frame, split_qrels
from mmir.data.parquet import as_id, as_text, is_null, norm_ref

#: the files a hub snapshot of a BEIR dataset needs (every split's qrels: they are small)
HUB_PATTERNS = ["corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet", "corpus/*.parquet", "queries.jsonl", "queries.jsonl.gz",
                "queries.parquet", "queries/*.parquet", "qrels/*.tsv", "qrels/*.parquet", "*/qrels/*.tsv"]
_ID = ("_id", "corpus-id", "query-id", "id")
_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")


def find_table(root: Path, name: str) -> list[Path]:
    """``<name>.jsonl``, ``<name>.jsonl.gz``, ``<name>.parquet`` or ``<name>/*.parquet`` under ``root`` (the first that
    exists). Raises DataError naming the forms looked for."""
    for form in (f"{name}.jsonl", f"{name}.jsonl.gz", f"{name}.parquet"):
        if (root / form).is_file():
            return [root / form]
    shards = sorted((root / name).glob("*.parquet")) if (root / name).is_dir() else []
    if shards:
        return shards
    raise DataError(root / f"{name}.jsonl", f"missing: no {name}.jsonl, {name}.jsonl.gz, {name}.parquet or {name}/*.parquet")


def read_records(files: list[Path]) -> list[tuple[dict, str, int]]:
    """``(record, file, 0-based row)`` of JSON-lines or parquet files. Raises DataError naming the line of bad JSON."""
    out = []
    for f in files:
        if f.suffix == ".parquet":
            try:
                df = pq.read_table(f).to_pandas()
            except Exception as exc:  # pyarrow raises several types for corrupt files
                raise DataError(f, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc
            out += [(rec, str(f), i) for i, rec in enumerate(df.to_dict("records"))]
            continue
        raw = gzip.decompress(f.read_bytes()) if f.name.endswith(".gz") else f.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            row = raw[: exc.start].count(b"\n")
            raise DataError(f, f"invalid UTF-8 at byte offset {exc.start} (byte 0x{raw[exc.start]:02x})", row) from exc
        for i, line in enumerate(text.splitlines()):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f, f"not a JSON object: {exc.msg} at column {exc.colno}", i) from exc
            if not isinstance(rec, dict):
                raise DataError(f, f"expected a JSON object, got {type(rec).__name__}", i)
            out.append((rec, str(f), i))
    return out


def _id_of(rec: dict, file: str, row: int) -> str:
    key = next((k for k in _ID if k in rec), "_id")
    value = as_id(rec.get(key), file, row, key)
    if value is None:
        raise DataError(file, "empty or missing id", row, key)
    return value


def read_qrels(root: Path, split: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """``qrels/<split>.tsv`` (header ``query-id corpus-id score``) or ``qrels/<split>*.parquet`` as ``{qid: {doc_id: score}}``
    and the files read. Raises DataError naming file, row and field."""
    tsv = root / "qrels" / f"{split}.tsv"
    shards = sorted((root / "qrels").glob(f"{split}*.parquet")) if (root / "qrels").is_dir() else []
    if tsv.is_file():
        lines = tsv.read_text(encoding="utf-8").splitlines()
        rows = [(line.split("\t"), i) for i, line in enumerate(lines) if line.strip()]
        if rows and rows[0][0][-1].strip().lower() == "score":
            rows = rows[1:]  # BEIR's header line
        recs = []
        for parts, i in rows:
            if len(parts) != 3:
                raise DataError(tsv, f"expected 'query-id<TAB>corpus-id<TAB>score', got {len(parts)} fields", i)
            recs.append(({"query-id": parts[0], "corpus-id": parts[1], "score": parts[2]}, str(tsv), i))
        files = [str(tsv)]
    elif shards:
        recs = read_records(shards)
        files = [str(f) for f in shards]
    else:
        raise DataError(tsv, f"missing: no qrels/{split}.tsv or qrels/{split}*.parquet (split: {split})")
    qrels: dict[str, dict[str, int]] = {}
    for rec, f, i in recs:
        q = as_id(rec.get("query-id"), f, i, "query-id")
        d = as_id(rec.get("corpus-id"), f, i, "corpus-id")
        if q is None or d is None:
            raise DataError(f, "empty query-id or corpus-id", i, "query-id" if q is None else "corpus-id")
        try:
            score = int(str(rec.get("score")).strip())
        except ValueError as exc:
            raise DataError(f, f"score {rec.get('score')!r} is not an integer", i, "score") from exc
        qrels.setdefault(q, {})[norm_ref(d)] = score
    return qrels, files


def _image_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise DataError(folder, "image_dir does not exist or is not a directory")
    return {p.stem: p for p in sorted(folder.iterdir()) if p.suffix.lower() in _IMAGE_EXT}


def source_files(root: Path, split: str) -> list[str]:
    """The corpus, queries and qrels files of a local BEIR folder (the prepare rule's inputs); [] when absent (prepare
    then names what is missing)."""
    out = []
    for name in ("corpus", "queries"):
        try:
            out += [str(f) for f in find_table(root, name)]
        except DataError:
            pass
    qrels = root / "qrels"
    out += [str(f) for f in sorted(qrels.glob(f"{split}.tsv")) + sorted(qrels.glob(f"{split}*.parquet"))] if qrels.is_dir() else []
    return out


def has_images(ds: BeirDataset) -> bool:
    """Whether the corpus has images (Tasks 2–4): ``image_dir`` is set, or a local parquet corpus has an ``image``
    column (a hub corpus is only read after its fetch: give ``image_dir`` or a local copy)."""
    if ds.image_dir:
        return True
    if ds.root is None:
        return False
    try:
        files = find_table(resolve_path(ds.root), "corpus")
    except DataError:
        return False
    return files[0].suffix == ".parquet" and "image" in pq.read_schema(files[0]).names


def read_frames(ds: BeirDataset, domain: str, raw_root: str | Path | None = None) -> SourceFrames:
    """The BEIR files of ``ds`` (its ``root``, or ``raw_root``: the fetched hub snapshot) as MM-BRIGHT tables.

    Raises:
        DataError: a missing file, bad JSON, a missing id or text, a malformed qrels line (file, row, field).
    """
    root = Path(raw_root) if raw_root is not None else resolve_path(ds.root)
    qrels, qrels_files = read_qrels(root, ds.split)
    docs, images = [], []
    image_files = _image_files(root / ds.image_dir) if ds.image_dir else {}
    for rec, f, i in read_records(find_table(root, "corpus")):
        did = _id_of(rec, f, i)
        text = as_text(rec.get("text"), f, i, "text", f"the text of document {did!r}")
        if text is None and "image" not in rec and did not in image_files:
            raise DataError(f, f"missing text for document {did!r}", i, "text")
        title = as_text(rec.get("title"), f, i, "title", f"the title of document {did!r}") if ds.title else None
        content = " ".join(t for t in (title, text) if t and t.strip())
        docs.append((did, content, f, i))
        if did in image_files:
            p = image_files[did]
            images.append({"path": f"{ds.image_dir}/{p.name}", "bytes": p.read_bytes(), "doc": norm_ref(did), "_file": str(p), "_row": 0})
        elif "image" in rec and not is_null(rec["image"]):
            cell = rec["image"]
            data = cell.get("bytes") if isinstance(cell, dict) else cell
            suffix = Path(str(cell.get("path") or "")).suffix if isinstance(cell, dict) else ""
            images.append({"path": f"images/{did}{suffix}", "bytes": data, "doc": norm_ref(did), "_file": f, "_row": i})
    queries = []
    for rec, f, i in read_records(find_table(root, "queries")):
        qid = _id_of(rec, f, i)
        if qid in qrels:  # BEIR's loader keeps the queries judged in the split
            key = "text" if "text" in rec else "query"
            text = as_text(rec.get(key), f, i, key, f"the text of query {qid!r}")
            if text is None or not text.strip():
                raise DataError(f, f"empty query text for query {qid!r}", i, key)
            queries.append({"id": qid, "query": text, "_file": f, "_row": i})
    gold = split_qrels(qrels)
    ex = examples_frame([q | {"gold_ids": gold[q["id"]]} for q in queries])
    frames: dict[str, pd.DataFrame | None] = {"docs": docs_frame(docs), "ex": ex, "exm": None}
    if images:
        by_doc = {im["doc"]: im["path"] for im in images}
        exm = ex.copy()
        exm["positive_images"] = [[by_doc[d] for d in g if d in by_doc] for g in exm["gold_ids"]]
        exm["negative_images"] = [[] for _ in range(len(exm))]
        frames |= {"exm": exm, "dimg": pd.DataFrame(images).drop(columns="doc"), "qimg": None}
    return SourceFrames(frames, root, qrels, {"split": ds.split, "qrels_files": qrels_files})
