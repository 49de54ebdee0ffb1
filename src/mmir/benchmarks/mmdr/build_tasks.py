"""MMDR tasks from a prepared MM-BRIGHT-layout domain (spec §1 task schema).

The first ``max_tasks`` queries in topic order with at least one ``ok`` image; the images' alt text is the VEF
ground truth (``Image <i>: <alt>`` lines). Outputs in ``out_dir``: ``tasks.jsonl``, ``ground_truth.jsonl``,
``images/...`` and ``summary.json``.
"""

from __future__ import annotations

import json
import logging
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mmir.benchmarks.mmdr.tasks import Task, load_tasks
from mmir.core.errors import DataError
from mmir.core.io import write_bytes, write_json, write_text

log = logging.getLogger(__name__)

TASKS_FILE = "tasks.jsonl"
GT_FILE = "ground_truth.jsonl"
IMAGES_DIR = "images"
SUMMARY_FILE = "summary.json"


def _require(frame: pd.DataFrame, file: Path, cols: list[str]) -> None:
    for c in cols:
        if c not in frame.columns:
            raise DataError(str(file), f"missing column {c!r} (has {sorted(frame.columns)})", field=c)


def _read(prepared: Path, name: str, cols: list[str]) -> pd.DataFrame:
    f = prepared / name
    if not f.exists():
        raise DataError(str(f), "file not found (run the prepare step for this domain first)")
    try:
        frame = pd.read_parquet(f)
    except Exception as e:  # noqa: BLE001  (pyarrow raises several types for a corrupt file)
        raise DataError(str(f), f"unreadable parquet: {type(e).__name__}: {e}") from e
    _require(frame, f, cols)
    return frame


def _safe_rel(path: str, file: Path, row: int, field: str) -> str:
    """``path`` as a relative POSIX path that stays inside its root (no ``..``, not absolute)."""
    p = str(path).replace("\\", "/")
    norm = posixpath.normpath(p)
    if not p or p.startswith("/") or norm.startswith("..") or norm == ".":
        raise DataError(str(file), f"image path {path!r} must be a relative path inside the dataset", row=row, field=field)
    return norm


@dataclass
class BuiltTask:
    """A loaded task plus where it came from: ``dataset``, ``domain``, ``topic_qid`` (the query id of the
    prepared domain, used to look the query up in run files) and ``image_paths`` (the images' dataset
    paths, in the order of ``task.images``)."""

    task: Task
    dataset: str
    domain: str
    topic_qid: str
    image_paths: tuple[str, ...] = ()


def select_topics(topics: pd.DataFrame, image_ok: dict[str, bool],
                  max_tasks: int | None) -> tuple[list[tuple[int, str, str, list[str]]], dict[str, int]]:
    """The first ``max_tasks`` topics (topic order) with a usable image: ``([(row, qid, query, paths)], counts)``."""
    chosen: list[tuple[int, str, str, list[str]]] = []
    counts = {"topics": int(len(topics)), "with_images": 0, "images_dropped": 0, "no_usable_image": 0}
    for row, (qid, query, paths) in enumerate(zip(topics["qid"], topics["query"], topics["image_paths"])):
        paths = [str(p) for p in (paths if paths is not None else [])]
        if not paths:
            continue
        counts["with_images"] += 1
        if max_tasks is not None and len(chosen) >= max_tasks:
            continue
        usable = [p for p in paths if image_ok.get(p, False)]
        counts["images_dropped"] += len(paths) - len(usable)
        if not usable:
            counts["no_usable_image"] += 1
            continue
        chosen.append((row, str(qid), str(query), usable))
    return chosen, counts


def ground_truth_text(alts: list[str]) -> str:
    """``Image <i>: <alt>`` lines for the non-empty alt texts (``""`` when there is none)."""
    return "\n".join(f"Image {i}: {a.strip()}" for i, a in enumerate(alts, 1) if a and a.strip())


def build_tasks(prepared_dir: str | Path, dataset: str, domain: str, out_dir: str | Path, max_tasks: int | None) -> dict[str, Any]:
    """Write the MMDR tasks of one prepared domain; returns the summary.

    Raises:
        DataError: a prepared file is missing or unreadable, lacks a column, or an image path escapes the
            dataset (names file, row and field).
    """
    prep, out = Path(prepared_dir), Path(out_dir)
    topics = _read(prep, "topics.parquet", ["qid", "query", "image_paths"])
    qi_file = prep / "query_images.parquet"
    qimgs = _read(prep, "query_images.parquet", ["path", "alt", "bytes", "ok"])
    image_ok = {str(p): bool(ok) and b is not None and len(b) > 0 for p, b, ok in zip(qimgs["path"], qimgs["bytes"], qimgs["ok"])}
    row_of = {str(p): i for i, p in enumerate(qimgs["path"])}
    chosen, counts = select_topics(topics, image_ok, max_tasks)

    task_lines, gt_lines, n_images, n_without_gt = [], [], 0, 0
    written: set[str] = set()
    for _row, qid, query, paths in chosen:
        rels, alts = [], []
        for p in paths:
            i = row_of[p]
            rel = _safe_rel(p, qi_file, i, "path")
            if rel not in written:
                write_bytes(out / IMAGES_DIR / rel, bytes(qimgs["bytes"].iloc[i]))
                written.add(rel)
            rels.append(f"{IMAGES_DIR}/{rel}")
            alt = qimgs["alt"].iloc[i]
            alts.append("" if alt is None else str(alt))
        n_images += len(rels)
        gt = ground_truth_text(alts)
        n_without_gt += not gt
        task_lines.append({
            "qid": qid, "title": f"{dataset}/{domain} question", "body": query, "images": rels, "set": "research",
            "language": "en", "tags": [dataset, domain],
            "mmir": {"dataset": dataset, "domain": domain, "topic_qid": qid, "image_paths": paths},
        })
        gt_lines.append({"qid": qid, "gt": gt})
    write_text(out / TASKS_FILE, "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in task_lines))
    write_text(out / GT_FILE, "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in gt_lines))
    summary = {"dataset": dataset, "domain": domain, "max_tasks": max_tasks, "selection": "first in topic order with >= 1 usable image",
               **counts, "tasks": len(task_lines), "images": n_images, "image_files": len(written),
               "tasks_without_ground_truth": n_without_gt, "qids": [t["qid"] for t in task_lines]}
    write_json(out / SUMMARY_FILE, summary)
    log.info("read %s/topics.parquet (%d topics, %d with images) and query_images.parquet (%d images); wrote %d tasks "
             "(%d images, %d files) to %s; skipped %d topics over max_tasks=%s, %d with no usable image, %d images "
             "missing or not ok; %d tasks without alt text (VEF 0)", prep, counts["topics"], counts["with_images"], len(qimgs),
             len(task_lines), n_images, len(written), out, max(0, counts["with_images"] - len(task_lines) - counts["no_usable_image"]),
             max_tasks, counts["no_usable_image"], counts["images_dropped"], n_without_gt)
    return summary


def load_built_tasks(tasks_dir: str | Path) -> list[BuiltTask]:
    """Tasks written by :func:`build_tasks` (with ground truth), each with its dataset, domain and topic qid.

    Raises:
        DataError: unreadable files, or a task line without the ``mmir`` block (names file, row, field).
    """
    d = Path(tasks_dir)
    tasks = load_tasks(d / TASKS_FILE, gt_path=d / GT_FILE)
    lines = (d / TASKS_FILE).read_text(encoding="utf-8").split("\n")
    out = []
    for t in tasks:
        meta = json.loads(lines[t.index]).get("mmir")
        if not isinstance(meta, dict) or not all(isinstance(meta.get(k), str) for k in ("dataset", "domain", "topic_qid")):
            raise DataError(str(d / TASKS_FILE), "task has no 'mmir' block with dataset, domain and topic_qid", row=t.index, field="mmir")
        out.append(BuiltTask(t, meta["dataset"], meta["domain"], meta["topic_qid"], tuple(meta.get("image_paths") or ())))
    return out
