"""TREC run files.

A run is ``{qid: [(doc_id, score), ...]}`` in rank order. On disk: ``qid Q0 doc_id rank score tag``,
one line per retrieved document, queries in sorted order.
"""

from __future__ import annotations

from pathlib import Path

from mmir.core.errors import DataError
from mmir.core.io import atomic_path
from mmir.data.lines import fields, numbered, read_text

Run = dict[str, list[tuple[str, float]]]


def write_run(path: str | Path, run: Run, tag: str) -> int:
    """Write ``run`` as a TREC run file atomically; returns the number of lines."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for qid in sorted(run):
            for rank, (doc, score) in enumerate(run[qid], 1):
                fh.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")
                n += 1
    return n


def read_run(path: str | Path) -> Run:
    """Read a TREC run file into rank order (by the file's rank column). Raises DataError on bad lines."""
    tmp: dict[str, list[tuple[int, str, float]]] = {}
    for i, line in numbered(read_text(path), path):
        parts = fields(line)
        if len(parts) != 6:
            raise DataError(path, f"line {i}: expected 'qid Q0 docid rank score tag', got {line!r}")
        try:
            tmp.setdefault(parts[0], []).append((int(parts[3]), parts[2], float(parts[4])))
        except ValueError as exc:
            raise DataError(path, f"line {i}: bad rank or score in {line!r}") from exc
    return {q: [(d, s) for _, d, s in sorted(v)] for q, v in tmp.items()}
