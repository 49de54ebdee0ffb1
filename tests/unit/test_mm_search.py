"""Tasks 2–4 retrieval on a tiny prepared domain through the retrieval stage (encode -> stores -> fused top-k),
checked against a direct computation with the encoder."""

import io

import numpy as np
import pytest
from PIL import Image
from retrieval_pipeline import run_system
from test_multimodal import IMG, ds, mm_root

from mmir.data.images import blank_image
from mmir.data.multimodal import pair_id
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.encoders.multimodal import make_mm_encoder
from mmir.retrieval.items import ImageText, PairBudget, item_texts, query_texts, task_items, task_queries

SYSTEM = {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True, "seed": 0, "image_mode": "first",
          "fusion": "mean", "batch_size": 8, "num_workers": 0, "device": "cpu", "model": None, "revision": None}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mm")
    out = tmp / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp)), "d"), out)
    return out


@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip("open_clip")
    return make_mm_encoder(SYSTEM)


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_random_init_is_seeded_so_processes_agree(encoder):
    again = make_mm_encoder(SYSTEM)
    np.testing.assert_allclose(again.encode_text(["same text"]), encoder.encode_text(["same text"]), atol=1e-6)
    assert encoder.cache_spec["revision"] == "random-init:seed=0"


def test_task3_and_task4_match_direct_computation(prepared, encoder, tmp_path):
    import pandas as pd

    topics = pd.read_parquet(prepared / "topics_mm.parquet")
    qimg = pd.read_parquet(prepared / "query_images.parquet").set_index("path")
    images = pd.read_parquet(prepared / "images.parquet")
    t = encoder.encode_text(topics["query"].tolist(), role="query")
    first = Image.open(io.BytesIO(qimg.at["d/query_q1/image_1.png", "bytes"])).convert("RGB")
    iq = encoder.encode_images([first, blank_image()], role="query")  # q2 has no image: blank 224x224
    qv = unit((unit(t) + unit(iq)) / 2)
    corpus_imgs = [Image.open(io.BytesIO(b)).convert("RGB") for b in images["bytes"]]
    iv = encoder.encode_images(corpus_imgs)

    run, stats = run_system("task3", prepared, SYSTEM, tmp_path / "w", k=10, encoder=encoder)
    expect = qv @ iv.T * 100
    for r, qid in enumerate(topics["qid"]):
        order = np.lexsort((np.arange(len(images)), -expect[r]))
        assert [d for d, _ in run[qid]] == images["path"].iloc[order].tolist()
        np.testing.assert_allclose([s for _, s in run[qid]], expect[r][order], atol=1e-3)

    run4, _ = run_system("task4", prepared, SYSTEM, tmp_path / "w", k=100, encoder=encoder)
    got = [d for d, _ in run4["q1"]]
    assert pair_id("d/bbbbbbbb_0.txt", IMG["b0001"]) not in got and pair_id("d/bbbbbbbb_0.txt", None) not in got
    # a pair vector is the normalised mean of its passage and image vectors
    doc = encoder.encode_text(["alpha gold passage about means"])[0]
    img = iv[images["path"].tolist().index(IMG["a0001"])]
    pv = unit((unit(doc) + unit(img)) / 2)
    score = dict(run4["q1"])[pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])]
    assert score == pytest.approx(float(qv[0] @ pv * 100), abs=1e-3)
    # cache: a second run encodes nothing
    calls = []
    orig = encoder.encode_image_bytes
    encoder.encode_image_bytes = lambda *a, **k: calls.append(1) or orig(*a, **k)
    try:
        run_system("task3", prepared, SYSTEM, tmp_path / "w2", k=10, encoder=encoder)
    finally:
        encoder.encode_image_bytes = orig
    assert calls == []


def _alt(prepared):
    import pandas as pd

    im = pd.read_parquet(prepared / "images.parquet")
    return dict(zip(im["path"], im["alt"]))


def test_text_route_uses_image_text(prepared):
    caps = {"d/query_q1/image_1.png": "OCR QUERY WORDS", IMG["a0001"]: "OCR CHART"}
    with_alt = ImageText(caps, _alt(prepared), alt_text=True)
    queries = query_texts(task_queries("task4", prepared), with_alt)
    assert queries[0] == "mean of a sample\n\nOCR QUERY WORDS" and queries[1] == "no image query"
    items = task_items("task4", prepared)
    t = dict(zip(items.ids, item_texts(items, prepared, with_alt)))
    assert t[pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])] == "alpha gold passage about means\n\nOCR CHART\na red chart"
    assert t[pair_id("d/aaaaaaaa_0.txt", None)] == "alpha gold passage about means"
    # alt text is off by default (the hub has none): only the OCR text stands for an image
    plain = dict(zip(items.ids, item_texts(items, prepared, ImageText(caps))))
    assert plain[pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])] == "alpha gold passage about means\n\nOCR CHART"
    items3 = task_items("task3", prepared)
    assert dict(zip(items3.ids, item_texts(items3, prepared, with_alt)))[IMG["a0002"]] == ""  # no OCR text, no alt


def test_pair_text_keeps_the_image_text_within_the_budget(prepared):
    caps = {IMG["a0001"]: "IMAGE WORDS " * 50}
    budget = PairBudget(chars=120, image_share=0.25)
    items = task_items("task4", prepared)
    t = dict(zip(items.ids, item_texts(items, prepared, ImageText(caps), budget)))
    text = t[pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])]
    doc, image = text.split("\n\n")
    assert len(text) <= 120 and image == ("IMAGE WORDS " * 50)[:30] and doc.startswith("alpha gold passage")
    assert budget.cut_images >= 1


def test_caption_step_writes_image_text_for_corpus_and_query_images(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime", reason="rapidocr-onnxruntime not installed")
    import pandas as pd
    from test_ocr import _rendered_png

    from mmir.workflow import steps

    cols = ["path", "sha256", "alt", "bytes", "width", "height", "ok"]
    rows = [["d/d_aaaaaaaa_0001/image_1.png", "", "", _rendered_png(), 760, 260, True]]
    pd.DataFrame(rows, columns=cols).to_parquet(tmp_path / "images.parquet")
    pd.DataFrame([["d/query_q/image_1.png", "", "", b"", 0, 0, False]], columns=cols).to_parquet(tmp_path / "query_images.parquet")
    out = tmp_path / "ocr.parquet"
    n = steps.caption(tmp_path, "ocr", {"kind": "ocr", "min_score": 0.5}, tmp_path / "cache.sqlite", out)
    df = pd.read_parquet(out)
    assert df["role"].tolist() == ["corpus", "query"]
    assert df["text"][0].split() == ["FIRST", "SECOND", "THIRD"] and df["text"][1] == ""
    assert n["skipped_corrupt"] == 1 and n["engine_calls"] == 1
    n2 = steps.caption(tmp_path, "ocr", {"kind": "ocr", "min_score": 0.5}, tmp_path / "cache.sqlite", out)
    assert n2["engine_calls"] == 0  # served from the cache
