"""BRIGHT (Su et al., 2024; hub dataset ``xlangai/BRIGHT``): its 12 tasks as domains.

Hub layout (one parquet per task): ``documents/<task>-00000-of-00001.parquet`` and ``long_documents/…`` (id, content),
``examples/…`` (id, query, reasoning, gold_ids, gold_ids_long, excluded_ids, gold_answer) and the reasoning-query
configs ``<model>_reason/…`` (the same rows, ``query`` rewritten by the model). As the released ``run.py`` does:

- ``long_context: true`` ranks ``long_documents`` and judges by ``gold_ids_long`` (8 tasks have long documents);
- a query's ``excluded_ids`` are removed from its ranking (``"N/A"`` = none): they become ``excluded.tsv``, which
  ``evaluation.protocol: official`` removes;
- ``gold_answer`` is kept (``gold_answers``) for RAG; ``"N/A"`` = none.

``qrels_from: anserini`` / ``anserini-fixed`` judges by anserini-tools' ``qrels.bright-<task>[.fixed].txt`` (task names
with ``-`` for ``_``), the corrected labels Pyserini's BRIGHT runs use.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mmir.config.models import BrightDataset
from mmir.core.errors import DataError
from mmir.core.paths import resolve_path
from mmir.data.frames import SourceFrames
from mmir.data.parquet import as_id, as_text, read_config

BRIGHT_TASKS = ["biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow", "sustainable_living",
                "leetcode", "pony", "aops", "theoremqa_theorems", "theoremqa_questions"]
#: the tasks with a long_documents split (run.py's --long_context)
LONG_TASKS = ["biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow", "sustainable_living",
              "pony"]
EXAMPLE_COLUMNS = ["id", "query", "gold_ids", "gold_ids_long", "excluded_ids"]


def anserini_name(task: str) -> str:
    """anserini-tools' spelling of a task: ``earth_science`` -> ``earth-science``."""
    return task.replace("_", "-")


def anserini_qrels_file(root: str | Path, task: str, fixed: bool) -> Path:
    """``<root>/qrels/qrels.bright-<task>[.fixed].txt``."""
    return Path(root) / "qrels" / f"qrels.bright-{anserini_name(task)}{'.fixed' if fixed else ''}.txt"


def configs(ds: BrightDataset) -> list[str]:
    """The hub configs one domain of ``ds`` reads (what the fetch downloads), the documents first."""
    return ["long_documents" if ds.long_context else "documents", "examples"] + [f"{r}_reason" for r in ds.reasoning]


def raw_root(ds: BrightDataset, fetched: str | Path | None) -> Path:
    """The folder holding the hub files: ``root`` (a local copy) or the fetched snapshot."""
    return resolve_path(ds.root) if ds.root is not None else Path(fetched)


def read_frames(ds: BrightDataset, domain: str, fetched: str | Path | None = None) -> SourceFrames:
    """One BRIGHT task as MM-BRIGHT tables (``excluded_ids`` as ``negative_ids``, ``gold_answer`` as ``gold_answers``).

    Raises:
        DataError: a task that is not BRIGHT's, long documents of a task without them, a missing file or column.
    """
    root = raw_root(ds, fetched)
    if domain not in BRIGHT_TASKS:
        raise DataError(root, f"{domain!r} is not a BRIGHT task (tasks: {', '.join(BRIGHT_TASKS)})")
    if ds.long_context and domain not in LONG_TASKS:
        raise DataError(root / "long_documents", f"BRIGHT has no long documents for {domain!r} (long_context has: "
                                                 f"{', '.join(LONG_TASKS)})")
    docs = read_config(root, "long_documents" if ds.long_context else "documents", domain, ["id", "content"])
    ex = read_config(root, "examples", domain, EXAMPLE_COLUMNS)
    gold_col = "gold_ids_long" if ds.long_context else "gold_ids"
    graded, report, checks = None, {"bright": {"long_context": ds.long_context, "qrels_from": ds.qrels_from}}, None
    ex = ex.assign(gold_ids=ex[gold_col], negative_ids=ex["excluded_ids"],
                   gold_answers=ex["gold_answer"] if "gold_answer" in ex.columns else None, image_paths=[[]] * len(ex))
    if ds.qrels_from != "hub":
        from mmir.data.checks import Checks
        from mmir.data.judgements import attach
        from mmir.data.trec import read_qrels_rows

        path = anserini_qrels_file(resolve_path(ds.anserini_root), domain, ds.qrels_from == "anserini-fixed")
        if not path.is_file():
            raise DataError(path, f"missing: anserini qrels for {domain!r} (qrels_from: {ds.qrels_from})")
        checks = Checks(ds.integrity.model_dump(), str(root))
        recs = [r | {"id": as_id(r["id"], r["_file"], r["_row"], "id")} for r in ex.to_dict("records")]
        recs, graded = attach(recs, read_qrels_rows(path), checks, str(ex["_file"].iloc[0]) if len(ex) else str(root), [str(path)])
        ex = pd.DataFrame(recs)
        report["bright"]["qrels_file"] = str(path)
    return SourceFrames({"docs": docs, "ex": ex, "exm": None}, root, graded, report, checks)


def read_reasoning(ds: BrightDataset, domain: str, variant: str, fetched: str | Path | None = None) -> pd.DataFrame:
    """The reasoning queries of config ``<variant>_reason`` for one task: ``qid, query`` (a query variant of Task 1).

    Raises:
        DataError: a missing file, an empty id or query (file, row, field).
    """
    frame = read_config(raw_root(ds, fetched), f"{variant}_reason", domain, ["id", "query"])
    rows = []
    for qid, query, f, r in zip(frame["id"], frame["query"], frame["_file"], frame["_row"]):
        q = as_id(qid, f, r, "id")
        text = as_text(query, f, r, "query", f"the reasoning query of {q!r}")
        if q is None or not text or not text.strip():
            raise DataError(f, "empty id or query", r, "id" if q is None else "query")
        rows.append((q, text))
    return pd.DataFrame(rows, columns=["qid", "query"])
