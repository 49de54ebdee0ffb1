"""M2RAG knowledge bases from a hand-made retrieval run over hand-made prepared tables."""

import io

import pandas as pd
import pytest
from PIL import Image

from mmir.benchmarks.m2rag.knowledge_base import (
    ImagePlacement,
    PreparedDomain,
    build_knowledge_base,
    build_knowledge_bases,
    image_passages_from_captions,
    load_image_captions,
)
from mmir.benchmarks.m2rag.selection import select_input
from mmir.core.errors import DataError
from mmir.retrieval.runs import write_run


def png(color):
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(buf, format="PNG")
    return buf.getvalue()


CORPUS = pd.DataFrame({
    "doc_id": ["s/aaaaaaaa_1.txt", "s/aaaaaaaa_0.txt", "s/aaaaaaaa_10.txt", "s/aaaaaaaa_2.txt",
               "s/bbbbbbbb_0.txt", "s/cccccccc_0.txt", "loose-doc"],
    "text": ["alpha one. Figure 1.2 A histogram of exam scores by grade band.", "Alpha Title\nalpha zero",
             "alpha ten", "alpha two", "Beta Title\nbeta zero", "gamma zero", "a document without page key"],
})
IMAGES = pd.DataFrame({
    "path": ["s/s_aaaaaaaa_0002/image_1.png", "s/s_aaaaaaaa_0001/image_2.png", "s/s_aaaaaaaa_0001/image_1.png",
             "s/s_bbbbbbbb_0001/image_1.png", "s/s_aaaaaaaa_0003/image_1.png"],
    "alt": ["a histogram", "second", "first", None, "broken"],
    "bytes": [png((1, 1, 1)), png((2, 2, 2)), png((3, 3, 3)), png((4, 4, 4)), b"bad"],
    "ok": [True, True, True, True, False],
})
RANKING = [("s/aaaaaaaa_2.txt", 9.0), ("s/bbbbbbbb_0.txt", 8.0), ("s/missing_0.txt", 7.5), ("s/aaaaaaaa_2.txt", 7.0),
           ("s/aaaaaaaa_0.txt", 6.0), ("s/cccccccc_0.txt", 5.0)]


@pytest.fixture
def domain():
    return PreparedDomain(CORPUS, IMAGES, name="s")


def test_pages_in_rank_order_with_all_passages(domain):
    q = build_knowledge_base("q1", "what is a histogram", RANKING, domain, top_n=3)
    # top 3 distinct known documents: aaaaaaaa_2, bbbbbbbb_0, aaaaaaaa_0 -> pages a, b
    assert [p.url for p in q.webpages] == ["aaaaaaaa", "bbbbbbbb"]
    a, b = q.webpages
    assert [c.doc_id for c in a.chunks] == ["s/aaaaaaaa_0.txt", "s/aaaaaaaa_1.txt", "s/aaaaaaaa_2.txt", "s/aaaaaaaa_10.txt"]
    assert [c.split_id for c in a.chunks] == [0, 1, 2, 3]
    assert [c.retrieval_score for c in a.chunks] == [6.0, None, 9.0, None]
    assert a.title == "Alpha Title" and a.webpage_id == 0
    # images of the page in figure order, the not-ok one left out; unknown position -> unanchored
    assert [im.cached_image_url for im in a.images] == ["s/s_aaaaaaaa_0001/image_1.png", "s/s_aaaaaaaa_0001/image_2.png",
                                                        "s/s_aaaaaaaa_0002/image_1.png"]
    assert [im.image_id for im in a.images] == [0, 1, 2]
    assert all(not im.anchored and im.split_id is None and im.final_score is None for im in a.images)
    assert a.images[0].alt == "first" and a.images[0].data == png((3, 3, 3)) and a.images[0].ext == "png"
    assert [im.alt for im in b.images] == [""]
    assert all(c.text.endswith("\n\n") for c in a.chunks)


def test_known_passage_places_image_after_it(domain):
    placement = {"s/s_aaaaaaaa_0002/image_1.png": "s/aaaaaaaa_1.txt"}
    q = build_knowledge_base("q1", "histogram", RANKING, domain, top_n=1, images=ImagePlacement(passages=placement, score=5))
    a = q.webpages[0]
    anchored = a.images[2]
    assert anchored.anchored and anchored.split_id == 1
    assert a.chunks[1].text.endswith("grade band.\n<IMAGE_PLACEHOLDER>[2]\n\n") and a.chunks[1].image_ids == [2]
    for c in a.chunks:
        c.score = 9
    sel = select_input(q)
    content = sel.pages[0].content
    # the anchored image right after its passage, the two unanchored ones at the end of the page
    assert content.index("grade band.") < content.index("<IMAGE_PLACEHOLDER>") < content.index("alpha two")
    assert content.rstrip().endswith("<IMAGE_PLACEHOLDER>\n<IMAGE_PLACEHOLDER>")
    assert [ii.image.image_id for ii in sel.images] == [2, 0, 1]


def test_retrieved_scope_and_report(domain, tmp_path):
    q = build_knowledge_base("q1", "x", RANKING, domain, top_n=5, page_scope="retrieved",
                             images=ImagePlacement(passages={"s/s_aaaaaaaa_0001/image_1.png": "s/aaaaaaaa_1.txt"}))
    assert [[c.doc_id for c in p.chunks] for p in q.webpages] == [
        ["s/aaaaaaaa_0.txt", "s/aaaaaaaa_2.txt"], ["s/bbbbbbbb_0.txt"], ["s/cccccccc_0.txt"]]
    # the image whose passage was not retrieved is left out in this scope
    assert [im.cached_image_url for im in q.webpages[0].images] == ["s/s_aaaaaaaa_0001/image_2.png",
                                                                     "s/s_aaaaaaaa_0002/image_1.png"]
    run = tmp_path / "run.trec"
    write_run(run, {"q1": RANKING[:2] + [("loose-doc", 1.0)], "zz": [("s/cccccccc_0.txt", 1.0)]}, "bm25")
    qs, rep = build_knowledge_bases(run, {"q1": "x", "q2": "y"}, domain, top_n=10)
    assert [q.query_id for q in qs] == ["q1", "q2"]
    assert [p.url for p in qs[0].webpages] == ["aaaaaaaa", "bbbbbbbb", "loose-doc"]
    assert qs[0].webpages[2].chunks[0].doc_id == "loose-doc"
    assert qs[1].webpages == []
    c = rep.counts
    assert c["queries"] == 2 and c["queries_without_ranking"] == 1 and c["images_not_ok"] == 1
    with pytest.raises(DataError):
        build_knowledge_bases(run, {"q1": "x"}, domain, qids=["nope"])
    with pytest.raises(ValueError):
        build_knowledge_base("q", "x", RANKING, domain, top_n=0)


def test_captions_locate_passages(domain, tmp_path):
    tsv = tmp_path / "s.document_images.tsv"
    tsv.write_text("path\tmodule\torigin\tsrc\tcaption\n"
                   "s/s_aaaaaaaa_0002/image_1.png\tm1\tbody\tf.png\tA histogram of exam scores by grade band.\n"
                   "s/s_aaaaaaaa_0001/image_1.png\tm1\tbody\tg.png\t\n"
                   "s/s_bbbbbbbb_0001/image_1.png\tm2\tbody\th.png\tshort\n", encoding="utf-8")
    caps = load_image_captions(tsv)
    assert set(caps) == {"s/s_aaaaaaaa_0002/image_1.png", "s/s_bbbbbbbb_0001/image_1.png"}
    assert image_passages_from_captions(domain, caps) == {"s/s_aaaaaaaa_0002/image_1.png": "s/aaaaaaaa_1.txt"}


def test_from_dir(tmp_path):
    CORPUS.to_parquet(tmp_path / "corpus.parquet")
    IMAGES.to_parquet(tmp_path / "images.parquet")
    d = PreparedDomain.from_dir(tmp_path)
    assert d.page_docs("aaaaaaaa")[0] == "s/aaaaaaaa_0.txt" and len(d.page_images("aaaaaaaa")) == 4
    with pytest.raises(DataError, match="prepared corpus not found"):
        PreparedDomain.from_dir(tmp_path / "none")


def test_max_page_images_keeps_anchored_first_then_path_order(domain):
    # image_2 of figure 0001 anchored to the retrieved passage aaaaaaaa_2; the cap of 2 keeps it and the first
    # unanchored image in path order, and restores path order among the kept ones
    anchors = {"s/s_aaaaaaaa_0001/image_2.png": "s/aaaaaaaa_2.txt"}
    q = build_knowledge_base("q1", "q", RANKING, domain, top_n=3, images=ImagePlacement(passages=anchors, max_per_page=2))
    a = q.webpages[0]
    assert [im.cached_image_url for im in a.images] == ["s/s_aaaaaaaa_0001/image_1.png", "s/s_aaaaaaaa_0001/image_2.png"]
    assert [im.image_id for im in a.images] == [0, 1]
    assert [im.anchored for im in a.images] == [False, True]
    assert "<IMAGE_PLACEHOLDER>[1]" in next(c.text for c in a.chunks if c.doc_id == "s/aaaaaaaa_2.txt")
    q0 = build_knowledge_base("q1", "q", RANKING, domain, top_n=3, images=ImagePlacement(max_per_page=0))
    assert all(p.images == [] for p in q0.webpages)
    from mmir.benchmarks.m2rag.knowledge_base import KnowledgeBaseReport

    rep = KnowledgeBaseReport()
    build_knowledge_base("q1", "q", RANKING, domain, top_n=3, images=ImagePlacement(max_per_page=1), report=rep)
    assert rep.get("images_over_page_limit") == 2  # page a: 3 ok images -> 1; page b: 1 image -> 1
