"""Tasks 2–4 data: pairs, graded Task 4 qrels (every case of MM-BRIGHT §4.1), exclusions, image checks."""

import io

import pandas as pd
import pytest
from conftest import write_domain
from PIL import Image

from mmir.core.errors import DataError
from mmir.data.multimodal import NO_IMAGE, doc_base_key, image_base_key, pair_id
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.data.trec import read_qrels


def png(color=(200, 10, 10), size=(8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


# pages: A = aaaaaaaa (gold g1, non-gold d2), B = bbbbbbbb (negative doc n1), C = cccccccc (gold g3, no images)
DOCS = [("d/aaaaaaaa_0.txt", "alpha gold passage about means"), ("d/aaaaaaaa_1.txt", "alpha other passage"),
        ("d/bbbbbbbb_0.txt", "beta negative passage"), ("d/cccccccc_0.txt", "gamma gold passage without figures"),
        ("d/dddddddd_0.txt", "delta passage")]
IMG = {k: f"d/d_{k[0] * 8}_{k[1:]}/image_1.png" for k in ("a0001", "a0002", "a0003", "b0001", "d0001")}
DOC_IMAGES = [(IMG["a0001"], png((255, 0, 0)), "a red chart"), (IMG["a0002"], png((0, 255, 0)), ""),
              (IMG["a0003"], png((0, 0, 255)), None), (IMG["b0001"], png((9, 9, 9)), "beta"),
              (IMG["d0001"], png((90, 90, 9)), "delta")]
EX_MM = [{"id": "q1", "query": "mean of a sample", "gold_ids": ["d/aaaaaaaa_0.txt", "d/cccccccc_0.txt"],
          "gold_answers": [], "negative_ids": ["d/bbbbbbbb_0.txt"], "image_paths": ["d/query_q1/image_1.png"],
          "positive_images": [{"image_path": IMG["a0001"]}, {"image_path": IMG["a0003"]}, {"image_path": IMG["d0001"]}],
          "negative_images": [{"image_path": IMG["b0001"]}, {"image_path": IMG["a0003"]}]},
         {"id": "q2", "query": "no image query", "gold_ids": ["d/dddddddd_0.txt"], "gold_answers": [],
          "negative_ids": [], "image_paths": [], "positive_images": [], "negative_images": []}]


def mm_root(tmp_path, doc_images=DOC_IMAGES, ex_mm=EX_MM, query_images=None):
    plain = [{k: v for k, v in e.items() if k not in ("positive_images", "negative_images")} for e in ex_mm]
    root = write_domain(tmp_path / "raw", docs=DOCS, examples=plain)
    for sub in ("examples_multimodal", "document_images", "examples_images"):
        (root / sub).mkdir()
    pd.DataFrame(ex_mm).to_parquet(root / "examples_multimodal" / "d.parquet", index=False)
    pd.DataFrame(doc_images, columns=["path", "bytes", "alt"]).to_parquet(root / "document_images" / "d.parquet", index=False)
    qi = query_images if query_images is not None else [("d/query_q1/image_1.png", png((1, 2, 3)), "q alt")]
    pd.DataFrame(qi, columns=["path", "bytes", "alt"]).to_parquet(root / "examples_images" / "d.parquet", index=False)
    return root


def ds(root):
    return {"source": "local", "root": str(root), "integrity": {}}


def test_base_keys_and_pair_ids():
    assert doc_base_key("biology/0a1b2c3d_12.txt") == "0a1b2c3d"
    assert image_base_key("earth_science/earth_science_0a1b2c3d_0003/image_2.jpg") == "0a1b2c3d"
    assert image_base_key("d/query_q1/image_1.png") is None
    assert pair_id("d/x_1.txt", None) == f"d/x_1.txt|||{NO_IMAGE}"


def test_task4_graded_qrels_cover_every_case(tmp_path):
    p = prepare_domain("t", ds(mm_root(tmp_path)), "d")
    mm = p.mm
    pairs = set(mm.pairs["pair_id"])
    g1, d2, n1, g3 = "d/aaaaaaaa_0.txt", "d/aaaaaaaa_1.txt", "d/bbbbbbbb_0.txt", "d/cccccccc_0.txt"
    # a text-only pair per document, plus one pair per image of the same page
    assert len(pairs) == 5 + 2 * 3 + 1 + 1 and pair_id(g1, IMG["a0002"]) in pairs and pair_id(g3, None) in pairs
    q4 = mm.qrels["task4"]["q1"]
    assert q4[pair_id(g1, None)] == 1 and q4[pair_id(g3, None)] == 1          # gold passage, no image
    assert q4[pair_id(g1, IMG["a0001"])] == 2                                # gold passage + positive image
    assert q4[pair_id(g1, IMG["a0003"])] == 2                                # positive and negative: positive wins
    assert pair_id(g1, IMG["a0002"]) not in q4                               # present, not annotated: 0
    assert pair_id(d2, IMG["a0001"]) not in q4                               # non-gold passage + positive image: 0
    assert p.report["problems"]["positive_images_without_gold_page"] == 1    # d0001: its page has no gold passage
    assert set(mm.always_excluded["q1"]) == {pair_id(n1, IMG["b0001"])}      # negative image pairs removed
    assert pair_id(g1, IMG["a0003"]) not in mm.always_excluded["q1"]
    assert set(mm.excluded["task4"]["q1"]) == {pair_id(n1, None), pair_id(n1, IMG["b0001"])}  # negative_ids doc
    assert mm.qrels["task3"]["q1"] == {IMG["a0001"]: 1, IMG["a0003"]: 1, IMG["d0001"]: 1}
    assert "q2" not in mm.qrels["task3"] and mm.qrels["task2"]["q2"] == {"d/dddddddd_0.txt": 1}
    assert mm.qrels["task4"]["q2"] == {pair_id("d/dddddddd_0.txt", None): 1}


def test_prepared_files_and_official_binary_scoring(tmp_path):
    from mmir.evaluation.scoring import score_run

    out = tmp_path / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp_path)), "d"), out)
    q4 = read_qrels(out / "qrels.task4.txt")
    assert q4["q1"][pair_id("d/aaaaaaaa_0.txt", IMG["a0001"])] == 2
    run = out / "r.trec"
    run.write_text(f"q1 Q0 {pair_id('d/aaaaaaaa_0.txt', None)} 1 2.0 x\nq1 Q0 {pair_id('d/aaaaaaaa_0.txt', IMG['a0001'])} 2 1.0 x\n")
    graded = score_run(run, out / "qrels.task4.txt", ["nDCG@10"], tmp_path / "g.json", tmp_path / "g.tsv")
    binary = score_run(run, out / "qrels.task4.txt", ["nDCG@10"], tmp_path / "b.json", tmp_path / "b.tsv", binary=True)
    # q1 graded ideal: 2, 2, 1, 1 ; binary ideal: 1, 1, 1, 1 (q2 retrieves nothing: 0)
    import math
    dcg_g = 1 / math.log2(2) + 2 / math.log2(3)
    idcg_g = 2 + 2 / math.log2(3) + 1 / 2 + 1 / math.log2(5)
    dcg_b = 1 + 1 / math.log2(3)
    idcg_b = 1 + 1 / math.log2(3) + 1 / 2 + 1 / math.log2(5)
    assert graded["measures"]["nDCG@10"] == pytest.approx((dcg_g / idcg_g) / 2, abs=1e-6)
    assert binary["measures"]["nDCG@10"] == pytest.approx((dcg_b / idcg_b) / 2, abs=1e-6)
    assert (out / "excluded.task4.always.tsv").read_text().count("\n") == 2


@pytest.mark.parametrize("bad", ["../escape.png", "/abs/x.png", "d/../../x.png"])
def test_image_path_escape_rejected(tmp_path, bad):
    imgs = DOC_IMAGES + [(bad, png(), "")]
    with pytest.raises(DataError) as exc:
        prepare_domain("t", ds(mm_root(tmp_path, doc_images=imgs)), "d")
    assert exc.value.field == "path" and exc.value.row == 5 and "document_images" in exc.value.file


def test_query_image_path_escape_rejected(tmp_path):
    ex = [dict(EX_MM[0], image_paths=["../../etc/passwd"]), EX_MM[1]]
    with pytest.raises(DataError) as exc:
        prepare_domain("t", ds(mm_root(tmp_path, ex_mm=ex)), "d")
    assert exc.value.field == "image_paths" and exc.value.row == 0


def test_corrupt_images_are_counted_not_fatal(tmp_path):
    imgs = DOC_IMAGES[:-1] + [(IMG["d0001"], png()[:30], "truncated")]
    qimgs = [("d/query_q1/image_1.png", b"not an image", "")]
    p = prepare_domain("t", ds(mm_root(tmp_path, doc_images=imgs, query_images=qimgs)), "d")
    assert p.report["problems"]["corpus_images_corrupt"] == 1 and p.report["problems"]["query_images_corrupt"] == 1
    ok = dict(zip(p.mm.images["path"], p.mm.images["ok"]))
    assert not ok[IMG["d0001"]] and sum(ok.values()) == 4                  # corpus: kept, never retrievable
    assert p.mm.qrels["task3"]["q1"][IMG["d0001"]] == 1                     # ... and still judged relevant
    assert p.mm.report["unretrievable"]["task3"] == 1
    assert p.mm.query_images["ok"].tolist() == [False]                      # query: kept, not used
    assert list(p.mm.topics["image_paths"][0]) == []                        # q1 is left with no usable image
    assert "field 'bytes'" in p.report["examples"]["corpus_images_corrupt"][0]
