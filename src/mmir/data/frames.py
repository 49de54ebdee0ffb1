"""What a source reader hands to :func:`mmir.data.prepare.load_frames`: its records as the MM-BRIGHT tables.

Every source (``beir``, ``ir_datasets``, ``bright``, ``trec``) reads its own files into these tables, each row naming
the file and 0-based row it came from (``_file``, ``_row``) and, for line-based text files, its 1-based ``_line``, so
the one set of prepare checks names file, place and field for every source. A source with qrels files joins them to
its queries with :func:`mmir.data.judgements.attach`, which adds ``_judged`` and the provenance of each gold id
(``_gold_at``) to the examples.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.core.errors import DataError
from mmir.data.parquet import is_null

DOC_COLUMNS = ["id", "content", "_file", "_row", "_line", "_id_field"]
EXAMPLE_COLUMNS = ["id", "query", "gold_ids", "negative_ids", "image_paths", "gold_answers", "_file", "_row"]
#: optional columns of the examples table: 1-based line, whether the qrels judge the query, each gold id's place,
#: the source's names of the query text field and of the id field (in messages)
EXAMPLE_EXTRAS = ["_line", "_judged", "_gold_at", "_query_field", "_id_field"]


@dataclass
class SourceFrames:
    """``frames``: ``docs``, ``ex``, ``exm`` (None without Task 2–4 data) and, with ``exm``, ``dimg`` / ``qimg``;
    ``root``: the dataset folder (named in messages, image paths are checked against it); ``graded``: the source's
    graded qrels ``{qid: {doc_id: rel}}``, or None when its gold ids are binary; ``checks``: what the reader's own
    checks counted (:class:`mmir.data.checks.Checks`, e.g. the qrels rows :func:`~mmir.data.judgements.attach`
    dropped), or None."""

    frames: dict[str, pd.DataFrame | None]
    root: str | Path
    graded: dict[str, dict[str, int]] | None = None
    report: dict = field(default_factory=dict)
    checks: object | None = None


def docs_frame(rows: Iterable[tuple], source: str | None = None) -> pd.DataFrame:
    """``(id, content, file, row[, line[, id field]])`` tuples as the ``documents`` table (``line``: 1-based, text
    files; ``id field``: the source's name of the id, in messages; None = ``id``).

    Raises:
        DataError: naming ``source`` (the corpus file or files), when given and no row came from it.
    """
    frame = pd.DataFrame([tuple(r) + (None,) * (6 - len(r)) for r in rows], columns=DOC_COLUMNS)
    if source is not None and frame.empty:
        raise DataError(source, "the corpus is empty: no document in it (an empty file, or blank lines only)")
    return frame


def examples_frame(rows: list[dict]) -> pd.DataFrame:
    """Query records (the keys of :data:`EXAMPLE_COLUMNS` and :data:`EXAMPLE_EXTRAS`; absent lists read as []) as
    the ``examples`` table."""
    full = [{"negative_ids": [], "image_paths": [], "gold_answers": [], **r} for r in rows]
    extras = [c for c in EXAMPLE_EXTRAS if any(c in r for r in rows)]
    return pd.DataFrame(full, columns=EXAMPLE_COLUMNS + extras)


def line_of(value) -> int | None:
    """A ``_line`` cell as an int, None when absent (parquet rows, or a table without the column)."""
    return None if value is None or is_null(value) else int(value)


def split_qrels(qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """The gold ids of graded qrels: the documents with rel > 0, in the file's order."""
    return {q: [d for d, r in v.items() if r > 0] for q, v in qrels.items()}
