"""TREC run files and deterministic top-k selection.

A run is ``{qid: [(doc_id, score), ...]}`` in rank order. On disk: ``qid Q0 doc_id rank score tag``,
one line per retrieved document, queries in sorted order.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from mmir.core.errors import DataError
from mmir.core.io import atomic_path

Run = dict[str, list[tuple[str, float]]]


def top_k(scores: np.ndarray, k: int, exclude: Iterable[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best entries of a 1-D score vector, excluded indices removed.

    Ties are broken by corpus order (lower index first), so a run never depends on sort stability.

    Args:
        scores: shape ``(n,)``, any float dtype; higher is better.
        k: number wanted; fewer are returned when fewer remain.
        exclude: corpus indices that must not be returned.

    Returns:
        ``(indices int64 (m,), scores float64 (m,))`` in rank order, ``m = min(k, n - |exclude|)``.
    """
    s = np.asarray(scores)
    excl = np.unique(np.fromiter(exclude, dtype=np.int64))
    if excl.size:
        s = s.astype(np.float64)  # a copy: the caller's scores are never modified
        s[excl] = -np.inf
    m = min(k, s.size - excl.size)
    if m <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if m < s.size:
        # Everything scoring at least the m-th best value is a candidate, so ties at the cut are kept
        # and then ordered by index.
        kth = np.partition(s, s.size - m)[s.size - m]
        cand = np.flatnonzero(s >= kth)
    else:
        cand = np.arange(s.size)
    cand = cand[s[cand] > -np.inf]  # excluded entries never come back
    order = np.lexsort((cand, -s[cand]))[:m]
    idx = cand[order]
    return idx.astype(np.int64), s[idx].astype(np.float64)


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
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(path, f"line {i}: expected 'qid Q0 docid rank score tag', got {line!r}")
        try:
            tmp.setdefault(parts[0], []).append((int(parts[3]), parts[2], float(parts[4])))
        except ValueError as exc:
            raise DataError(path, f"line {i}: bad rank or score in {line!r}") from exc
    return {q: [(d, s) for _, d, s in sorted(v)] for q, v in tmp.items()}
