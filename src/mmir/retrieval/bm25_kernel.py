"""The numba kernel of batched BM25 retrieval: each query's scores over a CSC score matrix and its top-k candidates.

:func:`candidates` scores a group of queries a tile of documents at a time (each query's float32 accumulator for
the tile stays in the L1/L2 cache, and a term's postings in the tile are read from memory once for the group):
each query term adds its postings that fall in the tile, terms in query order, so every document's score is the
same float32 sum, in the same order, as bm25s's ``np.add.at`` over the concatenated postings (bit-identical
scores). The scan that clears the tile keeps the positive scores above a running threshold (the k-th largest kept,
raised whenever the candidate buffer fills), so no score vector of the whole corpus is ever ranked. Candidates are
keys ``(~float32 bits << 32 | document)``: positive float32 bit patterns order as the values, so ascending keys are
score descending, ties by document index; numpy partitions and sorts them (:meth:`mmir.retrieval.bm25.BM25.topk`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: documents per tile: a 32 KiB float32 accumulator, within the L1 data cache of current x86 cores
TILE_DOCS = 8192
#: candidate buffer per query, in multiples of k (a larger buffer raises the threshold less often)
CANDIDATES_PER_K = 4
#: queries scored together tile by tile (their accumulators, group x 32 KiB, stay in the L2 cache)
GROUP = 8
#: scores per vector maximum in the scan for candidates
SCAN_BLOCK = 64


@njit(cache=True, nogil=True)
def _select(key, m, k):
    """Reorder ``key[:m]`` (distinct uint64) so that its k smallest come first (quickselect, median of three)."""
    lo, hi = 0, m - 1
    while hi > lo:
        mid = (lo + hi) >> 1
        a, b, c = key[lo], key[mid], key[hi]
        pivot = max(min(a, b), min(max(a, b), c))
        i, j = lo, hi
        while i <= j:
            while key[i] < pivot:
                i += 1
            while key[j] > pivot:
                j -= 1
            if i <= j:
                key[i], key[j] = key[j], key[i]
                i += 1
                j -= 1
        if k - 1 <= j:
            hi = j
        elif k - 1 >= i:
            lo = i
        else:
            return


@njit(cache=True, nogil=True)
def _collect(acc, w, lo, row, m, thr, k):
    """Add to ``row[:m]`` the keys of the scores ``acc[:w]`` (documents ``lo..lo + w - 1``) above the threshold, keeping
    the k smallest keys whenever the row fills up (the threshold becomes the k-th largest score kept: a later
    document that ties it ranks after it). Returns ``(m, threshold, positive scores in acc[:w])``.

    Scores are compared as int32 bit patterns (``thr`` too): for a non-negative threshold the order is the float
    order, and integer counts and maxima vectorise (SIMD), so a block of scores all below the threshold costs one
    vector maximum.
    """
    cap = row.size
    ib = acc[:w].view(np.int32)
    pos = 0
    for d in range(w):
        pos += ib[d] > 0
    for b0 in range(0, w, SCAN_BLOCK):
        b1 = min(w, b0 + SCAN_BLOCK)
        mx = ib[b0]
        for d in range(b0 + 1, b1):
            mx = max(mx, ib[d])
        if mx <= thr:
            continue
        for d in range(b0, b1):
            if ib[d] > thr:
                if m == cap:
                    _select(row, m, k)
                    m = k
                    thr = np.int32(np.uint64(0xFFFFFFFF) - (row[k - 1] >> np.uint64(32)))
                    if not ib[d] > thr:
                        continue
                row[m] = ((np.uint64(0xFFFFFFFF) - np.uint64(ib[d])) << np.uint64(32)) | np.uint64(lo + d)
                m += 1
    return m, thr, pos


@njit(cache=True, nogil=True)
def candidates(indptr, indices, data, n, terms, term_ptr, ex_docs, ex_ptr, k, tile, group, key, positive):
    """Each query's candidates for its top-k positive BM25 scores, as keys ``(~float32 bits << 32 | document)``.

    Args:
        indptr, indices, data: the CSC score matrix (int64 ``(vocab + 1,)``; int32 documents ascending within a
            term; float32 scores), bm25s's ``scores`` dict.
        n: documents (at most 2**32).
        terms, term_ptr: int64 term ids of all queries concatenated, and each query's start (``(q + 1,)``).
        ex_docs, ex_ptr: int64 documents left out of each query (ascending, in range) and each query's start.
        k: top-k (1 <= k); tile: documents per tile; group: queries that go through the tiles together.
        key: uint64 ``(q, cap)``, ``cap > k``: row ``r`` gets a superset of the keys of the k largest positive
            scores of query ``r`` (all of them if fewer), then the largest uint64 to the end of the row.
        positive: int64 ``(q,)``: the positive scores of each query.
    """
    q = term_ptr.size - 1
    acc = np.zeros((group, tile), dtype=np.float32)
    max_terms = 0
    for r in range(q):
        max_terms = max(max_terms, term_ptr[r + 1] - term_ptr[r])
    cur = np.empty((group, max_terms), dtype=np.int64)
    end = np.empty((group, max_terms), dtype=np.int64)
    ex = np.empty(group, dtype=np.int64)
    ms = np.empty(group, dtype=np.int64)
    thrs = np.empty(group, dtype=np.int32)
    for g0 in range(0, q, group):
        g1 = min(q, g0 + group)
        for r in range(g0, g1):
            b = r - g0
            t0 = term_ptr[r]
            for j in range(term_ptr[r + 1] - t0):
                cur[b, j] = indptr[terms[t0 + j]]
                end[b, j] = indptr[terms[t0 + j] + 1]
            ex[b] = ex_ptr[r]
            ms[b] = 0
            thrs[b] = 0
            positive[r] = 0
        for lo in range(0, n, tile):
            hi = min(n, lo + tile)
            # the group's queries one after another on the same tile: the postings of a term that several of
            # them share are read from memory once
            for r in range(g0, g1):
                b = r - g0
                a = acc[b]
                for j in range(term_ptr[r + 1] - term_ptr[r]):
                    p = cur[b, j]
                    pe = end[b, j]
                    if p < pe and indices[p] < hi:
                        # this term's postings in [lo, hi): a binary search bounds the loop of adds
                        if indices[pe - 1] >= hi:
                            pe = p + np.searchsorted(indices[p:pe], hi)
                        for x in range(p, pe):
                            a[np.uint64(indices[x] - lo)] += data[x]  # unsigned: no negative-index check
                        cur[b, j] = pe
                e = ex[b]
                while e < ex_ptr[r + 1] and ex_docs[e] < hi:
                    a[ex_docs[e] - lo] = 0  # out of the candidates
                    e += 1
                ex[b] = e
                m, thr, pos = _collect(a, hi - lo, lo, key[r], ms[b], thrs[b], k)
                ms[b] = m
                thrs[b] = thr
                positive[r] += pos
                a[: hi - lo] = 0
        for r in range(g0, g1):
            key[r, ms[r - g0]:] = np.uint64(0xFFFFFFFFFFFFFFFF)  # after every real key


@njit(cache=True, nogil=True)
def decode(top, out_s, out_i):
    """Keys ``(~float32 bits << 32 | document)`` (uint64 ``(q, k)``) into float64 scores and int64 documents."""
    vb = np.empty(top.shape[1], dtype=np.uint32)
    for r in range(top.shape[0]):
        for i in range(top.shape[1]):
            out_i[r, i] = np.int64(top[r, i] & np.uint64(0xFFFFFFFF))
            vb[i] = np.uint32(np.uint64(0xFFFFFFFF) - (top[r, i] >> np.uint64(32)))
        v = vb.view(np.float32)
        for i in range(top.shape[1]):
            out_s[r, i] = v[i]
