"""Putting a reranked head back into a first-stage ranking, with strict scores.

A first-stage ranking is ``[(item_id, score), ...]`` in rank order (:data:`mmir.retrieval.runs.Run`). The top
``depth`` items are reordered; the items below ``depth`` follow in their first-stage order. The written scores are
``n, n-1, ..., 1`` (``n`` = the ranking's length): strictly decreasing, so no scorer (trec_eval, pytrec_eval, a
``tie_order`` setting) can reorder ties, and the run file's order is the reranked order.
"""

from __future__ import annotations

from collections.abc import Sequence

from mmir.core.errors import DataError
from mmir.retrieval.runs import Run


def order_by_scores(scores: Sequence[float]) -> list[int]:
    """Positions sorted by descending score, ties (and NaN, placed last) kept in input (first-stage) order.

    Returns:
        A permutation of ``range(len(scores))``.
    """
    def key(i: int) -> tuple[int, float, int]:
        s = float(scores[i])
        return (1, 0.0, i) if s != s else (0, -s, i)  # NaN: an unscored candidate goes below every scored one

    return sorted(range(len(scores)), key=key)


def apply_order(ranking: Sequence[tuple[str, float]], head_order: Sequence[int]) -> list[tuple[str, float]]:
    """``ranking`` with its first ``len(head_order)`` items in ``head_order`` (positions into the head), the rest
    after them in their own order; strict scores ``n .. 1``.

    Raises:
        ValueError: ``head_order`` is not a permutation of ``range(len(head_order))`` or is longer than the ranking.
    """
    d = len(head_order)
    if d > len(ranking) or sorted(head_order) != list(range(d)):
        raise ValueError(f"head order {list(head_order)[:10]}... is not a permutation of the first {d} of "
                         f"{len(ranking)} items")
    ids = [ranking[i][0] for i in head_order] + [item for item, _ in ranking[d:]]
    n = len(ids)
    return [(item, float(n - r)) for r, item in enumerate(ids)]


def head(ranking: Sequence[tuple[str, float]], depth: int) -> list[str]:
    """The item ids of the top ``depth`` (all of them when the ranking is shorter)."""
    return [item for item, _ in ranking[:depth]]


def check_run(run: Run, qids: Sequence[str], depth: int, run_file: str, *, items_known: set[str] | None = None,
              top_k: int | None = None) -> int:
    """Check a first-stage run against its task before reranking; returns the longest ranking's length.

    A ``depth`` larger than every ranking is an error, unless the rankings are shorter than ``top_k`` (the first stage's
    ``evaluation.top_k``): then the first stage ranked every item it could (a small, sampled corpus) and the whole
    rankings are reranked.

    Raises:
        DataError: naming ``run_file`` and the first query of the run that is not one of the task's ``qids``, the first
            item that is not one of the task's items (when ``items_known``), or a ``depth`` larger than every ranking
            of the run that ``top_k`` cut (the first stage retrieved fewer items than the reranker should rerank: lower
            ``depth`` or raise ``evaluation.top_k``).
    """
    known = set(qids)
    stray = [q for q in run if q not in known]
    if stray:
        raise DataError(run_file, f"{len(stray)} queries of the run are not queries of this task, e.g. {stray[0]!r} "
                        "(a run of another task or domain?)", field="qid")
    if items_known is not None:
        for q, ranking in run.items():
            bad = next((i for i, _ in ranking if i not in items_known), None)
            if bad is not None:
                raise DataError(run_file, f"query {q!r} ranks {bad!r}, which is not an item of this task", field="docid")
    longest = max((len(r) for r in run.values()), default=0)
    if run and depth > longest and (top_k is None or longest >= top_k):
        raise DataError(run_file, f"rerank depth {depth} is larger than the run's longest ranking ({longest} items): "
                        "lower rerank.runs[].depth or raise evaluation.top_k", field="rank")
    return longest
