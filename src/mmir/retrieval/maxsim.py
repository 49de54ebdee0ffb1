"""Exact MaxSim top-k (late interaction, ColBERT: Khattab & Zaharia 2020, eq. 3) over a multi-vector store.

``score(q, d) = sum_i max_j <q_i, d_j>`` over the query's tokens ``i`` and the item's tokens ``j``. The store is
scanned in item chunks of at most ``chunk_tokens`` token rows, the queries in blocks of at most ``query_tokens``
token rows, so the largest temporary is one ``(block query tokens, chunk tokens)`` float32 similarity matrix (an
item longer than ``chunk_tokens`` is a chunk of its own), never a query x corpus x tokens tensor. Order: score
descending, ties by lower item index, also across chunk borders and at the k-th place (as
:func:`mmir.retrieval.topk.topk_inner_product`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mmir.encoders.sharded import ShardedMatrix
from mmir.retrieval.topk import PAD_INDEX, _chunk_topk, _merge, empty_topk, sorted_exclusions

#: token rows of the store scored per step (64k x 128 float32 = 32 MiB per chunk copy)
CHUNK_TOKENS = 65_536
#: query token rows scored per step (1,024: 32 queries of 32 tokens)
QUERY_TOKENS = 1_024


def spans(lengths: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ``[i0, i1)`` ranges of ``lengths`` (int, ``>= 1`` each) whose sums are at most ``budget`` (a
    single longer entry is a range of its own); the chunks of items and the blocks of queries."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    out, i0, acc = [], 0, 0
    for i, n in enumerate(np.asarray(lengths, dtype=np.int64).tolist()):
        if acc and acc + n > budget:
            out.append((i0, i))
            i0, acc = i, 0
        acc += n
    if len(lengths):
        out.append((i0, len(lengths)))
    return out


@dataclass(frozen=True)
class MaxSimPlan:
    """The item chunks and query blocks of one search; ``sim_shapes`` the similarity matrices it makes."""

    item_chunks: list[tuple[int, int]]
    query_blocks: list[tuple[int, int]]
    chunk_tokens: list[int]
    block_tokens: list[int]

    @property
    def largest_sim(self) -> tuple[int, int]:
        """Shape of the largest ``(query tokens, item tokens)`` float32 temporary."""
        return (max(self.block_tokens, default=0), max(self.chunk_tokens, default=0))


def plan(lengths: np.ndarray, query_lengths: Sequence[int], chunk_tokens: int = CHUNK_TOKENS,
         query_tokens: int = QUERY_TOKENS) -> MaxSimPlan:
    """The chunks and blocks :func:`topk_maxsim` scans, from the items' and queries' token counts."""
    lengths, qlen = np.asarray(lengths, dtype=np.int64), np.asarray(query_lengths, dtype=np.int64)
    chunks, blocks = spans(lengths, chunk_tokens), spans(qlen, query_tokens)
    return MaxSimPlan(chunks, blocks, [int(lengths[a:b].sum()) for a, b in chunks], [int(qlen[a:b].sum()) for a, b in blocks])


def topk_maxsim(queries: Sequence[np.ndarray], tokens, lengths: np.ndarray, k: int, *, chunk_tokens: int = CHUNK_TOKENS,
                query_tokens: int = QUERY_TOKENS, exclude: Sequence[set[int] | frozenset[int] | Sequence[int]] | None = None,
                trace: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k items by MaxSim for each query, scanning the store in chunks.

    Args:
        queries: per query a ``(t_q, d)`` float array of its token vectors (``t_q >= 1``; computed in float32).
        tokens: ``(total_tokens, d)`` float16/float32 array or :class:`~mmir.encoders.sharded.ShardedMatrix`: the items'
            token vectors, item after item (:class:`mmir.encoders.token_store.TokenStore`).
        lengths: ``(n,)`` tokens per item (``>= 1``, summing to ``total_tokens``).
        chunk_tokens, query_tokens: token rows per item chunk and per query block (see the module docstring).
        exclude: optional, per query, item indices never returned.
        trace: when a list, the shape of every similarity matrix made is appended (for the memory bound's test).

    Returns:
        ``(scores, indices)``: float32 and int64 ``(q, kk)``, ``kk = min(k, n)``, padded with ``-1`` and ``-inf``.

    Raises:
        ValueError: dimensions or sizes that do not fit, a query or item without tokens, a non-finite score.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    n, q = len(lengths), len(queries)
    if tokens.ndim != 2 or tokens.shape[0] != int(lengths.sum()):
        raise ValueError(f"the store has {tokens.shape[0]} token rows, its lengths sum to {int(lengths.sum())}")
    if n and lengths.min() < 1:
        raise ValueError(f"item {int(np.argmin(lengths))} has no tokens")
    d = tokens.shape[1]
    qs = [np.asarray(x, dtype=np.float32) for x in queries]
    for i, x in enumerate(qs):
        if x.ndim != 2 or x.shape[1] != d or x.shape[0] < 1:
            raise ValueError(f"query {i}: token matrix of shape {x.shape}, the store's tokens have dim {d}")
    out_s, out_i = empty_topk(q, n, k, exclude)
    kk = out_s.shape[1]
    if q == 0 or kk == 0:
        return out_s, out_i
    p = plan(lengths, [x.shape[0] for x in qs], chunk_tokens, query_tokens)
    ex = sorted_exclusions(exclude)
    blocks = []
    for b0, b1 in p.query_blocks:  # one (block tokens, d) matrix and each query's first row in it
        qlen = np.array([qs[j].shape[0] for j in range(b0, b1)])
        blocks.append((b0, b1, np.ascontiguousarray(np.concatenate(qs[b0:b1])), np.concatenate([[0], np.cumsum(qlen)[:-1]])))
    best = [(np.empty((b1 - b0, 0), np.float32), np.empty((b1 - b0, 0), np.int64)) for b0, b1, *_ in blocks]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    buf = np.empty((max(p.chunk_tokens), d), dtype=np.float32)
    for (i0, i1), m in zip(p.item_chunks, p.chunk_tokens):
        t0 = int(offsets[i0])
        if isinstance(tokens, ShardedMatrix):
            chunk = tokens.read_rows(t0, t0 + m, out=buf[:m])
        else:
            chunk = buf[:m]
            np.copyto(chunk, tokens[t0 : t0 + m], casting="unsafe")
        starts = offsets[i0:i1] - t0
        for bi, (b0, b1, qt, qstarts) in enumerate(blocks):
            # (query tokens, item tokens) float32, the largest temporary; rows are query tokens, so the max over each
            # item's tokens runs along contiguous memory (an order of magnitude faster than along axis 0)
            sim = qt @ chunk.T
            if trace is not None:
                trace.append(sim.shape)
            per_token = np.maximum.reduceat(sim, starts, axis=1)  # (query tokens, items): max over each item's tokens
            del sim
            scores = np.add.reduceat(per_token, qstarts, axis=0)  # (queries, items): sum over each query's tokens
            if not np.isfinite(scores).all():
                raise ValueError(f"non-finite MaxSim for items {i0}..{i1 - 1} and queries {b0}..{b1 - 1}: NaN or inf")
            if ex is not None:
                for r in range(b0, b1):
                    lo, hi = np.searchsorted(ex[r], [i0, i1])
                    scores[r - b0, ex[r][lo:hi] - i0] = -np.inf
            cs, ci = _chunk_topk(scores, min(kk, i1 - i0), i0)
            best[bi] = _merge(*best[bi], cs, ci, kk)
    for (b0, b1, *_), (s, i) in zip(blocks, best):
        out_s[b0:b1, : s.shape[1]] = s
        out_i[b0:b1, : s.shape[1]] = np.where(np.isneginf(s), PAD_INDEX, i)
    return out_s, out_i


def working_memory_bytes(p: MaxSimPlan, d: int, k: int) -> int:
    """Upper estimate of :func:`topk_maxsim`'s scratch bytes for plan ``p``: the float32 chunk copy and its float16
    read buffer, the similarity matrix, the per-item maxima (query tokens x items), the per-query scores and their
    partition (13 bytes a query x item), and the running top-k (12 bytes a query x k)."""
    t, m = p.largest_sim
    items = max((b - a for a, b in p.item_chunks), default=0)
    queries = max((b - a for a, b in p.query_blocks), default=0)
    return 6 * m * d + 4 * t * m + 4 * t * items + 13 * queries * items + 24 * k * sum(b - a for a, b in p.query_blocks)
