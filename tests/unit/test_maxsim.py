"""Exact MaxSim top-k against a brute force written with numpy einsum, on data whose sums are exact (ties)."""

from __future__ import annotations

import numpy as np
import pytest

from mmir.encoders.store import ShardFormat
from mmir.encoders.token_store import open_token_store, write_token_shard
from mmir.retrieval.maxsim import plan, spans, topk_maxsim


def brute(queries, docs, k, exclude=None):
    """MaxSim of every (query, item) by einsum, then a stable sort: score descending, lower index first."""
    s = np.array([[np.einsum("id,jd->ij", q.astype(np.float32), dd.astype(np.float32)).max(axis=1).sum() for dd in docs]
                  for q in queries], dtype=np.float32)
    if exclude:
        for r, e in enumerate(exclude):
            s[r, list(e)] = -np.inf
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, 1), order


def dyadic(rng, n, dim):
    """Values in {-1, -0.5, 0, 0.5, 1}: every product and sum is exact in float16/float32, and ties are common."""
    return (rng.integers(-2, 3, size=(n, dim)) / 2).astype(np.float16)


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 9, size=57)
    docs = [dyadic(rng, n, 4) for n in lengths]
    docs[10] = docs[3].copy()  # exact duplicates: a tie the order must break by index
    docs[40] = docs[3].copy()
    queries = [dyadic(rng, n, 4) for n in rng.integers(1, 6, size=9)]
    return queries, docs, np.array([len(x) for x in docs])


@pytest.mark.parametrize("chunk_tokens, query_tokens", [(1, 1), (7, 3), (13, 5), (64, 1000), (10_000, 10_000)])
@pytest.mark.parametrize("k", [1, 5, 57, 80])
def test_topk_maxsim_equals_brute_force_exactly(data, chunk_tokens, query_tokens, k):
    queries, docs, lengths = data
    tokens = np.concatenate(docs)
    want_s, want_i = brute(queries, docs, min(k, len(docs)))
    got_s, got_i = topk_maxsim(queries, tokens, lengths, k, chunk_tokens=chunk_tokens, query_tokens=query_tokens)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_array_equal(got_s, want_s)
    # the data do have ties in the top k, across chunk borders (items 3, 10, 40 score alike)
    full_s, _ = brute(queries, docs, len(docs))
    assert all(len(set(row.tolist())) < len(row) for row in full_s)


def test_ties_resolve_to_the_lower_index_at_the_kth_place(data):
    queries, docs, lengths = data
    tokens = np.concatenate(docs)
    s, i = topk_maxsim(queries, tokens, lengths, 57, chunk_tokens=5)
    for row_s, row_i in zip(s, i):
        for a in range(len(row_s) - 1):
            assert row_s[a] > row_s[a + 1] or (row_s[a] == row_s[a + 1] and row_i[a] < row_i[a + 1])
    s3, i3 = topk_maxsim([docs[3]], tokens, lengths, 3, chunk_tokens=4)  # the query equals items 3, 10, 40
    full = brute([docs[3]], docs, 57)
    assert list(i3[0]) == list(full[1][0][:3])


def test_exclusions_and_padding(data):
    queries, docs, lengths = data
    tokens = np.concatenate(docs)
    ex = [set(range(0, 57, 2)) for _ in queries]
    got_s, got_i = topk_maxsim(queries, tokens, lengths, 40, chunk_tokens=9, exclude=ex)
    want_s, want_i = brute(queries, docs, 40, ex)
    n_ok = 57 - 29
    np.testing.assert_array_equal(got_i[:, :n_ok], want_i[:, :n_ok])
    np.testing.assert_array_equal(got_s[:, :n_ok], want_s[:, :n_ok])
    assert (got_i[:, n_ok:] == -1).all() and np.isneginf(got_s[:, n_ok:]).all()


def test_random_float_data_matches_brute_force(tmp_path):
    rng = np.random.default_rng(3)
    lengths = rng.integers(3, 40, size=300)
    docs = [rng.standard_normal((n, 16)).astype(np.float16) for n in lengths]
    queries = [rng.standard_normal((8, 16)).astype(np.float32) for _ in range(6)]
    want_s, want_i = brute(queries, docs, 20)
    got_s, got_i = topk_maxsim(queries, np.concatenate(docs), lengths, 20, chunk_tokens=500, query_tokens=16)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-5)
    # the same through the on-disk store (two shards, read with positional reads)
    fmt = ShardFormat(dim=16, encoder_key="k")
    for s, (a, b) in enumerate([(0, 130), (130, 300)]):
        write_token_shard(tmp_path, s, [str(i) for i in range(a, b)], lambda x, y, a=a: docs[a + x : a + y], fmt, batch_size=32)
    from mmir.encoders.token_store import finalize_token_store

    finalize_token_store(tmp_path, "k", 2)
    store = open_token_store(tmp_path, "k")
    s2, i2 = topk_maxsim(queries, store.tokens, store.lengths, 20, chunk_tokens=500, query_tokens=16)
    np.testing.assert_array_equal(i2, got_i)
    np.testing.assert_array_equal(s2, got_s)


def test_chunk_sizes_bound_the_largest_temporary():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 257, size=2000)
    tokens = np.zeros((int(lengths.sum()), 8), dtype=np.float16)
    queries = [np.ones((32, 8), np.float32)] * 70
    trace: list = []
    topk_maxsim(queries, tokens, lengths, 10, chunk_tokens=4096, query_tokens=256, trace=trace)
    p = plan(lengths, [32] * 70, 4096, 256)
    # every similarity matrix is (block query tokens <= 256, chunk tokens <= 4096): nothing scales with the corpus
    assert trace and all(t <= 256 and m <= 4096 for t, m in trace)
    assert len(trace) == len(p.item_chunks) * len(p.query_blocks)
    assert p.largest_sim == (256, max(m for _, m in trace)) == (256, max(p.chunk_tokens))
    # chunks cover every item once, in order, and are full: the next item would not fit
    assert [a for a, _ in p.item_chunks][1:] == [b for _, b in p.item_chunks][:-1] and p.item_chunks[-1][1] == 2000
    for (_a, b), m in zip(p.item_chunks[:-1], p.chunk_tokens):
        assert m <= 4096 < m + lengths[b]
    assert spans(np.array([5, 100, 2]), 10) == [(0, 1), (1, 2), (2, 3)]  # an item over the budget is a chunk alone


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="token rows"):
        topk_maxsim([np.ones((2, 4))], np.ones((5, 4)), np.array([2, 2]), 1)
    with pytest.raises(ValueError, match="query 0"):
        topk_maxsim([np.ones((2, 3))], np.ones((4, 4)), np.array([2, 2]), 1)
