"""The data layer on data in the exact shapes of the hub MM-BRIGHT dataset (and what the released code does
with them): int64 query ids, numpy list cells, positive_images as structs or strings, Windows paths on both
sides of a reference, BRIGHT's string gold_answers, extra undeclared columns, duplicate identical image
rows, SVG bytes under a .png name, a missing first query image, nulls and bytes that are not UTF-8."""

from __future__ import annotations

import io
import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from mmir.core.errors import DataError
from mmir.data.multimodal import pair_id
from mmir.data.prepare import ALL_FILES, prepare_domain, qrels_file, write_prepared
from mmir.data.trec import read_qrels

SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect/></svg>'


def png(color=(200, 10, 10), size=(8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def win(p: str) -> str:
    return p.replace("/", "\\")


# pages: A = aaaaaaaa (gold GA of query 1, non-gold A1), B = bbbbbbbb (negative doc of query 1),
# C = cccccccc (gold of query 2)
GA, A1, NB, GC = "d/aaaaaaaa_0.txt", "d/aaaaaaaa_1.txt", "d/bbbbbbbb_0.txt", "d/cccccccc_0.txt"
IA1, IA2, IA3 = (f"d/d_aaaaaaaa_000{k}/image_1.png" for k in (1, 2, 3))  # IA3 holds SVG bytes
IB1, IC1 = "d/d_bbbbbbbb_0001/image_1.png", "d/d_cccccccc_0001/image_1.png"
Q1_IMG1, Q1_IMG2, Q2_IMG1 = "d/query_1/image_1.png", "d/query_1/image_2.png", "d/query_2/image_1.png"
ANSWER = r"use $\frac{1}{n}\sum x_i$, i.e. C:\stats\mean"


def write(path, columns: dict, schema: pa.Schema | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=schema), path)


def hub_domain(tmp_path, positives_as="struct", examples_mm=None, doc_images=None, query_images=None,
               documents=None, examples=None):
    """One domain ``d`` laid out as the hub has it (see the module docstring); keyword arguments replace a
    whole table (a dict of columns)."""
    root = tmp_path / "hub"
    write(root / "documents" / "d.parquet", documents or {
        "id": [GA, A1, NB, GC],
        "content": ["the mean of a sample", "other text of page a", "negative passage b", "the variance"],
        "url": ["u1", "u2", "u3", "u4"]})  # undeclared column
    base = {
        "id": pa.array([1, 2], pa.int64()),
        "query": ["how to compute the mean", "how to compute the variance"],
        "gold_ids": [[GA], [GC]],
        "gold_answers": [ANSWER, ""],  # BRIGHT's format: one string per query
        "negative_ids": [[NB], ["N/A"]],
        "image_paths": [[win(Q1_IMG1), Q1_IMG2], [win(Q2_IMG1)]],
        "reasoning": ["r1", "r2"],  # undeclared column
    }
    write(root / "examples" / "d.parquet", examples or base)
    pos = [[win(IA1), IA3], [IC1]]
    if positives_as == "struct":
        pos = [[{"image_path": p} for p in ps] for ps in pos]
        neg = [[{"image_path": win(IB1)}], []]
    else:
        neg = [[win(IB1)], []]
    write(root / "examples_multimodal" / "d.parquet", examples_mm or {
        **base, "positive_images": pos, "negative_images": neg})
    write(root / "document_images" / "d.parquet", doc_images or {
        "path": [win(IA1), win(IA2), win(IA3), win(IB1), win(IC1), IA1],  # the last row repeats the first
        "bytes": [png((255, 0, 0)), png((0, 255, 0)), SVG, png((9, 9, 9)), png((0, 0, 255)), png((255, 0, 0))],
        "alt": ["red", "green", "svg figure", "black", None, "red"],
        "caption": ["c"] * 6})  # undeclared column
    write(root / "examples_images" / "d.parquet", query_images or {  # the first image of query 1 is missing
        "path": [win(Q1_IMG2), win(Q2_IMG1)], "bytes": [png((1, 2, 3)), png((3, 2, 1))], "alt": ["q", "q"]})
    return root


def ds(root, **integrity):
    return {"source": "local", "root": str(root), "integrity": integrity}


@pytest.fixture(params=["struct", "string"])
def hub(request, tmp_path):
    return prepare_domain("mmb", ds(hub_domain(tmp_path, request.param)), "d")


# ------------------------------------------------------------------------ 2. paths, ids, gold_answers
def test_windows_paths_on_both_sides_resolve(hub):
    mm = hub.mm
    assert set(mm.images["path"]) == {IA1, IA2, IA3, IB1, IC1}
    assert set(mm.query_images["path"]) == {Q1_IMG2, Q2_IMG1}
    assert mm.qrels["task3"] == {"1": {IA1: 1, IA3: 1}, "2": {IC1: 1}}
    assert dict(zip(mm.topics["qid"], mm.topics["negative_images"].map(list))) == {"1": [IB1], "2": []}
    assert "missing_positive_images" not in hub.report["problems"]
    # image tables 5 + 2; image_paths 2 per query config; one positive and one negative reference
    assert hub.report["backslash_refs"] == 5 + 2 + 2 * 2 + 1 + 1 and "backslash_refs" not in hub.report["problems"]


def test_a_duplicate_by_backslash_names_the_rows_that_hold_what_it_quotes(tmp_path):
    # the hub layout reads d\\aaaaaaaa_1.txt as d/aaaaaaaa_1.txt: the error quoted the / form at the row holding the \\ one
    root = hub_domain(tmp_path, documents={"id": [GA, A1, NB, GC, win(A1)], "content": ["a", "b", "c", "d", "e"]})
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    e = exc.value
    assert e.file.endswith("documents/d.parquet") and (e.row, e.field) == (4, "id")
    assert (f"duplicate document id {win(A1)!r} (first at row 1, written {A1!r} there: this layout reads a backslash "
            "in an id as /)") in str(e)
    p = prepare_domain("mmb", ds(root, duplicate_doc_ids="warn"), "d")
    assert list(p.corpus["doc_id"]) == [GA, A1, NB, GC] and p.report["problems"]["duplicate_doc_ids"] == 1


def test_int64_ids_and_string_gold_answers_kept_verbatim(hub):
    assert hub.topics["qid"].tolist() == ["1", "2"] and hub.mm.topics["qid"].tolist() == ["1", "2"]
    assert [list(a) for a in hub.topics["gold_answers"]] == [[ANSWER], []]  # one string = a one-element list
    assert hub.qrels == {"1": {GA: 1}, "2": {GC: 1}} and hub.excluded == {"1": [NB]}


# --------------------------------------------------------------------------- 3. undecodable corpus image
def test_svg_under_png_name_stays_judged_but_is_never_retrievable(hub, tmp_path):
    mm = hub.mm
    ok = dict(zip(mm.images["path"], mm.images["ok"]))
    assert not ok[IA3]
    assert sum(ok.values()) == 4
    assert mm.qrels["task3"]["1"][IA3] == 1                                   # judged relevant, as released
    assert mm.qrels["task4"]["1"][pair_id(GA, IA3)] == 2
    assert not any(IA3 in p for p in mm.pairs["pair_id"])                      # never paired
    assert hub.report["problems"]["corpus_images_corrupt"] == 1
    assert "SVG markup" in hub.report["examples"]["corpus_images_corrupt"][0]
    out = tmp_path / "prep"
    report = write_prepared(hub, out)
    assert report["unretrievable"] == {"task2": 0, "task3": 1, "task4": 1, "task4_official": 0}
    assert json.loads((out / "prepare.json").read_text())["unretrievable"]["task3"] == 1
    from mmir.retrieval.items import task_items

    assert IA3 not in set(task_items("task3", out).ids) and len(task_items("task3", out)) == 4


@pytest.mark.parametrize("bad", [b"", png()[:40]], ids=["zero-bytes", "truncated"])
def test_zero_and_truncated_bytes_also_stay_judged(tmp_path, bad):
    imgs = {"path": [IA1, IA2, IA3, IB1, IC1], "bytes": [png(), png(), bad, png(), png()], "alt": [""] * 5}
    p = prepare_domain("mmb", ds(hub_domain(tmp_path, doc_images=imgs)), "d")
    assert p.mm.qrels["task3"]["1"] == {IA1: 1, IA3: 1} and p.mm.report["unretrievable"]["task3"] == 1


# ----------------------------------------------------------------------------------- 4. Task 4 protocols
def test_task4_official_labels_every_pair_of_a_gold_passage(hub):
    paper, official = hub.mm.qrels["task4"]["1"], hub.mm.qrels["task4_official"]["1"]
    assert official == {pair_id(GA, None): 1, pair_id(GA, IA1): 1, pair_id(GA, IA2): 1}   # released task4_pair.py
    assert paper == {pair_id(GA, None): 1, pair_id(GA, IA1): 2, pair_id(GA, IA3): 2}      # paper §4.1
    assert qrels_file("task4") == "qrels.task4.txt" and qrels_file("task4", "official") == "qrels.task4.official.txt"
    assert qrels_file("task3", "official") == "qrels.task3.txt" and qrels_file("ablation") == "qrels.task1.txt"


BM25 = {"kind": "bm25", "backend": "bm25s", "method": "lucene", "k1": 0.9, "b": 0.4, "stopwords": "en", "stemmer": "english"}


def test_task4_protocols_give_different_qrels_rankings_and_scores(tmp_path):
    import pandas as pd

    from mmir.evaluation.scoring import score_run
    from mmir.retrieval.exclusions import exclusions as read_exclusions
    from mmir.retrieval.runs import read_run
    from mmir.workflow.retrieval_steps import RetrieveJob, retrieve

    out = tmp_path / "prep"
    write_prepared(prepare_domain("mmb", ds(hub_domain(tmp_path)), "d"), out)
    assert (out / "qrels.task4.official.txt").read_text() != (out / "qrels.task4.txt").read_text()
    assert read_exclusions(out, "task4", "official", "official") == {}
    paper_excl = read_exclusions(out, "task4", "official", "paper")
    assert paper_excl["1"] == {pair_id(NB, None), pair_id(NB, IB1)}
    captions = {IB1: "the mean of a sample", IA2: "mean"}  # image text pulls the negative pair up
    runs, scores = {}, {}
    pd.DataFrame({"path": list(captions), "text": list(captions.values())}).to_parquet(tmp_path / "caps.parquet")
    for proto in ("paper", "official"):
        ev = {"protocol": "official", "top_k": 100, "task4_protocol": proto}
        retrieve(RetrieveJob("task4", out, "bm25", BM25, ev, tmp_path / f"{proto}.trec", tmp_path / f"{proto}.stats.json",
                             captions=tmp_path / "caps.parquet"))
        runs[proto] = [d for d, _ in read_run(tmp_path / f"{proto}.trec")["1"]]
        scores[proto] = score_run(tmp_path / f"{proto}.trec", out / qrels_file("task4", proto), ["nDCG@10"],
                                  tmp_path / f"{proto}.json", tmp_path / f"{proto}.tsv")["measures"]["nDCG@10"]
    assert pair_id(NB, IB1) in runs["official"] and pair_id(NB, IB1) not in runs["paper"]
    # NB's text-only pair shares no term with the query: a BM25 run holds matching items only (issue 38), so it is in
    # neither run (it was once a score-0 pad of the official run)
    assert pair_id(NB, None) not in runs["official"] and pair_id(NB, None) not in runs["paper"]
    assert set(runs["official"]) - set(runs["paper"]) == {pair_id(NB, IB1)}
    assert scores["paper"] != pytest.approx(scores["official"])
    assert 0 < scores["paper"] < 1 and 0 < scores["official"] <= 1


# ------------------------------------------------------------------------------- 5. duplicate image rows
def test_duplicate_image_rows(hub, tmp_path):
    assert hub.report["problems"]["duplicate_images_identical"] == 1 and len(hub.mm.images) == 5
    assert "repeats row 0 with identical bytes" in hub.report["examples"]["duplicate_images_identical"][0]
    imgs = {"path": [IA1, IA2, IA3, IB1, IC1, win(IA2)], "bytes": [png(), png(), png(), png(), png(), png((1, 1, 1))],
            "alt": [""] * 6}
    root = hub_domain(tmp_path / "x", doc_images=imgs)
    out = tmp_path / "prep"
    with pytest.raises(DataError) as exc:
        write_prepared(prepare_domain("mmb", ds(root), "d"), out)
    e = exc.value
    assert e.file.endswith("document_images/d.parquet") and e.row == 5 and e.field == "bytes"
    assert f"{IA2!r} with different bytes than row 1" in str(e)
    assert not out.exists()                                                    # nothing partial


# ------------------------------------------------------------- 6. both query configs: same checks
def _mm_columns(**over):
    cols = {"id": ["1", "2"], "query": ["q one", "q two"], "gold_ids": [[GA], [GC]], "gold_answers": [[], []],
            "negative_ids": [[NB], []], "image_paths": [[Q1_IMG2], [Q2_IMG1]],
            "positive_images": [[{"image_path": IA1}], [{"image_path": IC1}]],
            "negative_images": [[{"image_path": IB1}], []]}
    return cols | over


@pytest.mark.parametrize("config", ["examples", "examples_multimodal"])
@pytest.mark.parametrize("ids, row, match", [([None, "2"], 0, "empty or missing query id"),
                                             (["1", "1"], 1, "duplicate query id '1' (first at row 0)"),
                                             ([1.0, float("nan")], 1, "empty or missing query id")])
def test_query_ids_are_checked_in_both_configs(tmp_path, config, ids, row, match):
    cols = _mm_columns(id=ids)
    if config == "examples":
        cols = {k: v for k, v in cols.items() if k not in ("positive_images", "negative_images")}
    root = hub_domain(tmp_path, **{"examples_mm" if config == "examples_multimodal" else "examples": cols})
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    assert exc.value.file.endswith(f"{config}/d.parquet") and exc.value.row == row and exc.value.field == "id"
    assert match in str(exc.value) and "'nan'" not in str(exc.value)


def test_multimodal_gold_policy_and_missing_positive_images_column(tmp_path):
    cols = _mm_columns(gold_ids=[[GA, "d/zzzzzzzz_9.txt"], [GC]])
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(hub_domain(tmp_path, examples_mm=cols)), "d")
    assert exc.value.file.endswith("examples_multimodal/d.parquet") and exc.value.field == "gold_ids"
    p = prepare_domain("mmb", ds(hub_domain(tmp_path / "w", examples_mm=cols), missing_gold="warn"), "d")
    assert p.report["problems"]["mm_missing_gold"] == 1 and p.mm.qrels["task2"]["1"] == {GA: 1}
    no_pos = {k: v for k, v in _mm_columns().items() if k != "positive_images"}
    p = prepare_domain("mmb", ds(hub_domain(tmp_path / "np", examples_mm=no_pos)), "d")
    assert p.report["problems"]["mm_column_missing"] == 1 and p.mm.qrels["task3"] == {}
    assert "field 'positive_images': column absent" in p.report["examples"]["mm_column_missing"][0]


# ------------------------------------------------------------------------- 7. unresolved references
def test_missing_first_query_image_is_warned_with_query_and_path(hub, tmp_path, caplog):
    assert hub.report["problems"]["missing_query_images"] == 1 == hub.report["problems"]["mm_missing_query_images"]
    msg = hub.report["examples"]["mm_missing_query_images"][0]
    assert "1 of 3 query image references are not in examples_images" in msg and f"query '1': {Q1_IMG1!r}" in msg
    assert "examples_multimodal/d.parquet, row 0, field 'image_paths'" in msg
    # the first usable image stands for the query, as the released loader skips images it cannot find
    assert [list(x) for x in hub.mm.topics["image_paths"]] == [[Q1_IMG2], [Q2_IMG1]]
    from mmir.workflow import steps

    with caplog.at_level(logging.WARNING, logger="mmir.workflow.steps"):
        steps.prepare("mmb", ds(hub_domain(tmp_path / "log")), "d", tmp_path / "log" / "prep")
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("mm_missing_query_images: 1") and Q1_IMG1 in m for m in lines)
    assert not any(m.rstrip().endswith("e.g.") for m in lines)
    assert any("cannot be retrieved" in m and "task3 1" in m for m in lines)


def test_missing_references_policy_and_share(tmp_path):
    root = hub_domain(tmp_path)
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root, missing_query_images="error"), "d")
    assert exc.value.row == 0 and exc.value.field == "image_paths" and "query '1'" in str(exc.value)
    # a path convention that differs between the tables: most references do not resolve -> error under warn
    qi = {"path": ["images/" + Q1_IMG2, "images/" + Q2_IMG1], "bytes": [png(), png()], "alt": ["", ""]}
    root = hub_domain(tmp_path / "conv", query_images=qi)
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    assert "100% of the domain's query image references do not resolve" in str(exc.value)
    assert "max_missing_share = 0.5" in str(exc.value) and str(root) in str(exc.value)
    p = prepare_domain("mmb", ds(root, max_missing_share=1), "d")
    assert p.report["problems"]["missing_query_images"] == 3
    # positives that name no corpus image: dropped from the qrels (warn) or more than half -> error
    pos = _mm_columns(positive_images=[[{"image_path": IA1}, {"image_path": "d/elsewhere/image_9.png"}], [{"image_path": IC1}]])
    p = prepare_domain("mmb", ds(hub_domain(tmp_path / "pos", examples_mm=pos)), "d")
    assert p.report["problems"]["mm_missing_positive_images"] == 1 and p.mm.qrels["task3"]["1"] == {IA1: 1}
    pos = _mm_columns(positive_images=[[{"image_path": "x/" + IA1}], [{"image_path": "x/" + IC1}]])
    with pytest.raises(DataError, match="positive image references do not resolve") as exc:
        prepare_domain("mmb", ds(hub_domain(tmp_path / "pos2", examples_mm=pos)), "d")
    assert exc.value.field == "positive_images"


# ----------------------------------------------------------------------------------- 8. invalid UTF-8
def test_invalid_utf8_content_names_file_row_id_field_and_offset(tmp_path):
    docs = {"id": [GA, A1, NB, GC], "content": pa.array([b"ok", b"fine", b"bad \xff here", b"ok"], pa.binary())}
    root = hub_domain(tmp_path, documents=docs)
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    e = exc.value
    assert e.file.endswith("documents/d.parquet") and e.row == 2 and e.field == "content"
    assert f"{NB!r}" in str(e) and "byte offset 4" in str(e)
    # a string column holding invalid UTF-8 (Arrow cannot convert it) is located the same way
    raw = pa.array([b"ok", b"fine", b"bad \xfe", b"ok"], pa.binary())
    bad = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    write(root / "documents" / "d.parquet", {"id": [GA, A1, NB, GC], "content": bad})
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    assert exc.value.row == 2 and exc.value.field == "content" and "byte offset 4" in str(exc.value)
    assert f"{NB!r}" in str(exc.value)


# ---------------------------------------------------------------------------------------- 9. null lists
@pytest.mark.parametrize("field", ["gold_ids", "image_paths"])
def test_null_list_is_an_error_unless_the_policy_says_warn(tmp_path, field):
    ex = {"id": ["1", "2"], "query": ["q one", "q two"], "gold_ids": [[GA], [GC]], "gold_answers": [None, None],
          "negative_ids": [[NB], []], "image_paths": [[Q1_IMG2], [Q2_IMG1]]}
    ex[field] = [ex[field][0], None]
    root = hub_domain(tmp_path, examples=ex)
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    e = exc.value
    assert e.file.endswith("examples/d.parquet") and e.row == 1 and e.field == field and "query '2'" in str(e)
    p = prepare_domain("mmb", ds(root, null_lists="warn"), "d")
    assert p.report["problems"]["null_lists"] == 1 and "query '2'" in p.report["examples"]["null_lists"][0]
    if field == "gold_ids":
        # read as [], the query has no judgement: integrity.unjudged_queries (drop) leaves it out, counted
        assert "2" not in p.qrels and "2" not in set(p.topics["qid"]) and p.report["problems"]["unjudged_queries"] == 1
        assert p.report["topic_rows"]["dropped"] == {"unjudged": 1} and p.report["topic_rows"]["dropped_ids"] == {"unjudged": ["2"]}


# ------------------------------------------------------------------------ 11. messages name real sources
def test_messages_name_the_real_source(tmp_path):
    from mmir.data.images import decode_image

    with pytest.raises(DataError) as exc:
        decode_image(SVG, source="d/x/image_1.png")
    assert "object at 0x" not in str(exc.value) and "SVG markup" in str(exc.value) and "d/x/image_1.png" in str(exc.value)
    imgs = {"path": [IA1, "../../etc/passwd"], "bytes": [png(), png()], "alt": ["", ""]}
    root = hub_domain(tmp_path, doc_images=imgs)
    with pytest.raises(DataError) as exc:
        prepare_domain("mmb", ds(root), "d")
    assert "/dataset" not in str(exc.value).replace(str(root), "") and str(root) in str(exc.value)
    assert exc.value.row == 1 and exc.value.field == "path"


# ------------------------------------------------------------------ 12. staged writes and counts on disk
def test_prepared_files_and_counts_on_disk(hub, tmp_path):
    out = tmp_path / "prep"
    write_prepared(hub, out)
    assert sorted(f.name for f in out.iterdir()) == sorted(ALL_FILES)
    report = json.loads((out / "prepare.json").read_text())
    assert report["problems"]["duplicate_images_identical"] == 1 and report["qrels_task4_official"] == 3 + 2
    assert read_qrels(out / "qrels.task4.official.txt")["2"] == {pair_id(GC, None): 1, pair_id(GC, IC1): 1}
    assert report["corpus_images"] == 5 and report["corpus_images_retrievable"] == 4
    assert report["qrels_task4_rel2"] == 3  # (GA, IA1), (GA, IA3) unretrievable, (GC, IC1)
