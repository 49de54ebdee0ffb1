"""mmir.retrieval.ann: FAISS flat equals the exact chunked top-k; approximate kinds are labelled as such."""

from __future__ import annotations

import numpy as np
import pytest

from mmir.encoders.store import DimensionMismatchError, ShardedMatrix
from mmir.retrieval.ann import FaissIndex, faiss_topk
from mmir.retrieval.topk import PAD_INDEX, topk_inner_product

pytest.importorskip("faiss")


def _data(n=400, d=12, q=7, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((q, d)).astype(np.float32)


def test_flat_equals_exact_topk_with_exclusions(tmp_path):
    corpus, queries = _data()
    exclude = [set(range(r * 5)) for r in range(7)]
    es, ei = topk_inner_product(queries, corpus, 25, exclude=exclude)
    np.save(tmp_path / "a.npy", corpus[:150])
    np.save(tmp_path / "b.npy", corpus[150:])
    for source in (corpus, ShardedMatrix([tmp_path / "a.npy", tmp_path / "b.npy"])):
        s, i, stats = faiss_topk(queries, source, 25, "flat", exclude=exclude)
        assert s.shape == i.shape == (7, 25) and s.dtype == np.float32 and i.dtype == np.int64
        np.testing.assert_array_equal(i, ei)
        np.testing.assert_allclose(s, es, rtol=1e-5, atol=1e-5)
        assert stats == {"search": "exact:faiss-flat", "approximate": False, "faiss_kind": "flat"}


def test_short_corpus_is_padded_and_dims_checked(tmp_path):
    corpus, queries = _data(n=5)
    index = FaissIndex(corpus, "flat")
    s, i = index.search(queries, 10, exclude=[{0}] * 7)
    assert s.shape == (7, 5) and (i[:, -1] == PAD_INDEX).all() and np.isneginf(s[:, -1]).all()
    with pytest.raises(ValueError, match="dimension"):
        index.search(queries[:, :3], 3)
    np.save(tmp_path / "a.npy", corpus)
    with pytest.raises(DimensionMismatchError):
        FaissIndex(ShardedMatrix([tmp_path / "a.npy"]), "flat").search(queries[:, :3], 3)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_kinds_are_labelled(kind):
    corpus, queries = _data(n=2000)
    s, i, stats = faiss_topk(queries, corpus, 10, kind, nlist=16, nprobe=16, train_size=2000)
    assert stats["approximate"] is True and stats["search"].startswith(f"approximate:faiss-{kind}")
    assert s.shape == i.shape == (7, 10)
    _, ei = topk_inner_product(queries, corpus, 10)
    recall = np.mean([len(set(i[r]) & set(ei[r])) / 10 for r in range(7)])
    assert recall > 0.5  # nprobe = nlist (IVF) and a wide efSearch (HNSW) are near exact here
