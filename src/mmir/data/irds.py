"""Any ir_datasets id (MacAvaney et al., SIGIR 2021): documents, queries and qrels through its own iterators
(``docs_iter``, ``queries_iter``, ``qrels_iter``), its files in its own cache (``cache_dir`` = ``IR_DATASETS_HOME``).

The text of a document or query joins the configured fields (``doc_fields``, ``query_fields``) with a space (surrounding
whitespace: ``integrity.text_whitespace``, as for every source); a field the record type lacks stops with the fields it
has. The queries are joined to the qrels as every source's are (:func:`mmir.data.judgements.attach`: unjudged queries
follow ``integrity.unjudged_queries``). Rows in messages are 0-based positions in the iterator, the "file" is
``irds://<dataset_id>/<docs|queries|qrels>``; an exception inside ir_datasets becomes such a DataError
(:func:`records`). Pinned by the ir_datasets version in pyproject.toml.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

from mmir.config.models import IrDatasetsDataset
from mmir.core.errors import DataError
from mmir.core.paths import resolve_path
from mmir.data.checks import Checks
from mmir.data.frames import SourceFrames, docs_frame, examples_frame
from mmir.data.judgements import Judgement, attach
from mmir.data.parquet import as_text


def unknown_id(ds: IrDatasetsDataset) -> str | None:
    """Why ``ds.dataset_id`` is not in ``ir_datasets.registry`` (None when it is): sets ``IR_DATASETS_HOME`` to
    ``cache_dir`` before the first import and imports ``register_module`` (local datasets) first. Offline: the
    registry is the installed package's catalogue, nothing is downloaded.

    Raises:
        ImportError: ``register_module`` cannot be imported.
    """
    if ds.cache_dir:
        os.environ["IR_DATASETS_HOME"] = str(resolve_path(ds.cache_dir))
    import ir_datasets

    if ds.register_module:
        importlib.import_module(ds.register_module)
    if ds.dataset_id in ir_datasets.registry:
        return None
    return f"not an ir_datasets id (ir_datasets {ir_datasets.__version__}; a local dataset must be registered by register_module)"


def load(ds: IrDatasetsDataset):
    """The ir_datasets dataset object of ``ds``, after :func:`unknown_id`'s set-up and check.

    Raises:
        DataError: an unknown id, or a dataset without documents, queries or qrels.
    """
    where = f"irds://{ds.dataset_id}"
    why = unknown_id(ds)
    if why:
        raise DataError(where, why)
    import ir_datasets

    dataset = ir_datasets.load(ds.dataset_id)
    for part in ("docs", "queries", "qrels"):
        if not getattr(dataset, f"has_{part}")():
            raise DataError(where, f"the dataset has no {part}")
    return dataset


def _text(rec, fields: list[str], file: str, row: int, what: str) -> str:
    """The configured fields joined with a space (a blank field adds nothing); surrounding whitespace is left to
    ``integrity.text_whitespace``, as for every source."""
    parts = []
    for name in fields:
        if name not in rec._fields:
            raise DataError(file, f"{type(rec).__name__} has no field {name!r} (has: {', '.join(rec._fields)})", row, name)
        value = as_text(getattr(rec, name), file, row, name, what)
        if value and value.strip():
            parts.append(value)
    return " ".join(parts)


def records(dataset, part: str, where: str) -> Iterator[tuple[int, object]]:
    """``(0-based position, record)`` of ``dataset.<part>_iter()``; an exception raised inside ir_datasets (e.g. its
    BEIR qrels reader's bare ``assert`` on the header line) becomes a DataError naming ``where`` and the position.

    Raises:
        DataError: naming ``irds://<id>/<part>``, the row being read, the exception and the ir_datasets line that raised.
    """
    i = 0
    try:
        for rec in getattr(dataset, f"{part}_iter")():
            yield i, rec
            i += 1
    except DataError:
        raise
    except Exception as exc:  # anything ir_datasets (or its file) raises: name the place instead of a bare traceback
        raise DataError(where, f"ir_datasets failed reading this record: {_describe(exc)}{_file_hint(dataset, part)}", i) from exc


def _describe(exc: BaseException) -> str:
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    at = f" at {Path(last.filename).name}:{last.lineno} `{last.line}`" if last is not None and last.line else ""
    return f"{type(exc).__name__}{': ' + str(exc) if str(exc) else ' (no message)'}{at}"


def _file_hint(dataset, part: str) -> str:
    try:
        path = getattr(dataset, f"{part}_path")()
    except Exception:  # not every dataset has a local file (or a {part}_path)
        return ""
    return f" (its file: {path})" if path else ""


def read_frames(ds: IrDatasetsDataset, domain: str, raw_root: str | Path | None = None) -> SourceFrames:
    """The documents, queries and qrels of ``ds.dataset_id`` as MM-BRIGHT tables (graded qrels kept; queries joined
    to the qrels by :func:`mmir.data.judgements.attach`, as for every source).

    Raises:
        DataError: naming ``irds://<id>/<part>``, the 0-based row and the field.
    """
    dataset = load(ds)
    base = f"irds://{ds.dataset_id}"
    checks = Checks(ds.integrity.model_dump(), base)
    f = f"{base}/qrels"
    judgements = [Judgement(str(q.query_id), str(q.doc_id), int(q.relevance), f, i) for i, q in records(dataset, "qrels", f)]
    f = f"{base}/docs"
    docs = [(d.doc_id, _text(d, ds.doc_fields, f, i, f"the text of document {d.doc_id!r}"), f, i, None, "doc_id")
            for i, d in records(dataset, "docs", f)]
    f = f"{base}/queries"
    queries = [{"id": str(q.query_id), "query": _text(q, ds.query_fields, f, i, f"the text of query {q.query_id!r}"),
                "_file": f, "_row": i, "_id_field": "query_id"} for i, q in records(dataset, "queries", f)]
    queries, graded = attach(queries, judgements, checks, f, [f"{base}/qrels"])
    import ir_datasets

    report = {"ir_datasets": {"id": ds.dataset_id, "version": ir_datasets.__version__}}
    return SourceFrames({"docs": docs_frame(docs), "ex": examples_frame(queries), "exm": None}, base, graded, report, checks)
