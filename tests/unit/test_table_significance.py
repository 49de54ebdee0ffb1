"""Intervals and significance markers in the task and RAG tables, from per-query files (the report step as the
workflow runs it), and their MLflow metrics."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from mmir.core.io import write_json, write_parquet, write_text
from mmir.evaluation.significance import Settings
from mmir.reporting.rag import collect_rag, rag_statistics, write_rag_table
from mmir.workflow import steps


def _unit(tmp, ds, dom, system, values: list[float]):
    """A metrics JSON and its per-query TSV, as score_run writes them."""
    base = tmp / f"{ds}-{system}-{dom}"
    lines = ["qid\tmeasure\tvalue"] + [f"q{i}\tnDCG@10\t{v!r}" for i, v in enumerate(values)] + \
            [f"q{i}\tMAP\t{v / 2!r}" for i, v in enumerate(values)]
    write_text(f"{base}.perquery.tsv", "\n".join(lines) + "\n")
    write_json(f"{base}.json", {"dataset": ds, "domain": dom, "system": system, "task": "task1", "queries": len(values),
                                "queries_without_results": 0, "measures": {"nDCG@10": float(np.mean(values)),
                                                                           "MAP": float(np.mean(values)) / 2}})
    return f"{base}.json", f"{base}.perquery.tsv"


@pytest.fixture
def units(tmp_path):
    rng = np.random.default_rng(0)
    base = {"stat": rng.random(40), "calc": rng.random(25)}
    systems = {"bm25": base,
               "dense": {d: np.clip(v + 0.25, 0, 1) for d, v in base.items()},      # clearly better
               "noise": {d: np.clip(v + rng.normal(0, 0.02, v.size), 0, 1) for d, v in base.items()},  # the same
               "rand": {d: rng.random(v.size) for d, v in base.items()}}
    files = [_unit(tmp_path, "os", d, s, v.tolist()) for s, doms in systems.items() for d, v in doms.items()]
    return tmp_path, [m for m, _ in files], [p for _, p in files]


def test_markers_exactly_where_the_corrected_p_is_below_alpha(units):
    tmp, metrics, perquery = units
    out = {k: tmp / f"t.{k}" for k in ("md", "csv", "metrics.json", "significance.json")}
    steps.report("task1", metrics, "nDCG@10", "official", steps.TableFiles(out["md"], out["csv"], out["metrics.json"],
                 out["significance.json"]), untrained=["rand"], perquery_files=perquery, significance={"resamples": 2000, "seed": 3})
    md = out["md"].read_text()
    sig = json.loads(out["significance.json"].read_text())
    assert sig["settings"]["seed"] == 3 and sig["settings"]["test"] == "permutation" and sig["labels"] == {"rand": "rand (untrained)"}
    cells = sig["datasets"]["os"]["cells"]
    assert sig["datasets"]["os"]["baseline"] == "bm25" and sig["datasets"]["os"]["family_size"] == 3
    table = md.split("## os", 1)[1].split("\n\n", 2)[1]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table.splitlines()[2:]}
    marked = {(s, col) for s, cells_ in rows.items() for col, c in zip(["stat", "calc", "Avg."], cells_) if "†" in c}
    expected = {(s, col) for s, cols in cells.items() for col, c in cols.items() if c["p_adj"] is not None and c["p_adj"] < 0.05}
    print("marked cells:", sorted(marked))
    assert marked == expected and ("dense", "Avg.") in marked and not any(s == "noise" for s, _ in marked)
    assert all(c["significant"] == ((s, col) in marked) for s, cols in cells.items() for col, c in cols.items())
    # the footnote names test, correction, alpha, resamples, seed; the interval table holds every cell
    assert re.search(r"† = differs from the baseline \*\*bm25\*\* at α = 0.05: two-sided paired randomization test .*"
                     r"Holm-corrected over the 3 comparisons .* 2000 resamples .* seed 3", md)
    assert "95% confidence intervals (percentile bootstrap" in md and "| Δ Avg. | p | p (Holm) |" in md
    dense = cells["dense"]["Avg."]
    assert f"[{dense['ci_low']:.1f}, {dense['ci_high']:.1f}]" in md
    assert dense["ci_low"] <= dense["mean"] <= dense["ci_high"]
    # CSV: values as before, then baseline and per column the interval and tests (×100 like the values)
    csv = pd.read_csv(out["csv"])
    assert csv.columns[:7].tolist() == ["dataset", "system", "label", "baseline", "stat", "calc", "Avg."]
    # the system column holds the plain name (joins on it work), the label its own column
    assert csv["system"].tolist() == ["bm25", "dense", "noise", "rand"]
    assert csv["label"].fillna("").tolist() == ["", "", "", "untrained"]
    r = csv.set_index("system").loc["dense"]
    assert r["Avg. ci_low"] == pytest.approx(dense["ci_low"], abs=1e-4) and r["Avg. p_adj"] == pytest.approx(dense["p_adj"])
    assert bool(r["Avg. significant"]) and r["Avg."] == pytest.approx(dense["mean"], abs=1e-3)
    # the metrics JSON (dvc metrics) keeps its shape
    assert set(json.loads(out["metrics.json"].read_text())["task1"]["os"]["dense"]) == {"stat", "calc", "Avg."}


def test_bh_and_a_named_baseline(units):
    tmp, metrics, perquery = units
    out = {k: tmp / f"b.{k}" for k in ("md", "csv", "json", "sig")}
    steps.report("task1", metrics, "nDCG@10", "official", steps.TableFiles(out["md"], out["csv"], out["json"], out["sig"]),
                 perquery_files=perquery,
                 significance={"baseline": "dense", "correction": "bh", "test": "bootstrap", "resamples": 1000})
    md = out["md"].read_text()
    assert "baseline **dense**" in md and "Benjamini-Hochberg-corrected" in md and "paired bootstrap test" in md
    cells = json.loads(out["sig"].read_text())["datasets"]["os"]["cells"]
    assert cells["dense"]["Avg."]["p"] is None and cells["bm25"]["Avg."]["significant"]


def test_the_workflows_baseline_not_the_first_row_is_tested_against(units):
    """``baselines`` (mmir.workflow.units.table_baselines) names each dataset's baseline; with the config's null the
    first row would be bm25 here, so the row named is what every test is against, and the footnote names it."""
    tmp, metrics, perquery = units
    out = {k: tmp / f"w.{k}" for k in ("md", "csv", "json", "sig")}
    steps.report("task1", metrics, "nDCG@10", "official", steps.TableFiles(out["md"], out["csv"], out["json"], out["sig"]),
                 perquery_files=perquery, significance={"resamples": 500}, baselines={"os": "noise"})
    sig = json.loads(out["sig"].read_text())["datasets"]["os"]
    assert sig["baseline"] == "noise" and sig["cells"]["noise"]["Avg."]["p"] is None
    assert all(sig["cells"][s]["Avg."]["p"] is not None for s in ("bm25", "dense", "rand"))
    assert "baseline **noise**" in out["md"].read_text() and set(pd.read_csv(out["csv"])["baseline"]) == {"noise"}
    # the rows stay in the order of the metric files (the workflow's table order)
    assert pd.read_csv(out["csv"])["system"].tolist() == ["bm25", "dense", "noise", "rand"]


def test_without_per_query_files_the_table_is_unchanged(units):
    tmp, metrics, _ = units
    steps.report("task1", metrics, "nDCG@10", "official", steps.TableFiles(tmp / "p.md", tmp / "p.csv", tmp / "p.json"))
    assert "†" not in (tmp / "p.md").read_text()
    assert pd.read_csv(tmp / "p.csv").columns.tolist() == ["dataset", "system", "label", "stat", "calc", "Avg."]


def test_track_logs_intervals_and_p_values(units, tmp_path, monkeypatch):
    """The significance JSON reaches MLflow: each child its cell's interval and p-values, the parent the Avg. ones."""
    import mlflow

    tmp, metrics, perquery = units
    sig = tmp / "t.significance.json"
    steps.report("task1", metrics, "nDCG@10", "official", steps.TableFiles(tmp / "t.md", tmp / "t.csv", tmp / "t.json", sig),
                 perquery_files=perquery, significance={"resamples": 500})
    cells, parent = steps._significance_metrics(sig)
    assert set(cells[("os", "dense", "stat")]) == {"nDCG_at_10.ci_low", "nDCG_at_10.ci_high", "nDCG_at_10.diff",
                                                   "nDCG_at_10.p", "nDCG_at_10.p_adj"}
    assert "os.dense.Avg.nDCG_at_10.p_adj" in parent and "os.bm25.Avg.nDCG_at_10.ci_low" in parent
    from mmir.tracking import log_invocation

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    # and a domain without a scorable query (its qrels judge nothing): no measure logged, the reason as a tag
    write_text(tmp / "empty.qrels", "")
    write_text(tmp / "r.trec", "q0 Q0 d1 1 1.0 bm25\n")
    empty = steps.score(tmp / "r.trec", tmp / "empty.qrels", ["nDCG@10"], tmp / "e.json", tmp / "e.tsv",
                        {"task": "task1", "dataset": "os", "domain": "empty", "system": "dense"})
    entries = [{"dataset": "os", "domain": d, "system": "dense", "metrics_json": f, "run_file": None,
                "perquery": None, "params": {}, "tags": {}, "extra_metrics": cells.get(("os", "dense", d), {})}
               for d, f in (("stat", metrics[2]), ("empty", tmp / "e.json"))]
    ids = log_invocation({"evaluation": {"protocol": "official", "top_k": 10}, "mlflow": {"experiment": "t"}}, "task1",
                         entries, project_dir=tmp_path, parent_metrics=parent)
    client = mlflow.tracking.MlflowClient()
    assert client.get_run(ids["parent"]).data.metrics["os.dense.Avg.nDCG_at_10.p_adj"] == pytest.approx(
        parent["os.dense.Avg.nDCG_at_10.p_adj"])
    assert "nDCG_at_10.ci_low" in client.get_run(ids["children"][0]).data.metrics
    child = client.get_run(ids["children"][1]).data
    assert "nDCG_at_10" not in child.metrics and child.metrics["queries"] == 0
    assert child.tags["mmir.unscored"] == empty["unscored"] == f"no scorable query: {tmp / 'empty.qrels'} judges no query"


def test_rag_table_intervals_include_judge_repeats_and_markers(tmp_path):
    rng = np.random.default_rng(1)
    summaries, judgments = [], []
    for setting, shift in (("none", 0), ("oracle", 40), ("topk:bm25", 2)):
        for dom in ("stat", "calc"):
            d = tmp_path / setting.replace(":", "-") / dom
            rows = []
            for q in range(12):
                for rep in range(2):
                    score = float(np.clip(30 + shift + rng.normal(0, 8), 0, 100)) if (q, rep) != (0, 1) else None
                    rows.append({"qid": f"q{q}", "repeat": rep, "score": score, "status": "ok" if score is not None else "failed",
                                 "raw": ""})
            j = pd.DataFrame(rows)
            write_parquet(d / "judgments.parquet", j)
            per = j.dropna(subset=["score"]).groupby("qid")["score"].mean()
            write_json(d / "summary.json", {"dataset": "os", "domain": dom, "setting": setting, "score": float(per.mean()),
                                            "queries": 12, "answers_scored": 12, "judge_failures": 1,
                                            "agreement": {"within_tolerance": 0.5}})
            summaries.append(str(d / "summary.json"))
            judgments.append(str(d / "judgments.parquet"))
    settings = Settings(resamples=2000, baseline="bm25")
    stats = rag_statistics(summaries, judgments, settings)
    st = stats["os"]
    assert set(st["baseline"]) == {"topk:bm25"}  # a system name means its topk setting
    write_rag_table(collect_rag(summaries), "g", "j", 2, tmp_path / "rag.md", tmp_path / "rag.csv", stats=stats, settings=settings)
    md = (tmp_path / "rag.md").read_text()
    print(md)
    assert "| Oracle | " in md and re.search(r"\| Oracle \| \d+\.\d† \(12/12\)", md)
    assert "two-level bootstrap (one judging per answer)" in md and "baseline **topk:bm25**" in md
    csv = pd.read_csv(tmp_path / "rag.csv")
    oracle = csv[(csv.setting == "oracle") & (csv.domain == "stat")].iloc[0]
    assert oracle["ci_low"] <= oracle["score"] <= oracle["ci_high"] and bool(oracle["avg_significant"])
    assert csv[csv.setting == "topk:bm25"]["p"].isna().all()
