"""BEIR-format collections (Thakur et al., NeurIPS 2021 Datasets track; the layout of BEIR's ``GenericDataLoader``,
shared by MTEB retrieval sets and ViDoRe's BEIR exports):

- ``corpus.jsonl`` (or ``.jsonl.gz``; or parquet ``corpus.parquet`` / ``corpus/*.parquet``): ``_id``, ``title``, ``text``,
  optionally ``image`` (bytes, or the hub's ``{bytes, path}`` struct) for image corpora;
- ``queries.jsonl`` (same forms): ``_id``, ``text``;
- ``qrels/<split>.tsv`` (header ``query-id corpus-id score``; or ``qrels/<split>*.parquet``).

As BEIR's loader does, only the queries judged in the split are kept (``integrity.unjudged_queries: drop``, counted),
and a document's text is ``title + " " + text`` (``title: false`` keeps the text alone). Image files
``<image_dir>/<corpus-id>.<ext>`` or an ``image`` column make the
corpus images of Task 3 (a query's positive images: the images of its judged documents). Local (``root``) or fetched
from the hub (``repo_id`` at ``revision``, :func:`mmir.data.hub.fetch_files`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from mmir.config.models import BeirDataset
from mmir.core.errors import DataError
from mmir.core.paths import resolve_path
from mmir.data.checks import Checks
from mmir.data.frames import SourceFrames, docs_frame, examples_frame
from mmir.data.judgements import Judgement, attach
from mmir.data.lines import numbered, read_text
from mmir.data.parquet import as_id, as_text, is_null

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


def read_records(files: list[Path], checks: Checks | None = None) -> list[tuple[dict, str, int, int | None]]:
    """``(record, file, 0-based row, 1-based line or None)`` of JSON-lines (lines: :mod:`mmir.data.lines`) or parquet
    files (line None). Control characters inside strings are read as they are (``strict=False``, as pandas and
    pyarrow read JSON). Blank lines are skipped and counted in ``checks`` (``blank_lines``). Raises DataError naming
    the line of bad JSON or UTF-8, or a file with CR-only line ends."""
    out = []
    for f in files:
        if f.suffix == ".parquet":
            try:
                df = pq.read_table(f).to_pandas()
            except Exception as exc:  # pyarrow raises several types for corrupt files
                raise DataError(f, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc
            out += [(rec, str(f), i, None) for i, rec in enumerate(df.to_dict("records"))]
            continue
        blanks: list[int] = []
        for i, (n, line) in enumerate(numbered(read_text(f), f, blanks)):
            try:
                rec = json.loads(line, strict=False)
            except json.JSONDecodeError as exc:
                raise DataError(f, f"not a JSON object: {exc.msg} at column {exc.colno}", line=n) from exc
            if not isinstance(rec, dict):
                raise DataError(f, f"expected a JSON object, got {type(rec).__name__}", line=n)
            out.append((rec, str(f), i, n))
        if checks is not None:
            checks.blank_lines(f, blanks)
    return out



def _id_of(rec: dict, file: str, row: int, line: int | None) -> tuple[str, str]:
    """``(id, the key holding it)`` of a corpus or queries record."""
    key = next((k for k in _ID if k in rec), "_id")
    try:
        value = as_id(rec.get(key), file, row, key)
    except DataError as exc:
        raise exc.at_line(line) from None
    if value is None:
        raise DataError(file, "empty or missing id", row, key, line)
    return value, key


def read_qrels(root: Path, split: str, checks: Checks | None = None) -> tuple[list[Judgement], list[str]]:
    """The rows of ``qrels/<split>.tsv`` (header ``query-id corpus-id score``, skipped as BEIR's loader skips its
    first line; a headerless file is read from its first line) or ``qrels/<split>*.parquet``, in file order, with
    their lines (rows), and the files read. Ids are kept exactly as written (a byte order mark is dropped); blank
    lines are counted in ``checks``.

    Raises:
        DataError: a missing file, a row without three fields, an empty id or a grade that is not an integer
            (file, line, field).
    """
    tsv = root / "qrels" / f"{split}.tsv"
    shards = sorted((root / "qrels").glob(f"{split}*.parquet")) if (root / "qrels").is_dir() else []
    if tsv.is_file():
        blanks: list[int] = []
        rows = list(numbered(read_text(tsv), tsv, blanks))
        if checks is not None:
            checks.blank_lines(tsv, blanks)
        if rows and rows[0][1].split("\t")[-1].strip().lower() == "score":
            rows = rows[1:]  # BEIR's header line
        recs = []
        for i, (n, line) in enumerate(rows):
            parts = line.split("\t")
            if len(parts) != 3:
                raise DataError(tsv, f"expected 'query-id<TAB>corpus-id<TAB>score', got {len(parts)} field(s): {line[:80]!r}",
                                line=n)
            recs.append(({"query-id": parts[0], "corpus-id": parts[1], "score": parts[2]}, str(tsv), i, n))
        files = [str(tsv)]
    elif shards:
        recs = read_records(shards, checks)
        files = [str(f) for f in shards]
    else:
        raise DataError(tsv, f"missing: no qrels/{split}.tsv or qrels/{split}*.parquet (split: {split})")
    out = []
    for rec, f, i, n in recs:
        try:
            q = as_id(rec.get("query-id"), f, i, "query-id")
            d = as_id(rec.get("corpus-id"), f, i, "corpus-id")
        except DataError as exc:
            raise exc.at_line(n) from None
        if q is None or d is None:
            raise DataError(f, "empty query-id or corpus-id", i, "query-id" if q is None else "corpus-id", n)
        try:
            score = int(str(rec.get("score")).strip())
        except ValueError as exc:
            raise DataError(f, f"score {rec.get('score')!r} is not an integer", i, "score", n) from exc
        out.append(Judgement(q, d, score, f, None if n is not None else i, n))
    return out, files


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
    """The BEIR files of ``ds`` (its ``root``, or ``raw_root``: the fetched hub snapshot) as MM-BRIGHT tables: every
    query of the queries file, joined to the split's qrels (:func:`mmir.data.judgements.attach`: unjudged queries are
    then ``integrity.unjudged_queries``' to drop, as BEIR's loader does).

    Raises:
        DataError: a missing file, bad JSON, a missing id or text, a malformed qrels line, a qrels row naming an
            unknown query (file, line or row, field).
    """
    root = Path(raw_root) if raw_root is not None else resolve_path(ds.root)
    checks = Checks(ds.integrity.model_dump(), str(root))
    judgements, qrels_files = read_qrels(root, ds.split, checks)
    docs, images = [], []
    image_files = _image_files(root / ds.image_dir) if ds.image_dir else {}
    corpus_files = find_table(root, "corpus")
    for rec, f, i, n in read_records(corpus_files, checks):
        did, key = _id_of(rec, f, i, n)
        try:
            text = as_text(rec.get("text"), f, i, "text", f"the text of document {did!r}")
            title = as_text(rec.get("title"), f, i, "title", f"the title of document {did!r}") if ds.title else None
        except DataError as exc:
            raise exc.at_line(n) from None
        if text is None and "image" not in rec and did not in image_files:
            raise DataError(f, f"missing text for document {did!r}", i, "text", n)
        # BEIR's "title text" (a blank title adds nothing); surrounding whitespace: integrity.text_whitespace
        content = " ".join(t for t in (title, text) if t and t.strip())
        docs.append((did, content, f, i, n, key))
        if did in image_files:
            p = image_files[did]
            images.append({"path": f"{ds.image_dir}/{p.name}", "bytes": p.read_bytes(), "doc": did, "_file": str(p), "_row": 0})
        elif "image" in rec and not is_null(rec["image"]):
            cell = rec["image"]
            data = cell.get("bytes") if isinstance(cell, dict) else cell
            suffix = Path(str(cell.get("path") or "")).suffix if isinstance(cell, dict) else ""
            images.append({"path": f"images/{did}{suffix}", "bytes": data, "doc": did, "_file": f, "_row": i})
    queries = []
    files = find_table(root, "queries")
    for rec, f, i, n in read_records(files, checks):
        qid, id_key = _id_of(rec, f, i, n)
        key = "text" if "text" in rec else "query"
        try:
            text = as_text(rec.get(key), f, i, key, f"the text of query {qid!r}")
        except DataError as exc:
            raise exc.at_line(n) from None
        queries.append({"id": qid, "query": text, "_file": f, "_row": i, "_line": n, "_query_field": key, "_id_field": id_key})
    queries, graded = attach(queries, judgements, checks, ", ".join(str(f) for f in files), qrels_files)
    ex = examples_frame(queries)
    frames: dict[str, pd.DataFrame | None] = {"docs": docs_frame(docs, ", ".join(map(str, corpus_files))), "ex": ex, "exm": None}
    if images:
        by_doc = {im["doc"]: im["path"] for im in images}
        exm = ex.copy()
        exm["positive_images"] = [[by_doc[d] for d in g if d in by_doc] for g in exm["gold_ids"]]
        exm["negative_images"] = [[] for _ in range(len(exm))]
        frames |= {"exm": exm, "dimg": pd.DataFrame(images).drop(columns="doc"), "qimg": None}
    return SourceFrames(frames, root, graded, {"split": ds.split, "qrels_files": qrels_files}, checks)
