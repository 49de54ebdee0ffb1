"""mmir.retrieval.topk: chunked exact top-k equals a full argsort reference, ties and exclusions included."""

from __future__ import annotations

import numpy as np
import pytest

from mmir.retrieval.topk import PAD_INDEX, topk_inner_product


def _reference(queries, corpus, k, exclude=None):
    """Full score matrix + stable argsort on (-score, index): the definition of the expected order."""
    s = queries.astype(np.float32) @ corpus.astype(np.float32).T
    out_s, out_i = [], []
    for r in range(s.shape[0]):
        idx = np.arange(s.shape[1])
        if exclude is not None:
            idx = np.array([j for j in idx if j not in set(exclude[r])], dtype=np.int64)
        order = idx[np.argsort(-s[r, idx], kind="stable")][:k]
        out_s.append(s[r, order])
        out_i.append(order)
    return out_s, out_i


def _assert_matches(got_s, got_i, ref_s, ref_i):
    for r in range(len(ref_i)):
        n = len(ref_i[r])
        np.testing.assert_array_equal(got_i[r, :n], ref_i[r])
        np.testing.assert_allclose(got_s[r, :n], ref_s[r], rtol=1e-5, atol=1e-5)
        assert (got_i[r, n:] == PAD_INDEX).all() and np.isneginf(got_s[r, n:]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1000])
def test_matches_argsort_reference(dtype, chunk_size):
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((200, 16)).astype(dtype)
    queries = rng.standard_normal((13, 16)).astype(np.float32)
    s, i = topk_inner_product(queries, corpus, k=10, chunk_size=chunk_size, query_block=5)
    assert s.dtype == np.float32 and i.dtype == np.int64 and s.shape == i.shape == (13, 10)
    _assert_matches(s, i, *_reference(queries, corpus, 10))


def test_ties_lower_index_first_across_chunks_and_at_the_cut():
    # integer-valued vectors give exactly tied float32 scores
    corpus = np.array([[1, 0], [2, 0], [1, 0], [0, 1], [2, 0], [1, 0], [2, 0], [0, 0], [1, 0]], dtype=np.float16)
    queries = np.array([[1, 0], [0, 0]], dtype=np.float32)  # the 2nd query ties everything at 0
    for chunk in (1, 2, 3, 4, 100):
        s, i = topk_inner_product(queries, corpus, k=5, chunk_size=chunk)
        assert i[0].tolist() == [1, 4, 6, 0, 2], chunk  # the three 2s, then the lowest-index 1s
        assert s[0].tolist() == [2, 2, 2, 1, 1]
        assert i[1].tolist() == [0, 1, 2, 3, 4], chunk
    _assert_matches(*topk_inner_product(queries, corpus, k=5, chunk_size=2), *_reference(queries, corpus, 5))


def test_exclusions_removed_and_padding_when_too_few():
    rng = np.random.default_rng(1)
    corpus = rng.standard_normal((30, 8)).astype(np.float32)
    queries = rng.standard_normal((4, 8)).astype(np.float32)
    full_s, full_i = topk_inner_product(queries, corpus, k=5)
    exclude = [set(full_i[0, :3].tolist()), set(), {999, -5, 0}, set(range(28))]
    s, i = topk_inner_product(queries, corpus, k=5, chunk_size=4, exclude=exclude)
    _assert_matches(s, i, *_reference(queries, corpus, 5, exclude=[e & set(range(30)) for e in exclude]))
    assert not set(i[0].tolist()) & exclude[0]
    assert i[0, 0] == full_i[0, 3]  # the 4th best moved up to first
    assert i[3, 2:].tolist() == [PAD_INDEX] * 3  # only items 28, 29 admissible


def test_fewer_results_when_corpus_smaller_than_k():
    corpus = np.eye(3, dtype=np.float16)
    s, i = topk_inner_product(np.array([[0.5, 1.0, 0.0]]), corpus, k=10, chunk_size=2)
    assert s.shape == (1, 3)
    assert i[0].tolist() == [1, 0, 2] and s[0].tolist() == [1.0, 0.5, 0.0]


def test_memmap_corpus(tmp_path):
    rng = np.random.default_rng(2)
    arr = rng.standard_normal((50, 4)).astype(np.float16)
    mm = np.lib.format.open_memmap(tmp_path / "c.npy", mode="w+", dtype=np.float16, shape=arr.shape)
    mm[:] = arr
    mm.flush()
    ro = np.load(tmp_path / "c.npy", mmap_mode="r")
    q = rng.standard_normal((3, 4)).astype(np.float32)
    _assert_matches(*topk_inner_product(q, ro, k=7, chunk_size=9), *_reference(q, arr, 7))


def test_errors():
    c = np.zeros((5, 4), np.float32)
    with pytest.raises(ValueError, match="dimension"):
        topk_inner_product(np.zeros((1, 3)), c, k=2)
    with pytest.raises(ValueError, match="exclude"):
        topk_inner_product(np.zeros((2, 4)), c, k=2, exclude=[set()])
    with pytest.raises(ValueError, match=">= 1"):
        topk_inner_product(np.zeros((1, 4)), c, k=0)
    c[3, 0] = np.nan
    with pytest.raises(ValueError, match="rows 2..3"):
        topk_inner_product(np.ones((1, 4)), c, k=2, chunk_size=2)


def test_empty_inputs():
    s, i = topk_inner_product(np.zeros((0, 4)), np.zeros((5, 4), np.float32), k=3)
    assert s.shape == (0, 3)
    s, i = topk_inner_product(np.zeros((2, 4)), np.zeros((0, 4), np.float32), k=3)
    assert s.shape == (2, 0)


# --- the vector store's ShardedMatrix as the corpus -------------------------------------------------------

def _sharded(tmp_path, corpus, sizes):
    from mmir.encoders.store import ShardedMatrix

    paths, start = [], 0
    for i, n in enumerate(sizes):
        paths.append(tmp_path / f"s{i}.npy")
        np.save(paths[-1], corpus[start : start + n])
        start += n
    assert start == len(corpus)
    return ShardedMatrix(paths, source=tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("chunk_size", [1, 5, 16, 64, 1000])
def test_sharded_corpus_equals_dense_reference(tmp_path, dtype, chunk_size):
    rng = np.random.default_rng(3)
    corpus = rng.standard_normal((150, 8)).astype(dtype)
    queries = rng.standard_normal((9, 8)).astype(np.float32)
    m = _sharded(tmp_path, corpus, [17, 0, 40, 1, 60, 32])
    exclude = [set(rng.choice(150, size=r * 3, replace=False).tolist()) for r in range(9)]
    s, i = topk_inner_product(queries, m, k=20, chunk_size=chunk_size, exclude=exclude, query_block=4)
    _assert_matches(s, i, *_reference(queries, corpus, 20, exclude))
    s2, i2 = topk_inner_product(queries, corpus, k=20, chunk_size=chunk_size, exclude=exclude, query_block=4)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(s, s2)


def test_sharded_ties_across_shard_borders_and_exclusions(tmp_path):
    corpus = np.array([[1, 0], [2, 0], [1, 0], [0, 1], [2, 0], [1, 0], [2, 0], [0, 0], [1, 0]], dtype=np.float16)
    m = _sharded(tmp_path, corpus, [2, 3, 1, 3])  # borders after rows 1, 4, 5
    queries = np.array([[1, 0], [0, 0]], dtype=np.float32)
    for chunk in (1, 2, 3, 4, 100):
        s, i = topk_inner_product(queries, m, k=5, chunk_size=chunk)
        assert i[0].tolist() == [1, 4, 6, 0, 2], chunk
        assert i[1].tolist() == [0, 1, 2, 3, 4], chunk  # all tied at 0: corpus order
        s, i = topk_inner_product(queries, m, k=5, chunk_size=chunk, exclude=[{4, 0}, {0, 1, 2, 3, 5, 6, 7, 8}])
        assert i[0].tolist() == [1, 6, 2, 5, 8], chunk
        assert i[1].tolist() == [4, PAD_INDEX, PAD_INDEX, PAD_INDEX, PAD_INDEX] and np.isneginf(s[1, 1:]).all()
