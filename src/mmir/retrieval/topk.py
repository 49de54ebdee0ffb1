"""Exact top-k maximum inner product search in bounded memory (dense retrieval over precomputed vectors).

The corpus is scanned in chunks of ``chunk_size`` rows (cast to float32), so working memory is
``O(chunk_size * (d + query_block))`` whatever the corpus size. Order: score descending, ties by lower corpus
index, also across chunk borders and at the k-th place. Scores are raw inner products (cosines for unit vectors).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mmir.config.models import EvaluationConfig, default_of
from mmir.encoders.sharded import ShardedMatrix, check_dimension

#: index used to pad a row whose query has fewer than k admissible corpus items
PAD_INDEX = -1


def empty_topk(q: int, n: int, k: int, exclude: Sequence | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``(scores, indices)`` arrays a top-k search of ``q`` queries over ``n`` items fills, after the checks every
    such search makes: float32 ``-inf`` and int64 :data:`PAD_INDEX`, ``(q, min(k, n))``.

    Raises:
        ValueError: ``k < 1``, or an ``exclude`` without one entry per query.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if exclude is not None and len(exclude) != q:
        raise ValueError(f"exclude has {len(exclude)} entries for {q} queries")
    kk = min(k, n)
    return np.full((q, kk), -np.inf, dtype=np.float32), np.full((q, kk), PAD_INDEX, dtype=np.int64)


def sorted_exclusions(exclude: Sequence | None) -> list[np.ndarray] | None:
    """Per query its excluded indices as a sorted unique int64 array (a chunk picks its slice with searchsorted)."""
    if exclude is None:
        return None
    return [np.unique(np.fromiter((int(x) for x in e), dtype=np.int64)) for e in exclude]


def _chunk_topk(scores: np.ndarray, kk: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``kk`` columns of each row of ``scores`` (q, m), ordered by (score desc, index asc).

    Returns ``(scores (q, kk) float32, global indices (q, kk) int64)``.
    """
    q, m = scores.shape
    if kk >= m:
        idx = np.broadcast_to(np.arange(m, dtype=np.int64), (q, m))
        order = np.lexsort((idx, -scores), axis=1)
        return np.take_along_axis(scores, order, 1), order.astype(np.int64) + offset
    part = np.argpartition(scores, m - kk, axis=1)[:, m - kk :]  # the kk largest, unordered
    part_scores = np.take_along_axis(scores, part, 1)
    kth = part_scores.min(axis=1)
    # rows where more than kk columns reach the k-th value: the partition chose arbitrarily among ties
    n_ge = np.count_nonzero(scores >= kth[:, None], axis=1)
    for r in np.flatnonzero(n_ge > kk):
        cand = np.flatnonzero(scores[r] >= kth[r])  # ascending index
        order = np.lexsort((cand, -scores[r, cand]))[:kk]
        part[r] = cand[order]
        part_scores[r] = scores[r, part[r]]
    order = np.lexsort((part, -part_scores), axis=1)
    return np.take_along_axis(part_scores, order, 1), np.take_along_axis(part, order, 1).astype(np.int64) + offset


def _merge(
    s1: np.ndarray, i1: np.ndarray, s2: np.ndarray, i2: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    s = np.concatenate([s1, s2], axis=1)
    i = np.concatenate([i1, i2], axis=1)
    order = np.lexsort((i, -s), axis=1)[:, :k]
    return np.take_along_axis(s, order, 1), np.take_along_axis(i, order, 1)


def working_memory_bytes(chunk_size: int, d: int, query_block: int = 256) -> int:
    """Upper estimate of :func:`topk_inner_product`'s scratch memory in bytes, independent of the corpus size:
    the float32 copy of one chunk (``4 * chunk_size * d``) plus, per query block, the float32 score matrix, the
    int64 ``argpartition`` indices and a boolean mask (``13 * query_block * chunk_size``). A float16
    :class:`~mmir.encoders.sharded.ShardedMatrix` adds its read buffer (``2 * chunk_size * d``)."""
    return chunk_size * (4 * d + 13 * query_block)


def topk_inner_product(
    queries: np.ndarray,
    corpus: np.ndarray,
    k: int,
    chunk_size: int = default_of(EvaluationConfig, "chunk_size"),
    exclude: Sequence[set[int] | frozenset[int] | Sequence[int]] | None = None,
    query_block: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k corpus items by inner product for each query, scanning the corpus in chunks.

    Args:
        queries: ``(q, d)`` float array (any float dtype; computed in float32).
        corpus: ``(n, d)`` float16 or float32 array or ``np.memmap``, or a
            :class:`~mmir.encoders.sharded.ShardedMatrix`.
        k: number of results per query (``k >= 1``).
        chunk_size: corpus rows per chunk; memory about ``chunk_size * (4 * d + 13 * query_block)`` bytes
            (:func:`working_memory_bytes`).
        exclude: optional, per query, corpus indices never returned; indices outside ``[0, n)`` are ignored.

    Returns:
        ``(scores, indices)``: float32 and int64 ``(q, kk)``, ``kk = min(k, n)``, sorted as above; rows short of
        admissible items are padded with :data:`PAD_INDEX` (``-1``) and ``-inf``.

    Raises:
        ValueError: wrong dimensions or sizes, ``len(exclude) != q``, or a non-finite score, naming the corpus
            chunk (:class:`~mmir.encoders.sharded.DimensionMismatchError` for a ShardedMatrix).
    """
    queries = np.asarray(queries)
    if queries.ndim != 2 or corpus.ndim != 2:
        raise ValueError(f"queries and corpus must be 2-D, got {queries.shape} and {corpus.shape}")
    q, d = queries.shape
    n = corpus.shape[0]
    sharded = isinstance(corpus, ShardedMatrix)
    if sharded:
        check_dimension(queries.shape, corpus)
    if corpus.shape[1] != d:
        raise ValueError(f"dimension mismatch: queries have d={d}, corpus has d={corpus.shape[1]}")
    if k < 1 or chunk_size < 1 or query_block < 1:
        raise ValueError(f"k, chunk_size and query_block must be >= 1 (got {k}, {chunk_size}, {query_block})")
    out_s, out_i = empty_topk(q, n, k, exclude)
    kk = out_s.shape[1]
    if q == 0 or kk == 0:
        return out_s, out_i

    qf = np.ascontiguousarray(queries, dtype=np.float32)
    ex_arrays = sorted_exclusions(exclude)

    best_s = [np.empty((min(query_block, q - b), 0), np.float32) for b in range(0, q, query_block)]
    best_i = [np.empty((min(query_block, q - b), 0), np.int64) for b in range(0, q, query_block)]
    buf = np.empty((min(chunk_size, n), d), dtype=np.float32) if sharded else None
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        if sharded:
            chunk = corpus.read_rows(start, stop, out=buf[: stop - start])
        else:
            chunk = np.asarray(corpus[start:stop], dtype=np.float32)  # copy only if the dtype differs
        for bi, b0 in enumerate(range(0, q, query_block)):
            b1 = min(b0 + query_block, q)
            scores = qf[b0:b1] @ chunk.T  # (qb, m) float32
            if not np.isfinite(scores).all():
                raise ValueError(
                    f"non-finite inner product for corpus rows {start}..{stop - 1} and queries {b0}..{b1 - 1}:"
                    " NaN or inf in the vectors"
                )
            if ex_arrays is not None:
                for r in range(b0, b1):
                    ex = ex_arrays[r]
                    if ex.size:
                        lo, hi = np.searchsorted(ex, [start, stop])
                        if hi > lo:
                            scores[r - b0, ex[lo:hi] - start] = -np.inf
            cs, ci = _chunk_topk(scores, min(kk, stop - start), start)
            best_s[bi], best_i[bi] = _merge(best_s[bi], best_i[bi], cs, ci, kk)
            del scores
        del chunk
    del buf
    for bi, b0 in enumerate(range(0, q, query_block)):
        s, i = best_s[bi], best_i[bi]
        i = np.where(np.isneginf(s), PAD_INDEX, i)  # excluded items (scored -inf) become padding
        out_s[b0 : b0 + s.shape[0], : s.shape[1]] = s
        out_i[b0 : b0 + s.shape[0], : s.shape[1]] = i
    return out_s, out_i


def topk_scores(scores: np.ndarray, k: int, exclude: set[int] | frozenset[int] | Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The top-k of one ``(n,)`` score vector (e.g. BM25's) in :func:`topk_inner_product` order, ``exclude`` left out.

    Returns:
        ``(scores, indices)`` of length ``min(k, n - |exclude|)``: float64 scores (as given), int64 indices.
    """
    s = np.asarray(scores, dtype=np.float64)
    ex = np.fromiter((int(x) for x in exclude if 0 <= int(x) < s.size), dtype=np.int64)
    if ex.size:
        s = s.copy()
        s[ex] = -np.inf
    m = min(k, s.size - np.unique(ex).size)
    if m <= 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    top_s, top_i = _chunk_topk(s[None, :], m, 0)
    return top_s[0], top_i[0]
