"""M2RAG input building (spec §3) and curation (spec §2): thresholds, caps, the tie rule, dedup, filters."""

import io

import numpy as np
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.m2rag.records import Chunk, ImageItem, M2RAGQuery, Webpage
from mmir.benchmarks.m2rag.selection import (
    SelectionConfig,
    curate_images,
    dedup_page_images,
    image_filter_reason,
    score_chunks,
    select_input,
    top_k_stable,
)
from mmir.llm.backends import GenerationFailure
from mmir.llm.client import LLMClient


def img(page, k, score, split=0, **kw):
    return ImageItem(image_id=k, cached_image_url=f"cache/{page}/{k}.png", split_id=split, final_score=score, **kw)


def page(pid, n_images, score=5.0, chunk_scores=(9,)):
    text = "".join(f"<IMAGE_PLACEHOLDER>[{k}]" for k in range(n_images))
    chunks = [Chunk(split_id=i, text=(f"p{pid}c{i} " + (text if i == 0 else "")), score=s)
              for i, s in enumerate(chunk_scores)]
    return Webpage(pid, f"title {pid}", f"http://x/{pid}", chunks, [img(pid, k, score) for k in range(n_images)])


def test_top_k_stable_keeps_earlier_on_ties():
    assert top_k_stable([1, 3, 3, 2, 3], lambda x: x, 2) == [3, 3]
    items = [("a", 1), ("b", 5), ("c", 5), ("d", 5)]
    assert top_k_stable(items, lambda t: t[1], 2) == [("b", 5), ("c", 5)]
    assert top_k_stable(items, lambda t: t[1], None) == items


def test_chunk_threshold_top20_and_tie_rule():
    scores = [5] * 25
    scores[22] = 9
    scores[3] = 2  # below the threshold
    scores[4] = None  # unscored
    chunks = [Chunk(split_id=i, text=f"[{i}]", score=s) for i, s in enumerate(scores)]
    q = M2RAGQuery("q", "query", [Webpage(0, "t", "u", chunks, [])])
    sel = select_input(q)
    kept = [c.split_id for c in sel.pages[0].chunks]
    # 23 chunks pass; the top 20 by score keep chunk 22 and, among the ties, the earliest 19; page order restored
    assert kept == [0, 1, 2] + list(range(5, 21)) + [22]
    assert sel.pages[0].content == "".join(f"[{i}]" for i in kept)  # no separator
    assert sel.report["chunks_below_min"] == 1 and sel.report["chunks_unscored"] == 1
    assert sel.report["chunks_over_page_cap"] == 3


def test_caps_5_per_page_5_aux_10_global_with_ties():
    aux = [ImageItem(f"aux-{i}", f"cache/aux/{i}.jpg", final_score=5.0, is_aux=True) for i in range(7)]
    q = M2RAGQuery("q", "query", [page(0, 7), page(1, 7), page(2, 7)], aux)
    sel = select_input(q)
    # all scores tie: 5 per page, then the global 10 keep pages in order (pages 0 and 1), no aux
    assert [(ii.page, ii.image.image_id) for ii in sel.images] == [(0, k) for k in range(5)] + [(1, k) for k in range(5)]
    assert sel.aux_images == []
    assert sel.report["images_over_page_cap"] == 6 and sel.report["aux_images_over_cap"] == 2
    assert sel.report["images_over_global_cap"] == 10
    # higher aux scores win the global cap; the aux cap is still 5
    for a in aux:
        a.final_score = 9.0
    sel = select_input(q)
    assert [ii.image.image_id for ii in sel.images if ii.page is None] == [f"aux-{i}" for i in range(5)]
    assert [ii.image.image_id for ii in sel.images if ii.page is not None] == [0, 1, 2, 3, 4]
    assert [ii.index for ii in sel.images] == list(range(10))
    assert sel.images[-1].pseudo_url == "images/9.jpg"


def test_caps_are_configurable():
    q = M2RAGQuery("q", "query", [page(0, 7), page(1, 7)])
    sel = select_input(q, SelectionConfig(max_images_per_page=2, max_images=3))
    assert [(ii.page, ii.image.image_id) for ii in sel.images] == [(0, 0), (0, 1), (1, 0)]
    sel = select_input(q, SelectionConfig(max_images_per_page=None, max_images=None))
    assert len(sel.images) == 14


def test_image_validity_range_and_reorganise():
    chunks = [Chunk(0, "A <IMAGE_PLACEHOLDER>[2] x <IMAGE_PLACEHOLDER>[0] <IMAGE_PLACEHOLDER>[9] ", 8),
              Chunk(1, "dropped <IMAGE_PLACEHOLDER>[1]", 1),
              Chunk(2, "B <IMAGE_PLACEHOLDER>[3]<IMAGE_PLACEHOLDER>[4]<IMAGE_PLACEHOLDER>", 7)]
    images = [img(0, 0, 6, split=0), img(0, 1, 9, split=1), img(0, 2, 3, split=0),
              img(0, 3, 2.5, split=2), img(0, 4, None, split=2), img(0, 5, 9, split=2, valid=False)]
    failed = Webpage(1, "t", "u", None, [])
    q = M2RAGQuery("q", "query", [failed, Webpage(0, "t", "u", chunks, images)])
    sel = select_input(q)
    p = sel.pages[0]
    assert [c.split_id for c in p.chunks] == [0, 2]
    # image 1 lost its chunk, 3 is below 3, 4 has no score, 5 is invalid; 2 comes before 0 in the text
    assert [im.image_id for im in p.images] == [2, 0]
    assert p.content == "A <IMAGE_PLACEHOLDER> x <IMAGE_PLACEHOLDER>  B "
    r = sel.report
    assert r["pages_failed"] == 1 and r["images_chunk_dropped"] == 1 and r["images_invalid"] == 1
    assert r["images_score_out_of_range"] == 2
    assert sel.important_images(8) == set()
    images[2].final_score = 8
    assert select_input(q).important_images(8) == {"cache/0/2.png"}


def test_unanchored_images_go_to_the_page_end():
    chunks = [Chunk(0, "one ", 9), Chunk(1, "two ", 9)]
    loose = ImageItem(0, "a.png", final_score=7, anchored=False, split_id=None)
    sel = select_input(M2RAGQuery("q", "query", [Webpage(0, "t", "u", chunks, [loose])]))
    assert sel.pages[0].content.endswith("<IMAGE_PLACEHOLDER>\n") and sel.pages[0].images == [loose]


def test_murar_config_takes_every_valid_image_and_no_aux():
    aux = [ImageItem("aux-0", "aux.png", final_score=9, is_aux=True)]
    q = M2RAGQuery("q", "query", [page(0, 7, score=1.0, chunk_scores=(0.5,)), page(1, 1, chunk_scores=(0.05,))], aux)
    sel = select_input(q, SelectionConfig.murar())
    assert len(sel.pages) == 1 and len(sel.images) == 7 and sel.aux_images == []
    assert sel.report["aux_images_ignored"] == 1


# -------------------------------------------------------------------------------------------- curation
def png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr.astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def noise(seed, size=200):
    return png(np.random.default_rng(seed).integers(0, 256, (size, size, 3)))


def test_size_filters():
    big = ImageItem(0, "a.png", data=noise(1))
    assert len(big.data) > 20_480 and image_filter_reason(big) is None and big.width == 200
    assert image_filter_reason(ImageItem(1, "b.png", data=noise(2, size=50))) == "pixel_area"
    flat = ImageItem(2, "c.png", data=png(np.full((200, 200, 3), 200)))
    assert image_filter_reason(flat) == "file_size"
    assert image_filter_reason(ImageItem(3, "d.png", data=b"junk")) == "undecodable"
    assert image_filter_reason(ImageItem(4, "e.png")) == "unreadable"
    assert image_filter_reason(flat, SelectionConfig(min_file_bytes=0)) is None


def test_phash_dedup_within_page():
    pytest.importorskip("imagehash")
    base = np.random.default_rng(5).integers(0, 256, (64, 64, 3))
    gradient = np.tile(np.linspace(0, 255, 64), (64, 1))[..., None].repeat(3, axis=2)
    a = ImageItem(0, "a.png", data=png(base))
    a2 = ImageItem(1, "a2.png", data=png(np.clip(base + 2, 0, 255)))  # near copy
    b = ImageItem(2, "b.png", data=png(gradient))
    removed = dedup_page_images([a, a2, b])
    assert removed == [a2] and a2.drop_reason == "duplicate"
    assert a.drop_reason is None and b.drop_reason is None


def test_score_chunks_parse_rule_and_failures():
    def reply(text):
        if "c0" in text:
            return "useful\n7"
        if "c1" in text:
            return "I cannot say"
        return GenerationFailure("timeout", "slow")

    chunks = [Chunk(i, f"chunk c{i}") for i in range(3)]
    q = M2RAGQuery("q", "query", [Webpage(0, "t", "u", chunks, [])])
    rep = score_chunks(q, LLMClient(ScriptedBackend(reply)))
    assert [c.score for c in chunks] == [7.0, 0.0, None]  # no integer -> 0 (spec §2.1), failure -> None
    assert rep.counts == {"scored": 2, "unparsed": 1, "failed": 1}
    assert chunks[0].evaluation == "useful\n7"


def test_curate_images_pipeline():
    pytest.importorskip("imagehash")
    good = ImageItem(0, "g.png", data=noise(3), alt="a scatter plot", split_id=0)
    dup = ImageItem(1, "d.png", data=noise(3), split_id=0)
    small = ImageItem(2, "s.png", data=noise(4, size=40), split_id=0)
    clip_fail = ImageItem(3, "c.png", data=noise(6), split_id=0)
    q = M2RAGQuery("q", "how are x and y related?", [Webpage(0, "t", "u", [Chunk(0, "x", 9)], [good, dup, small, clip_fail])])
    stub = ScriptedBackend(lambda text: "8 - it shows the relation, 3 axes")

    def clip(query, data):
        if data == clip_fail.data:
            raise RuntimeError("model down")
        return 27.5

    rep = curate_images(q, scorer=LLMClient(stub), vision=False, clip_scorer=clip)
    assert good.final_score == 8.0 and good.valid and good.clip_score == 27.5  # first integer
    assert "Image description: a scatter plot" in stub.prompts[0]
    assert (dup.drop_reason, small.drop_reason, clip_fail.drop_reason) == ("duplicate", "pixel_area", "clip_failed")
    assert not any(i.valid for i in (dup, small, clip_fail))
    assert rep.counts["dropped_duplicate"] == 1 and rep.counts["scored"] == 1 and len(stub.prompts) == 1
