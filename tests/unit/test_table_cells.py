"""What a task table says beside its values, through the real score and report steps: the tie-aware value where ties
change a cell, the tied items per cell, cells without a number (no scorable query) through intervals, tests,
Avg., the metrics JSON, the reproduction check and the forest plot; the protocol captions from the task registry."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from test_ties import brute_force

from mmir.core.tasks import TASKS
from mmir.evaluation import expected as E
from mmir.reporting.forest import write_forest
from mmir.reporting.markdown import parse_tables, plain_text
from mmir.reporting.tables import protocol_caption
from mmir.workflow import steps

QRELS = {"q1": {"a": 0, "b": 0, "c": 2, "d": 1, "e": 0}, "q2": {"x": 1, "y": 0}, "q3": {"m": 1}}
RUNS = {  # bm25: q1's label-2 item last of a 3-way tie, q2 a 2-way tie; dense: distinct scores
    "bm25": {"q1": [("a", 5.0), ("b", 5.0), ("c", 5.0), ("d", 4.0), ("e", 3.0)], "q2": [("y", 1.0), ("x", 1.0)],
             "q3": [("m", 2.0), ("n", 1.0)]},
    "dense": {"q1": [("c", 0.9), ("a", 0.8), ("d", 0.7)], "q2": [("x", 0.5), ("y", 0.4)], "q3": [("n", 0.3), ("m", 0.2)]},
}


def _write(tmp, name, lines):
    p = tmp / name
    p.write_text("".join(f"{line}\n" for line in lines))
    return p


def _score(tmp, system, domain, qrels, run, tie_order="run"):
    qf = _write(tmp, f"qrels-{domain}.txt", [f"{q} 0 {d} {r}" for q, v in qrels.items() for d, r in v.items()])
    rf = _write(tmp, f"{system}-{domain}.trec", [f"{q} Q0 {d} {i} {s!r} {system}" for q, r in run.items()
                                                  for i, (d, s) in enumerate(r, 1)])
    mj, pq = tmp / f"{system}-{domain}.json", tmp / f"{system}-{domain}.perquery.tsv"
    steps.score(rf, qf, ["nDCG@10", "MAP"], mj, pq, {"task": "task4", "dataset": "os", "domain": domain, "system": system},
                tie_order=tie_order)
    return str(mj), str(pq)


def _report(tmp, files, name="t", **kw):
    out = steps.TableFiles(tmp / f"{name}.md", tmp / f"{name}.csv", tmp / f"{name}.metrics.json", tmp / f"{name}.sig.json")
    steps.report("task4", [m for m, _ in files], "nDCG@10", "official", out, perquery_files=[p for _, p in files],
                 significance={"resamples": 200}, **kw)
    return out


def test_ties_beside_the_value_and_counted_per_cell(tmp_path):
    files = [_score(tmp_path, s, "stat", QRELS, RUNS[s]) for s in ("bm25", "dense")]
    m = json.loads(open(files[0][0]).read())
    # the tie-aware mean is the brute-force mean over every order of the tied groups, per query
    want = sum(brute_force(QRELS[q], RUNS["bm25"][q], ["nDCG@10"])["nDCG@10"] for q in QRELS) / 3
    assert m["tie_orders"]["expected"]["nDCG@10"] == pytest.approx(want, abs=1e-12)
    assert m["measures"] == m["tie_orders"]["run"] and m["tie_order"] == "run"
    assert m["ties"]["nDCG@10"] == {"depth": 10, "tied_items": 5, "queries_with_ties": 2, "queries_changed": 2}
    assert m["ties"]["MAP"]["depth"] is None and m["ties"]["MAP"]["tied_items"] == 5
    run, exp = m["measures"]["nDCG@10"] * 100, want * 100
    assert f"{run:.1f}" != f"{exp:.1f}"  # the fixture's ties change the printed cell
    out = _report(tmp_path, files)
    md = out.md.read_text()
    print(md)
    assert f"| bm25 | {run:.1f} (tie-aware {exp:.1f}) | {run:.1f} (tie-aware {exp:.1f}) |" in md
    dense = json.loads(open(files[1][0]).read())["measures"]["nDCG@10"] * 100
    assert f"| dense | **{dense:.1f}** | **{dense:.1f}** |" in md  # no ties: the value alone
    assert "2 cells print differently with the ties ordered otherwise: the tie-aware value follows in brackets" in md
    assert "| bm25 | 5 | 5 |" in md and "| dense | 0 | 0 |" in md and "each query's top 10" in md
    csv = pd.read_csv(out.csv).set_index("system")
    assert csv.at["bm25", "stat run_order"] == pytest.approx(round(run, 4)) and csv.at["bm25", "stat"] == pytest.approx(round(run, 4))
    assert csv.at["bm25", "stat tie_aware"] == pytest.approx(round(exp, 4)) and csv.at["bm25", "Avg. tied_items"] == 5
    # tie_order: expected makes the table's values tie-aware, the run order's beside them
    files = [_score(tmp_path, s, "stat", QRELS, RUNS[s], "expected") for s in ("bm25", "dense")]
    md = _report(tmp_path, files, "e").md.read_text()
    assert f"| bm25 | {exp:.1f} (run order {run:.1f}) |" in md and "scored in tie-aware (`evaluation.tie_order: expected`)" in md


def test_a_domain_without_a_scorable_query_has_no_number(tmp_path):
    files = [_score(tmp_path, s, d, QRELS if d == "stat" else {}, RUNS[s]) for s in ("bm25", "dense") for d in ("stat", "calc")]
    m = json.loads(open(files[1][0]).read())
    assert m["measures"] == {"nDCG@10": None, "MAP": None} and m["queries"] == 0
    assert m["unscored"] == f"no scorable query: {tmp_path / 'qrels-calc.txt'} judges no query"
    assert open(files[1][1]).read() == "qid\tmeasure\tvalue\n"
    out = _report(tmp_path, files)
    md = out.md.read_text()
    print(md)
    main = md.split("## os", 1)[1].split("\n\n")[1]
    assert re.search(r"^\| bm25 \| [\d.]+ \(tie-aware [\d.]+\) \| – \| – \|$", main, re.M)
    assert re.search(r"^\| dense \| \*\*[\d.]+\*\* \| – \| – \|$", main, re.M)
    assert "**–**" not in md and "0.0" not in main
    assert "– = no number: bm25 on calc, dense on calc: no scorable query: " in md
    assert "| bm25 | 5 | – | – |" in md  # nor a count of tied items
    notes = [plain_text(n) for n in parse_tables(md)[0].notes]  # the HTML report and LaTeX keep the note with its table
    assert [n[0] for n in notes] == ["†", "–"]
    # no interval and no test for those cells, or for the Avg. over them
    sig = json.loads(out.significance.read_text())["datasets"]["os"]["cells"]
    assert sig["dense"]["calc"]["mean"] is None and sig["dense"]["Avg."]["p"] is None and sig["dense"]["stat"]["mean"] is not None
    metrics = json.loads(out.metrics.read_text())
    assert metrics["task4"]["os"]["bm25"]["calc"] is None and metrics["task4"]["os"]["bm25"]["Avg."] is None
    assert metrics["unscored"]["os"]["bm25"]["calc"] == m["unscored"]
    # the reproduction check says why instead of matching nothing
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"defaults": {"benchmark": "regression", "dataset": "os", "measure": "nDCG@10",
                                                "tolerance": 0.1, "source": "fixture"},
                                   "entries": [{"task": "task4", "system": "bm25", "domain": d, "value": 1.0} for d in ("calc", "Avg.")]}))
    frame = E.check(E.load_expected([exp]), E.observations_from_task_metrics(out.metrics), {"bm25": None}, {"os": None}, {"task4"})
    assert frame["status"].tolist() == ["not run", "not run"]
    assert frame["note"].tolist() == [f"no number: {m['unscored']}", "no number: a domain has no number (calc)"]
    assert all(o.unscored is None for o in E.observations_from_task_metrics(out.metrics) if o.domain == "stat")
    # the forest plot leaves the cells out (MLflow: test_table_significance.test_track_logs_intervals_and_p_values)
    assert write_forest(out.significance, out.csv, tmp_path / "f.svg") == 2  # stat only, for both systems


def test_only_label_0_judgments_are_not_scorable(tmp_path):
    mj, _ = _score(tmp_path, "bm25", "stat", {"q1": {"a": 0, "b": 0}}, RUNS["bm25"])
    assert json.loads(open(mj).read())["unscored"].endswith("has a relevant item (all 1 have only label 0)")


@pytest.mark.parametrize("task", ["task1", "task2", "task3", "task4"])
def test_protocol_captions_say_what_the_registry_removes(task):
    spec = TASKS[task]
    for protocol in ("official", "strict"):
        for labels in ("paper", "official"):
            text = protocol_caption(task, protocol, labels)
            files = spec.excluded_files(protocol, labels)
            assert ("removed from each query's ranking" in text) == bool(files) and ("nothing removed" in text) == (not files)
            assert ("image is annotated negative" in text) == (spec.excluded_always in files)
            assert ("negative_ids documents" in text or "its negative_ids" in text) == (spec.excluded in files)
    assert protocol_caption("task3", "official") == ("Protocol: **official** (nothing removed; under either protocol: the released "
                                                      "code's exclusions are the query's negative_ids, document ids, which never "
                                                      "match an image).")
    assert "task4 labels: paper" in protocol_caption("task4", "strict") and "task4 labels" not in protocol_caption("task2", "strict")


def test_tied_items_avg_is_the_mean_over_the_domains(tmp_path):
    """Issue 38 item 8: the Avg. column of the tied items is the mean over the domains, as every Avg. (it was a sum)."""
    files = [_score(tmp_path, "bm25", "stat", QRELS, RUNS["bm25"]), _score(tmp_path, "bm25", "calc", QRELS, RUNS["dense"]),
             _score(tmp_path, "dense", "stat", QRELS, RUNS["dense"]), _score(tmp_path, "dense", "calc", QRELS, RUNS["dense"])]
    out = _report(tmp_path, files)
    md = out.md.read_text()
    assert "| bm25 | 5 | 0 | 2.5 |" in md and "Avg.: the mean over the domains, tied items per domain" in md
    csv = pd.read_csv(out.csv).set_index("system")
    assert csv.at["bm25", "Avg. tied_items"] == 2.5 and csv.at["bm25", "stat tied_items"] == 5
