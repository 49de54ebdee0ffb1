"""What a source reader hands to :func:`mmir.data.prepare.load_frames`: its records as the MM-BRIGHT tables.

Every source (``beir``, ``ir_datasets``, ``bright``) reads its own files into these tables, each row naming the
file and 0-based row it came from, so the one set of prepare checks names file, row and field for every source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

DOC_COLUMNS = ["id", "content", "_file", "_row"]
EXAMPLE_COLUMNS = ["id", "query", "gold_ids", "negative_ids", "image_paths", "gold_answers", "_file", "_row"]


@dataclass
class SourceFrames:
    """``frames``: ``docs``, ``ex``, ``exm`` (None without Task 2–4 data) and, with ``exm``, ``dimg`` / ``qimg``;
    ``root``: the dataset folder (named in messages, image paths are checked against it); ``graded``: the source's
    graded qrels ``{qid: {doc_id: rel}}``, or None when its gold ids are binary."""

    frames: dict[str, pd.DataFrame | None]
    root: str | Path
    graded: dict[str, dict[str, int]] | None = None
    report: dict = field(default_factory=dict)


def docs_frame(rows: Iterable[tuple]) -> pd.DataFrame:
    """``(id, content, file, row)`` tuples as the ``documents`` table."""
    return pd.DataFrame(list(rows), columns=DOC_COLUMNS)


def examples_frame(rows: list[dict]) -> pd.DataFrame:
    """Query records (the keys of :data:`EXAMPLE_COLUMNS`; absent lists read as []) as the ``examples`` table."""
    full = [{"negative_ids": [], "image_paths": [], "gold_answers": [], **r} for r in rows]
    return pd.DataFrame(full, columns=EXAMPLE_COLUMNS)


def split_qrels(qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """The gold ids of graded qrels: the documents with rel > 0, in the file's order."""
    return {q: [d for d, r in v.items() if r > 0] for q, v in qrels.items()}
