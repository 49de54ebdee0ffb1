"""Query pages and run comparison: thumbnails made once per image and keyed by every setting, TREC runs read as
:func:`mmir.retrieval.runs.read_run` reads them, a Task 3 and a Task 4 page's items and a reranker's input order,
the scatter's counts, the report rule's inputs, and ``mmir compare`` against pytrec_eval and scipy directly."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
import yaml
from conftest import PROJECT
from report_results import IMAGE_COLUMNS, png

from mmir import cli
from mmir.core.errors import DataError
from mmir.core.io import write_parquet, write_text
from mmir.evaluation.compare import compare, largest_differences, record
from mmir.reporting.query_data import DomainFiles, excerpt, load_domain, read_ranked
from mmir.reporting.query_pages import render_page
from mmir.reporting.scatter import scatter_svg
from mmir.reporting.thumbnails import Thumbnails
from mmir.retrieval.runs import read_run, write_run


def test_thumbnails_are_made_once_and_keyed_by_image_and_settings(tmp_path):
    red, blue = png((250, 0, 0), (640, 320)), png((0, 0, 250))
    t = Thumbnails(tmp_path / "cache", tmp_path / "out")
    name = t.get("a" * 64, red, "red.png")
    with Image_open(tmp_path / "out" / name) as im:
        assert im.size == (160, 80) and im.format == "JPEG"
    assert t.get("a" * 64, lambda: pytest.fail("read again"), "red.png") == name  # same image in one report: placed once
    assert t.get("b" * 64, blue, "blue.png") != name
    assert (t.made, t.cached, t.placed, t.failed) == (2, 0, 2, 0)
    again = Thumbnails(tmp_path / "cache", tmp_path / "out2")  # a rerun: from the cache, bytes never read
    assert again.get("a" * 64, lambda: pytest.fail("decoded again"), "red.png") == name and (again.made, again.cached) == (0, 1)
    for changed in ({"max_side": 100}, {"quality": 50}):  # every setting is in the key: a miss, a new file
        other = Thumbnails(tmp_path / "cache", tmp_path / "out3", **changed)
        assert other.get("a" * 64, red, "red.png") != name and other.made == 1
    bad = Thumbnails(tmp_path / "cache", tmp_path / "out4")
    assert bad.get("c" * 64, b"not an image", "broken.png") is None
    assert bad.counts() == {"thumbnails": 0, "thumbnails_made": 0, "thumbnails_cached": 0, "images_undecodable": 1}
    assert "broken.png" in bad.failures[0] and not list((tmp_path / "cache").rglob("cccc*"))


def Image_open(path):  # noqa: N802 - PIL's name
    from PIL import Image

    return Image.open(path)


def test_read_ranked_orders_as_read_run_and_names_bad_lines(tmp_path):
    run = {"q2": [("b", 3.0), ("a", 2.0)], "q1": [("c", 9.0), ("a", 1.0), ("d", 0.5)]}
    write_run(tmp_path / "r.trec", run, tag="x")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    write_text(tmp_path / "shuffled.trec", "\n".join(lines[::-1]) + "\n")  # the rank column decides, not the line order
    df = read_ranked(tmp_path / "shuffled.trec")
    assert {q: list(g["item"]) for q, g in df.groupby("qid")} == {q: [d for d, _ in v] for q, v in read_run(tmp_path / "r.trec").items()}
    assert df["pos"].tolist() == [1, 2, 3, 1, 2]
    write_text(tmp_path / "bad.trec", "q1 Q0 a 1 2.0 x\nq1 Q0 b two 1.0 x\n")
    with pytest.raises(DataError, match=r"bad.trec.*line 2"):
        read_ranked(tmp_path / "bad.trec")
    write_text(tmp_path / "short.trec", "q1 Q0 a 1 2.0 x\nq1 Q0 b 2 1.0\n")
    with pytest.raises(DataError, match="line 2"):
        read_ranked(tmp_path / "short.trec")


def _mm_domain(prep: Path) -> list[str]:
    """A prepared domain with three corpus images (one undecodable), pairs and Task 3/4 qrels; returns the images."""
    docs = ["d/a.txt", "d/b.txt"]
    write_parquet(prep / "corpus.parquet", pd.DataFrame({"doc_id": docs, "text": ["alpha " * 200, "beta text"]}))
    imgs = ["d/i1.png", "d/i2.png", "d/i3.png"]
    rows = [{"path": p, "sha256": f"{k}" * 64, "alt": f"alt of {p}", "bytes": png((60 * k, 0, 0)) if k < 2 else b"xx",
             "width": 300, "height": 200, "ok": k < 2} for k, p in enumerate(imgs)]
    write_parquet(prep / "images.parquet", pd.DataFrame(rows, columns=IMAGE_COLUMNS))
    write_parquet(prep / "query_images.parquet", pd.DataFrame(columns=IMAGE_COLUMNS))
    write_parquet(prep / "topics_mm.parquet", pd.DataFrame({"qid": ["q1"], "query": ["which plot?"], "image_paths": [[]],
                                                            "positive_images": [[imgs[0]]], "negative_images": [[]]}))
    pairs = [f"{d}|||{i}" for d in docs for i in imgs] + [f"{d}|||__NO_IMAGE__" for d in docs]
    write_parquet(prep / "pairs.parquet", pd.DataFrame({"pair_id": pairs, "doc_id": [p.split("|||")[0] for p in pairs],
                                                        "image_path": [p.split("|||")[1].replace("__NO_IMAGE__", "") for p in pairs]}))
    write_text(prep / "qrels.task3.txt", f"q1 0 {imgs[0]} 1\n")
    write_text(prep / "qrels.task4.txt", f"q1 0 d/a.txt|||{imgs[0]} 2\nq1 0 d/a.txt|||__NO_IMAGE__ 1\n")
    return imgs


@pytest.mark.parametrize("task", ["task3", "task4"])
def test_image_and_pair_pages_show_items_and_the_rerankers_input_order(tmp_path, task):
    prep = tmp_path / "prep"
    imgs = _mm_domain(prep)
    items = imgs if task == "task3" else pd.read_parquet(prep / "pairs.parquet")["pair_id"].tolist()
    first = {"q1": [(it, float(len(items) - k)) for k, it in enumerate(items)]}
    reranked = {"q1": [first["q1"][k] for k in (2, 0, 1)]}  # the reranker's output: its 3rd, 1st and 2nd input
    runs = {}
    for s, r in (("bm25", first), ("bm25+rr:ce", reranked)):
        runs[s] = str(tmp_path / f"{s}.trec")
        write_run(runs[s], r, tag="x")
    pq = {s: tmp_path / f"{s}.tsv" for s in runs}
    for s, v in zip(runs, (0.25, 0.75)):
        write_text(pq[s], f"qid\tmeasure\tvalue\nq1\tnDCG@10\t{v}\n")
    files = DomainFiles(task, "ds", "d", prep, f"qrels.{task}.txt", runs, {s: str(p) for s, p in pq.items()},
                        first_stage={"bm25+rr:ce": "bm25"})
    data = load_domain(files, Thumbnails(tmp_path / "cache", tmp_path / "thumbs"))
    q = data.queries[0]
    assert q.inputs["bm25+rr:ce"] == [3, 1, 2] and q.scores == {"bm25": 0.25, "bm25+rr:ce": 0.75}
    qrels = {imgs[0]: 1} if task == "task3" else {f"d/a.txt|||{imgs[0]}": 2, "d/a.txt|||__NO_IMAGE__": 1}
    assert q.top["bm25"] == [(it, qrels.get(it, 0)) for it in items[:10]]
    assert q.first["bm25"] == 1 + min(items.index(i) for i in qrels)
    assert data.thumbs[imgs[0]] and data.thumbs[imgs[2]] is None  # the undecodable image has no thumbnail
    if task == "task4":
        it = data.items[f"d/a.txt|||{imgs[1]}"]
        assert it == {"doc": "d/a.txt", "image": imgs[1], "text": excerpt("alpha " * 200)} and len(it["text"]) <= 301
        assert data.items["d/b.txt|||__NO_IMAGE__"] == {"doc": "d/b.txt", "text": "beta text"}
    else:
        assert data.items[imgs[1]] == {"image": imgs[1]} and data.alts[imgs[1]] == f"alt of {imgs[1]}"
    html = render_page(data)
    assert '"inputs":{"bm25+rr:ce":[3,1,2]}' in html and "bm25+rr:ce vs bm25" in html


def test_scatter_counts_and_record():
    a = {"q1": 0.5, "q2": 0.1, "q3": 0.3, "q4": 0.0}
    b = {"q1": 0.2, "q2": 0.4, "q3": 0.3, "q5": 1.0}
    svg = scatter_svg(a, b, "A<x>", "B")
    assert 'data-n="3" data-above="1" data-below="1" data-on="1"' in svg and "A&lt;x&gt;" in svg and "<x>" not in svg
    assert record(a, b).__dict__ == {"wins": 1, "ties": 1, "losses": 1}
    assert [(d.key, round(d.diff, 6)) for d in largest_differences(a, b, 5)] == [("q1", 0.3), ("q2", -0.3)]


def test_report_rule_reads_runs_perquery_prepared_files_and_labels():
    from mmir.workflow.rules import RULES
    from mmir.workflow.units import essentiality_units, task_units
    from mmir.workflow.validate import load_config

    cfg = load_config(str(PROJECT / "params.yaml"), [])
    inputs = RULES["report_html"].input(cfg, {})
    runs = {f"results/runs/{t}/{u['dataset']}/{u['system']}/{u['domain']}.trec" for t in cfg["tasks"] for u in task_units(cfg, t)}
    assert set(inputs["runs"]) == runs and len(inputs["perquery"]) == len(runs)
    assert "data/prepared/openstax/statistics/pairs.parquet" in inputs["pages_prepared"]
    assert "data/prepared/openstax/statistics/qrels.task4.txt" in inputs["pages_prepared"]
    assert inputs["labels"] == [f"results/essentiality/{u['dataset']}/{u['domain']}/labels.parquet" for u in essentiality_units(cfg)]
    job = RULES["report_html"].job(cfg, {})
    assert job.output["queries"] == "results/report/queries" and "queries" in RULES["report_html"].directories


def _runs(tmp_path: Path):
    """Two runs over 12 queries of 30 documents, scores strictly decreasing (so trec_eval keeps the run's order)."""
    rng = np.random.default_rng(5)
    docs = [f"d{k}" for k in range(30)]
    qrels = {f"q{i}": {docs[k]: int(rng.integers(1, 3)) for k in rng.choice(30, 3, replace=False)} for i in range(12)}
    runs = []
    for name in ("a", "b"):
        run = {q: [(docs[k], float(30 - r)) for r, k in enumerate(rng.permutation(30))] for q in qrels}
        write_run(tmp_path / f"{name}.trec", run, tag=name)
        runs.append(run)
    write_text(tmp_path / "qrels.txt", "".join(f"{q} 0 {d} {r}\n" for q, v in qrels.items() for d, r in v.items()))
    write_parquet(tmp_path / "topics.parquet", pd.DataFrame({"qid": list(qrels), "query": [f"text of {q}" for q in qrels]}))
    return qrels, runs


def test_compare_command_matches_pytrec_eval_and_an_exact_permutation_test(tmp_path):
    from scipy import stats

    qrels, (run_a, run_b) = _runs(tmp_path)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    a = {q: v["ndcg_cut_10"] for q, v in ev.evaluate({q: dict(r) for q, r in run_a.items()}).items()}
    b = {q: v["ndcg_cut_10"] for q, v in ev.evaluate({q: dict(r) for q, r in run_b.items()}).items()}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["--params", str(PROJECT / "params.yaml"), "compare", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"),
                       "--qrels", str(tmp_path / "qrels.txt"), "--topics", str(tmp_path / "topics.parquet"), "--top", "4"])
    out = buf.getvalue()
    print(out)
    assert rc == 0
    w, t, lo = (int(x) for x in re.search(r"wins / ties / losses of A against B: (\d+) / (\d+) / (\d+)", out).groups())
    assert (w, t, lo) == (sum(a[q] > b[q] for q in a), sum(a[q] == b[q] for q in a), sum(a[q] < b[q] for q in a))
    diff = np.array([a[q] - b[q] for q in a])
    assert f"mean difference A - B {diff.mean():+.4f}" in out
    listed = re.findall(r"^\s*([+-]\d\.\d{4})\s+\S+\s+\S+\s+(q\d+)\s+text of (q\d+)$", out, re.M)
    expected = sorted((q for q in a if a[q] != b[q]), key=lambda q: (-round(abs(a[q] - b[q]), 9), int(q[1:])))[:4]
    assert [q for _, q, _ in listed] == expected and all(q == q2 for _, q, q2 in listed)
    assert [float(d) for d, _, _ in listed] == [round(a[q] - b[q], 4) + 0.0 for q in expected]
    # 12 queries: the test enumerates every sign pattern, as scipy's exact paired permutation test does
    exact = stats.permutation_test((diff,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue
    p = float(re.search(r"p = (\S+) \(all 4096 sign patterns\)", out).group(1))
    assert p == pytest.approx(exact, rel=1e-3)
    lo_, hi_ = (float(x) for x in re.search(r"interval of the mean difference .*: \[(\S+), (\S+)\]", out).groups())
    assert lo_ <= diff.mean() <= hi_


def _ndcg10(qrels, run) -> float:
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    return float(np.mean([v["ndcg_cut_10"] for v in ev.evaluate({q: dict(r) for q, r in run.items()}).values()]))


def test_compare_reads_the_prepared_qrels_and_topics_of_a_domain_and_removes_its_exclusions(tmp_path, monkeypatch):
    qrels, (run_a, run_b) = _runs(tmp_path)
    prep = tmp_path / "data" / "prepared" / "ds" / "dom"
    prep.mkdir(parents=True)
    (tmp_path / "qrels.txt").rename(prep / "qrels.task1.txt")
    (tmp_path / "topics.parquet").rename(prep / "topics.parquet")
    # each query's top 2 of run A are its excluded (negative) documents, as the pipeline removes them before scoring
    excluded = {q: {d for d, _ in run_a[q][:2]} - set(qrels[q]) for q in qrels}
    write_text(prep / "excluded.tsv", "qid\tdoc_id\n" + "".join(f"{q}\t{d}\n" for q, ds in excluded.items() for d in sorted(ds)))
    kept = [{q: [(d, s) for d, s in r if d not in excluded[q]] for q, r in run.items()} for run in (run_a, run_b)]
    in_b = sum(d in excluded[q] for q, r in run_b.items() for d, _ in r)
    cfg = yaml.safe_load((PROJECT / "params.yaml").read_text())
    for d in cfg["datasets"].values():  # the config's relative paths are the project's; here the working folder is tmp
        d["root"] = str((PROJECT / d["root"]).resolve())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    params = ["compare", "a.trec", "b.trec", "--task", "task1"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main([*params, "--dataset", "ds", "--domain", "dom"]) == 0
    out = buf.getvalue()
    assert "qrels: data/prepared/ds/dom/qrels.task1.txt; topics: data/prepared/ds/dom/topics.parquet" in out
    assert "over 12 paired queries" in out and "text of q" in out
    assert f"protocol official: removed {sum(map(len, excluded.values()))} excluded items from A, {in_b} from B" in out
    a, b = (_ndcg10(qrels, r) for r in kept)
    assert a != pytest.approx(_ndcg10(qrels, run_a))  # the exclusions change run A's value: the test can tell
    assert f"A {a:.4f}, B {b:.4f}, mean difference A - B {a - b:+.4f}" in out
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # the same qrels as a file, without the domain: nothing is removed
        assert cli.main([*params, "--qrels", str(prep / "qrels.task1.txt")]) == 0
    assert "no exclusions removed" in buf.getvalue() and f"A {_ndcg10(qrels, run_a):.4f}," in buf.getvalue()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli.main([*params, "--dataset", "ds", "--domain", "nope"]) == 2
    assert "data/prepared/ds/nope/qrels.task1.txt: no such file (prepare the domain first, or pass --qrels)" in err.getvalue()
    with contextlib.redirect_stderr(err):
        assert cli.main(params) == 2
    assert "give --dataset and --domain" in err.getvalue()


def _compare(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["--params", str(PROJECT / "params.yaml"), "compare", *map(str, args)])
    return rc, out.getvalue(), err.getvalue()


def test_compare_refuses_a_run_without_judged_queries_and_counts_what_each_run_lacks(tmp_path):
    qrels, (run_a, run_b) = _runs(tmp_path)
    # run C ranks none of the 12 judged queries (another domain's queries): it was scored all zeros with rc 0
    write_run(tmp_path / "c.trec", {f"x{i}": r for i, r in enumerate(run_b.values())}, tag="c")
    rc, out, err = _compare(tmp_path / "a.trec", tmp_path / "c.trec", "--qrels", tmp_path / "qrels.txt")
    assert rc == 2 and out == ""
    assert f"{tmp_path / 'c.trec'}: none of the 12 judged queries of the qrels is in this run (12 ranked queries" in err
    # run D lacks 5 judged queries and ranks 2 the qrels do not judge; run A has all 12
    write_run(tmp_path / "d.trec", {**{q: r for q, r in list(run_b.items())[5:]}, "u1": run_b["q0"], "u2": run_b["q1"]}, tag="d")
    rc, out, err = _compare(tmp_path / "a.trec", tmp_path / "d.trec", "--qrels", tmp_path / "qrels.txt")
    assert rc == 0, err
    assert "run A lacks 0 of the 12 judged queries (scored 0); 0 of its queries are unjudged (not scored)" in out
    assert "run B lacks 5 of the 12 judged queries (scored 0); 2 of its queries are unjudged (not scored)" in out
    d = {q: r for q, r in run_b.items() if q not in list(run_b)[:5]}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    b = np.mean([ev.evaluate({q: dict(r) for q, r in d.items()}).get(q, {"ndcg_cut_10": 0.0})["ndcg_cut_10"] for q in qrels])
    assert f"B {b:.4f}, mean" in out  # the lacking queries count 0, as in the tables


def test_compare_function_leaves_out_unpaired_queries_and_refuses_none():
    c = compare({"q1": 1.0, "q2": 0.0, "q3": 0.5}, {"q1": 0.0, "q2": 0.0, "q4": 1.0})
    assert (c.n, c.record.wins, c.record.ties, c.only_a, c.only_b) == (2, 1, 1, ["q3"], ["q4"])
    with pytest.raises(ValueError, match="no query is scored by both"):
        compare({"q1": 1.0}, {"q2": 1.0})


def test_summary_counts_a_reranked_system_against_its_first_stage_over_every_domain():
    from mmir.reporting.query_pages import DomainScores
    from mmir.reporting.summary import dataset_summary

    rng = np.random.default_rng(2)
    systems = ["bm25", "dense", "bm25+rr:ce"]
    domains, pooled = [], {s: {} for s in systems}
    for dom in ("d1", "d2"):
        scores = {s: {f"q{i}": float(rng.choice([0.0, 0.5, 1.0])) for i in range(15)} for s in systems}
        files = DomainFiles("task1", "ds", dom, Path("."), "qrels.task1.txt", {s: "" for s in systems}, {s: "" for s in systems},
                            baseline="bm25", first_stage={"bm25+rr:ce": "bm25"})
        domains.append(DomainScores(files, scores, {q: f"text {dom} {q}" for q in scores["bm25"]}, f"queries/task1/ds/{dom}.html", 15))
        for s in systems:
            pooled[s] |= {(dom, q): v for q, v in scores[s].items()}
    cells = {s: {"Avg.": {"mean": 10.0 * k, "ci_low": 1.0, "ci_high": 30.0, "significant": k == 2, "diff": None, "p_adj": None}}
             for k, s in enumerate(systems)}
    sig = {"measure": "nDCG@10", "labels": {}, "datasets": {"ds": {"baseline": "bm25", "cells": cells}}}
    d = dataset_summary("task1", "ds", sig, {"ds": (systems, ["d1", "d2", "Avg."])}, domains)
    rows = {r["system"]: r for r in d["rows"]}
    a, b = pooled["bm25+rr:ce"], pooled["bm25"]
    expected = (sum(a[k] > b[k] for k in a), sum(a[k] == b[k] for k in a), sum(a[k] < b[k] for k in a))
    rr = rows["bm25+rr:ce"]
    assert (rr["vs_first"]["wins"], rr["vs_first"]["ties"], rr["vs_first"]["losses"]) == expected and rr["first_stage"] == "bm25"
    assert rows["bm25"]["vs_baseline"] is None and rows["dense"]["vs_first"] is None and d["reranked"]
    assert [c["a"] for c in d["comparisons"]] == ["dense", "bm25+rr:ce"]  # the first stage is the baseline: listed once
    first = d["comparisons"][1]["largest"][0]
    assert first["href"] == f"queries/task1/ds/{first['domain']}.html#q-{first['qid']}"


def test_summary_shows_the_tie_aware_avg_where_it_prints_differently(tmp_path):
    """Issue 38 item 8: the summary signals a tie-aware value that differs (from the table CSV's Avg. tie_aware)."""
    from mmir.reporting.summary import dataset_summary, tie_aware_avgs

    csv = tmp_path / "task1.csv"
    csv.write_text("dataset,system,label,d1,Avg.,Avg. tie_aware\nds,bm25,,41.0,41.04,40.51\nds,dense,,30.0,30.0,30.02\n")
    aware = tie_aware_avgs(csv)
    assert aware == {("ds", "bm25"): 40.51, ("ds", "dense"): 30.02}
    cells = {s: {"Avg.": {"mean": m, "ci_low": 1.0, "ci_high": 50.0, "significant": False}} for s, m in
             (("bm25", 41.04), ("dense", 30.0))}
    sig = {"measure": "nDCG@10", "labels": {}, "datasets": {"ds": {"baseline": "bm25", "cells": cells}}}
    rows = {r["system"]: r for r in dataset_summary("task1", "ds", sig, {"ds": (["bm25", "dense"], ["d1", "Avg."])}, [],
                                                    aware)["rows"]}
    assert rows["bm25"]["tie_aware"] == 40.51 and rows["dense"]["tie_aware"] is None  # 30.0 and 30.02 print alike
