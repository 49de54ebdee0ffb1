"""Tie-aware measures: the expected value of a measure over every order of each group of equally scored items.

McSherry & Najork, "Computing Information Retrieval Performance Measures Efficiently in the Presence of Tied
Scores" (ECIR 2008, §3): rank by score, cut the ranking into tied groups (maximal runs of equal scores), and average
the measure over all orders within each group, in closed form. A measure that sums a per-position contribution
(DCG, precision and recall at k) is linear in the items' positions, so each item of a group gets the mean
contribution of the group's positions; a group straddling the cut-off k contributes the share of its positions
inside k. AP and RR follow from the same expectation by linearity (:func:`expected_ap`, :func:`expected_rr`).

Gains and relevance follow trec_eval as :mod:`mmir.evaluation.measures` computes it (pytrec_eval): nDCG@k gain =
the label (negative labels count 0), discount 1/log2(rank + 1), ideal DCG from every judged label; ``rel >= 1`` is
relevant for P, R, AP and RR; P@k divides by k; R@k and AP by the query's relevant count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

#: measure families with a tie-aware form here (every family :func:`mmir.evaluation.measures.trec_measure` accepts)
FAMILIES = ("ndcg_cut", "P", "recall", "map", "recip_rank")


def score_order(ranking: Sequence[tuple[str, float]]) -> tuple[list[str], np.ndarray]:
    """Item ids by descending score (stable: a run already in score order keeps its order) and their group ids.

    Args:
        ranking: ``[(item_id, score), ...]``; an id listed twice keeps its last score (as pytrec_eval's dict input).

    Returns:
        ``(ids, group)``: ``group[i]`` (int64, shape ``(n,)``) numbers the tied groups 0, 1, ... in rank order.
    """
    scores = dict(ranking)
    ids = sorted(scores, key=lambda d: -scores[d])
    s = np.fromiter((scores[d] for d in ids), dtype=float, count=len(ids))
    group = np.concatenate([[0], np.cumsum(s[1:] != s[:-1])]).astype(np.int64) if len(s) else np.zeros(0, np.int64)
    return ids, group


def _bounds(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` (int64, 0-based, end exclusive) of each tied group, in rank order."""
    if not len(group):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cuts = np.flatnonzero(np.diff(group)) + 1
    return np.concatenate([[0], cuts]).astype(np.int64), np.concatenate([cuts, [len(group)]]).astype(np.int64)


def tied_items(group: np.ndarray, depth: int | None) -> int:
    """Items of the top ``depth`` (all when None) whose score equals another retrieved item's (the group may
    continue below ``depth``): the items whose order a tie-breaking rule decides."""
    top = group if depth is None else group[:depth]
    if not len(top):
        return 0
    sizes = np.bincount(group)
    return int(np.count_nonzero(sizes[top] > 1))


def _group_means(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Mean of ``values`` over each tied group (shape ``(groups,)``)."""
    starts, ends = _bounds(group)
    return np.add.reduceat(values, starts) / (ends - starts) if len(starts) else np.zeros(0)


def expected_dcg(gains: np.ndarray, group: np.ndarray, k: int) -> float:
    """E[DCG@k] over all orders within tied groups: each group's mean gain times the sum of its positions' discounts
    inside the cut-off (McSherry & Najork §3, DCG). ``gains``: float, shape ``(n,)`` in score order."""
    n = len(gains)
    disc = np.zeros(n + 1)
    m = min(k, n)
    disc[1:m + 1] = np.cumsum(1.0 / np.log2(np.arange(2, m + 2)))
    disc[m + 1:] = disc[m]
    starts, ends = _bounds(group)
    return float(np.sum(_group_means(gains, group) * (disc[ends] - disc[starts])))


def expected_hits(rel: np.ndarray, group: np.ndarray, k: int) -> float:
    """E[relevant items in the top k]: each group's relevant share times its positions inside k."""
    starts, ends = _bounds(group)
    return float(np.sum(_group_means(rel, group) * np.clip(np.minimum(ends, k) - starts, 0, None)))


def expected_ap(rel: np.ndarray, group: np.ndarray, n_rel: int) -> float:
    """E[AP]: ``sum over positions j of P(rel at j) * E[relevant at or above j | rel at j] / j`` divided by
    ``n_rel``. In a group of n items with r relevant that starts after position s with c relevant above it,
    P(rel at s+i) = r/n and, given it, the i-1 items above it in the group hold (i-1)(r-1)/(n-1) relevant ones."""
    if n_rel <= 0 or not len(rel):
        return 0.0
    starts, ends = _bounds(group)
    size = ends - starts
    r = np.add.reduceat(rel, starts)
    above = np.concatenate([[0.0], np.cumsum(r)[:-1]])
    n_, r_, c_, s_ = (np.repeat(x, size) for x in (size, r, above, starts))
    i = np.arange(len(rel)) - s_ + 1
    inside = np.where(n_ > 1, (i - 1) * (r_ - 1) / np.maximum(n_ - 1, 1), 0.0)
    return float(np.sum((r_ / n_) * (c_ + 1 + inside) / (s_ + i))) / n_rel


def expected_rr(rel: np.ndarray, group: np.ndarray) -> float:
    """E[1/rank of the first relevant item]: in the first group holding one (n items, r relevant, after s items),
    P(first relevant at s+i) = C(n-i, r-1)/C(n, r), computed by the ratio (n-i-r+1)/(n-i) from P(i=1) = r/n."""
    starts, ends = _bounds(group)
    for s, e in zip(starts.tolist(), ends.tolist()):
        n, r = e - s, int(rel[s:e].sum())
        if not r:
            continue
        p, total = r / n, 0.0
        for i in range(1, n - r + 2):
            total += p / (s + i)
            p *= (n - i - r + 1) / (n - i) if n - i else 0.0
        return total
    return 0.0


def ideal_dcg(labels: Sequence[int], k: int) -> float:
    """DCG@k of the ideal ranking of the judged labels (positive ones, best first), as trec_eval's ``ndcg_cut``."""
    ideal = sorted((g for g in labels if g > 0), reverse=True)[:k]
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(ideal)))


def expected_query(qrels: Mapping[str, int], ranking: Sequence[tuple[str, float]],
                   specs: Mapping[str, tuple[str, int | None]]) -> dict[str, float]:
    """Tie-aware values of one query.

    Args:
        qrels: ``{item_id: label}`` of the query (judged items).
        ranking: its run, ``[(item_id, score), ...]``.
        specs: ``{measure name: (family, cut-off or None)}``; families as :data:`FAMILIES`.

    Raises:
        ValueError: a family outside :data:`FAMILIES`.
    """
    ids, group = score_order(ranking)
    labels = np.array([qrels.get(d, 0) for d in ids], dtype=float)
    gains, rel = np.clip(labels, 0, None), (labels >= 1).astype(float)
    n_rel = sum(1 for v in qrels.values() if v >= 1)
    out = {}
    for name, (fam, k) in specs.items():
        if fam == "ndcg_cut":
            idcg = ideal_dcg(list(qrels.values()), k)
            out[name] = expected_dcg(gains, group, k) / idcg if idcg > 0 else 0.0
        elif fam == "P":
            out[name] = expected_hits(rel, group, k) / k
        elif fam == "recall":
            out[name] = expected_hits(rel, group, k) / n_rel if n_rel else 0.0
        elif fam == "map":
            out[name] = expected_ap(rel, group, n_rel)
        elif fam == "recip_rank":
            out[name] = expected_rr(rel, group)
        else:
            raise ValueError(f"no tie-aware form of {name!r} (family {fam!r}; have {', '.join(FAMILIES)})")
    return out


def tie_counts(ranking: Sequence[tuple[str, float]], depth: int | None) -> int:
    """:func:`tied_items` of a run's ranking (score order, as the tie-aware measures see it)."""
    return tied_items(score_order(ranking)[1], depth)
