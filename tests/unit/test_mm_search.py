"""Tasks 2–4 retrieval on a tiny prepared domain, checked against a direct computation with the encoder."""

import io

import numpy as np
import pytest
from PIL import Image
from test_multimodal import IMG, ds, mm_root

from mmir.data.images import blank_image
from mmir.data.multimodal import pair_id
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.retrieval.mm_search import (
    make_mm_encoder,
    mm_system_run,
    read_exclusions,
    text_route,
)

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

    run, stats = mm_system_run("task3", prepared, SYSTEM, {}, 10, tmp_path / "c", encoder=encoder)
    expect = qv @ iv.T * 100
    for r, qid in enumerate(topics["qid"]):
        order = np.lexsort((np.arange(len(images)), -expect[r]))
        assert [d for d, _ in run[qid]] == images["path"].iloc[order].tolist()
        np.testing.assert_allclose([s for _, s in run[qid]], expect[r][order], atol=1e-3)

    excl = read_exclusions(prepared, "task4", "official")
    run4, _ = mm_system_run("task4", prepared, SYSTEM, excl, 100, tmp_path / "c", encoder=encoder)
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
        mm_system_run("task3", prepared, SYSTEM, {}, 10, tmp_path / "c", encoder=encoder)
    finally:
        encoder.encode_image_bytes = orig
    assert calls == []


def test_text_route_uses_image_text(prepared):
    caps = {"d/query_q1/image_1.png": "OCR QUERY WORDS", IMG["a0001"]: "OCR CHART"}
    qids, queries, items, texts = text_route("task4", prepared, caps)
    assert queries[0] == "mean of a sample\n\nOCR QUERY WORDS" and queries[1] == "no image query"
    t = dict(zip(items, texts))
    assert t[pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])] == "alpha gold passage about means\n\nOCR CHART\na red chart"
    assert t[pair_id("d/aaaaaaaa_0.txt", None)] == "alpha gold passage about means"
    _, _, items3, texts3 = text_route("task3", prepared, caps)
    assert dict(zip(items3, texts3))[IMG["a0002"]] == ""  # no OCR text, no alt


def test_caption_step_writes_image_text_for_corpus_and_query_images(tmp_path):
    pytest.importorskip("rapidocr_onnxruntime", reason="rapidocr-onnxruntime not installed")
    import pandas as pd
    from test_ocr import _rendered_png

    from mmir.workflow import steps

    cols = ["path", "sha256", "alt", "bytes", "width", "height", "ok"]
    pd.DataFrame([["d/d_aaaaaaaa_0001/image_1.png", "", "", _rendered_png(), 760, 260, True]], columns=cols).to_parquet(tmp_path / "images.parquet")
    pd.DataFrame([["d/query_q/image_1.png", "", "", b"", 0, 0, False]], columns=cols).to_parquet(tmp_path / "query_images.parquet")
    out = tmp_path / "ocr.parquet"
    n = steps.caption(tmp_path, "ocr", {"kind": "ocr", "min_score": 0.5}, tmp_path / "cache.sqlite", out)
    df = pd.read_parquet(out)
    assert df["role"].tolist() == ["corpus", "query"]
    assert df["text"][0].split() == ["FIRST", "SECOND", "THIRD"] and df["text"][1] == ""
    assert n["skipped_corrupt"] == 1 and n["engine_calls"] == 1
    n2 = steps.caption(tmp_path, "ocr", {"kind": "ocr", "min_score": 0.5}, tmp_path / "cache.sqlite", out)
    assert n2["engine_calls"] == 0  # served from the cache
