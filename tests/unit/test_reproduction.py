"""The expected-score check (mmir.evaluation.expected) and the reproduction table, on fixture table files."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from mmir.core.io import write_json
from mmir.core.paths import PIPELINE
from mmir.evaluation import expected as E
from mmir.workflow.reproduction import reproduction_step


def _expected_file(tmp, entries, defaults=None, name="exp.yaml"):
    p = tmp / name
    p.write_text(yaml.safe_dump({"defaults": defaults or {}, "entries": entries}))
    return p


REG = {"benchmark": "regression", "dataset": "os", "domain": "Avg.", "measure": "nDCG@10", "tolerance": 0.1,
       "domains": ["stat", "calc"], "source": "fixture"}


def _metrics(tmp, task="task1", cells=None):
    cells = cells or {"bm25": {"stat": 20.0, "calc": 10.0, "Avg.": 15.0},
                      "dense": {"stat": 30.0, "calc": 5.0, "Avg.": 17.5},
                      "clip-untrained (untrained)": {"stat": 1.0, "calc": 3.0, "Avg.": 2.0}}
    p = tmp / f"{task}.metrics.json"
    write_json(p, {"measure": "nDCG@10", "protocol": "official", task: {"os": cells}})
    return p


def test_statuses_ok_okish_fail_and_not_run(tmp_path):
    exp = _expected_file(tmp_path, [
        {"task": "task1", "system": "bm25", "value": 15.05},                  # |diff| 0.05 <= 0.1: OK
        {"task": "task1", "system": "dense", "value": 17.35},                 # 0.15 <= 0.2: OKish
        {"task": "task1", "system": "bm25", "domain": "stat", "value": 21.0, "domains": None},  # 1.0: FAIL
        {"task": "task1", "system": "clip-untrained", "value": 2.0},          # label (untrained) removed: OK
        {"task": "task1", "system": "e5-small", "value": 9.0},                # not in the run
        {"task": "task2", "system": "bm25", "value": 9.0},                    # task not run
        {"task": "task1", "system": "bm25", "value": 15.0, "dataset": "vaswani"},  # dataset not in the run
        {"task": "task1", "system": "bm25", "value": 15.0, "domains": ["stat", "calc", "prob"]},  # other domain set
        {"task": "task1", "system": "bm25", "value": 15.0, "measure": "MAP"},  # measure not in the tables
    ], REG)
    entries = E.load_expected([exp])
    obs = E.observations_from_task_metrics(_metrics(tmp_path))
    frame = E.check(entries, obs, {"bm25": None, "dense": None, "clip-untrained": None}, {"os": None}, {"task1"})
    print(frame[["task", "system", "domain", "expected", "observed", "status", "note"]].to_string())
    assert frame["status"].tolist() == ["OK", "OKish", "FAIL", "OK", "not run", "not run", "not run", "not run", "not run"]
    assert frame["diff"].iloc[0] == pytest.approx(-0.05) and frame["run_system"].iloc[3] == "clip-untrained"
    notes = frame["note"].tolist()
    assert notes[4] == "system e5-small not in this run" and notes[5] == "task2 not run"
    assert notes[6] == "dataset vaswani not in this run" and notes[7] == "Avg. over 2 domains (2 of the expected 3)"
    assert notes[8].startswith("MAP not measured")
    assert E.summary(frame) == {"OK": 2, "OKish": 1, "FAIL": 1, "not run": 5}
    assert E.classify(0.1, 0.1) == "OK" and E.classify(-0.2, 0.1) == "OKish" and E.classify(0.2001, 0.1) == "FAIL"


def test_matching_by_preset_and_repo_id(tmp_path):
    """A paper entry names a preset; any run system with that preset matches (one row each), on any dataset whose
    repo_id is MM-BRIGHT's, and only when the Avg. covers the 29 domains."""
    entries = [e for e in E.load_expected([PIPELINE / "expected" / "mm-bright-paper.yaml"]) if e.task == "task1"]
    assert {e.system for e in entries} == {"bm25", "contriever", "diver", "e5-mistral", "gritlm", "openai", "gte-qwen2",
                                           "rader", "reasonir", "sfr"}
    from mmir.data.domains import MM_BRIGHT_DOMAINS

    full = {d: 25.0 for d in MM_BRIGHT_DOMAINS} | {"Avg.": 25.0}
    obs = E.observations_from_task_metrics(_metrics(tmp_path, cells={"e5": full, "e5-local": full, "mine": full}))
    presets = {"e5": "e5-mistral", "e5-local": "e5-mistral", "mine": None}
    frame = E.check(entries, [E.Observation(**{**o.__dict__, "dataset": "hub"}) for o in obs], presets,
                    {"hub": "mm-bright/MM-BRIGHT"}, {"task1"})
    e5 = frame[frame["system"] == "e5-mistral"]
    assert e5["run_system"].tolist() == ["e5", "e5-local"] and set(e5["status"]) == {"OK"}  # 25.0 vs 25.3
    assert (frame[frame["system"] == "bm25"]["status"] == "not run").all()  # `mine` has no preset and another name
    # two domains of the hub dataset: not comparable with the published 29-domain mean
    two = {"biology": 20.0, "earthscience": 30.0, "Avg.": 25.0}
    obs = E.observations_from_task_metrics(_metrics(tmp_path, cells={"e5": two}))
    frame = E.check(entries, [E.Observation(**{**o.__dict__, "dataset": "hub"}) for o in obs], {"e5": "e5-mistral"},
                    {"hub": "mm-bright/MM-BRIGHT"}, {"task1"})
    row = frame[frame["system"] == "e5-mistral"].iloc[0]
    assert row["status"] == "not run" and row["note"] == "Avg. over 2 domains (2 of the expected 29)"


def test_rag_and_ablation_observations(tmp_path):
    rag = tmp_path / "rag.csv"
    pd.DataFrame([
        {"dataset": "hub", "setting": s, "domain": d, "score": v, "avg": a, "gap_to_oracle": a - 67.0}
        for s, a in (("oracle", 67.0), ("topk:e5", 60.0), ("topk:bm25", 55.0)) for d, v in (("biology", a), ("law", a))
    ]).to_csv(rag, index=False)
    abl = tmp_path / "caption_ablation.csv"
    pd.DataFrame([{"dataset": "hub", "system": "e5", "variant": "ocr", "value": 31.0, "plain": 25.0, "delta": 6.0}]
                 ).to_csv(abl, index=False)
    obs = E.observations_from_rag_csv(rag) + E.observations_from_ablation_csv(abl, "caption", "nDCG@10")
    best = [o for o in obs if o.system == "best-topk" and o.measure == "gap_to_oracle"]
    assert len(best) == 1 and best[0].value == pytest.approx(-7.0) and best[0].variant == "topk:e5"
    entries = [e for e in E.load_expected([PIPELINE / "expected" / "mm-bright-paper.yaml"])
               if e.task in ("rag", "caption_ablation")]
    entries = [E.Expected(**{**e.__dict__, "domains": ("biology", "law")}) for e in entries]
    frame = E.check(entries, obs, {"e5": "e5-mistral", "bm25": None}, {"hub": "mm-bright/MM-BRIGHT"}, {"rag", "caption_ablation"})
    got = {(r.task, r.system): (r.status, r.observed) for r in frame.itertuples()}
    print(frame[["task", "system", "run_system", "expected", "observed", "status", "note"]].to_string())
    assert got[("rag", "oracle")] == ("OK", 67.0)                 # 67.0 vs 67.17, tolerance 3
    assert got[("rag", "best-topk")] == ("OK", -7.0)              # gap -7.0 vs -6.46
    assert got[("caption_ablation", "e5-mistral")] == ("OK", 31.0)  # 31.0 vs 32.7, tolerance 2
    assert got[("caption_ablation", "diver")][0] == "not run"
    note = frame[(frame.task == "caption_ablation") & (frame.system == "e5-mistral")]["note"].iloc[0]
    assert note == "domain coverage not checked"


def test_bad_expected_files_name_file_and_entry(tmp_path):
    with pytest.raises(ValueError, match=r"entries\[0\]: missing source"):
        E.load_expected([_expected_file(tmp_path, [{"task": "task1", "system": "x", "value": 1}], {**REG, "source": None})])
    with pytest.raises(ValueError, match=r"entries\[1\]: tolerance must be > 0"):
        E.load_expected([_expected_file(tmp_path, [{"task": "task1", "system": "x", "value": 1},
                                                   {"task": "task1", "system": "x", "value": 1, "tolerance": 0}], REG)])
    with pytest.raises(ValueError, match="unknown field"):
        E.load_expected([_expected_file(tmp_path, [{"task": "task1", "system": "x", "value": 1, "tol": 1}], REG)])
    with pytest.raises(ValueError, match="task 'task9'"):
        E.load_expected([_expected_file(tmp_path, [{"task": "task9", "system": "x", "value": 1}], REG)])


def test_the_shipped_files_load_and_the_step_writes_the_table(tmp_path):
    files = [PIPELINE / "expected" / "mm-bright-paper.yaml", PIPELINE / "expected" / "offline-regression.yaml"]
    entries = E.load_expected(files)
    paper = [e for e in entries if e.benchmark in ("mm-bright-paper", "mteb-port")]
    assert len(paper) == 33 and all(e.source for e in entries)  # 29 scores + the 4 quality-audit averages
    m = _metrics(tmp_path)
    cfg = {"expected": [str(f) for f in files], "presets": {"bm25": None, "dense": None}, "datasets": {"os": None},
           "samples": {"os": None},
           "measure": "nDCG@10", "mlflow": {"experiment": "t"}}
    counts = reproduction_step(cfg, files, [m], {}, None, tmp_path / "r.md", tmp_path / "r.csv")
    md = (tmp_path / "r.md").read_text()
    assert "# Reproduction check" in md and "## mm-bright-paper" in md and f"not run {counts['not run']}" in md
    csv = pd.read_csv(tmp_path / "r.csv")
    assert len(csv) >= len(entries) and csv.columns.tolist() == E.CHECK_COLUMNS


def test_fixture_metrics_regression_ok_then_a_changed_bm25_fails(tmp_path, monkeypatch):
    """The regression check on a fixture metrics file: the recorded values pass; a BM25 whose numbers moved (as a
    changed k1 does) turns exactly the BM25 rows FAIL; one MLflow metric per checked row and a status tag each."""
    import mlflow

    exp = _expected_file(tmp_path, [{"task": "task1", "system": s, "value": v, "domain": d,
                                     "domains": None if d != "Avg." else ["stat", "calc"]}
                                    for s, cells in (("bm25", {"stat": 20.0, "calc": 10.0, "Avg.": 15.0}),
                                                     ("dense", {"stat": 30.0, "calc": 5.0, "Avg.": 17.5}))
                                    for d, v in cells.items()], {k: v for k, v in REG.items() if k != "domains"})
    cfg = {"expected": [str(exp)], "presets": {"bm25": None, "dense": None}, "datasets": {"os": None},
           "samples": {"os": None},
           "measure": "nDCG@10", "mlflow": {"experiment": "t"}}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    ok = reproduction_step(cfg, [exp], [_metrics(tmp_path)], {}, None, tmp_path / "a.md", tmp_path / "a.csv",
                           tmp_path / "a.json")
    assert ok == {"OK": 6, "OKish": 0, "FAIL": 0, "not run": 0}
    moved = {"bm25": {"stat": 17.1, "calc": 8.0, "Avg.": 12.55}, "dense": {"stat": 30.0, "calc": 5.0, "Avg.": 17.5}}
    bad = reproduction_step(cfg, [exp], [_metrics(tmp_path, cells=moved)], {}, None, tmp_path / "b.md", tmp_path / "b.csv",
                            tmp_path / "b.json")
    frame = pd.read_csv(tmp_path / "b.csv")
    print(frame[["system", "domain", "expected", "observed", "diff", "status"]].to_string())
    assert bad["FAIL"] == 3 and set(frame[frame.system == "bm25"]["status"]) == {"FAIL"}
    assert set(frame[frame.system == "dense"]["status"]) == {"OK"}
    ids = json.loads((tmp_path / "b.json").read_text())
    run = mlflow.tracking.MlflowClient().get_run(ids["children"][0])
    assert run.data.metrics["regression/task1/os/bm25/Avg_/nDCG_at_10/diff"] == pytest.approx(-2.45)
    assert run.data.tags["regression/task1/os/bm25/Avg./nDCG_at_10/status"] == "FAIL" and run.data.metrics["checks_FAIL"] == 3


def test_a_value_only_matches_a_dataset_sampled_the_way_it_was_measured(tmp_path):
    """An entry without ``sample`` (a published value, a full-data regression value) is "not run" on a sampled
    dataset, and says how the run was sampled; an entry carrying the run's sample is checked."""
    sample = {"queries": 6, "corpus": "judged", "distractors": 40, "seed": 0}
    exp = _expected_file(tmp_path, [{"task": "task1", "system": "bm25", "value": 15.0},
                                    {"task": "task1", "system": "bm25", "value": 15.0, "sample": sample}], REG)
    obs = E.observations_from_task_metrics(_metrics(tmp_path))
    frame = E.check(E.load_expected([exp]), obs, {"bm25": None}, {"os": None}, {"task1"}, {"os": sample})
    assert frame["status"].tolist() == ["not run", "OK"]
    assert "os ran as a sample: first 6 queries per domain" in frame["note"].iloc[0]
    full = E.check(E.load_expected([exp]), obs, {"bm25": None}, {"os": None}, {"task1"}, {"os": None})
    assert full["status"].tolist() == ["OK", "not run"] and "ran in full" in full["note"].iloc[1]
    with pytest.raises(ValueError, match=r"entries\[0\]: sample must be a mapping"):
        E.load_expected([_expected_file(tmp_path, [{"task": "task1", "system": "x", "value": 1, "sample": 6}], REG)])


def test_frozen_values_check_ok_against_the_run_they_came_from(tmp_path):
    """``mmir expected`` (:func:`~mmir.evaluation.expected.freeze`): this run's numbers as an expected file, with
    the datasets' sample; checked against the same run every row is OK, against a moved BM25 its rows FAIL."""
    sample = {"queries": 6, "corpus": "judged", "distractors": 40, "seed": 0}
    obs = E.observations_from_task_metrics(_metrics(tmp_path))
    f = tmp_path / "frozen.yaml"
    f.write_text(yaml.safe_dump(E.freeze(obs, {"os": sample}, benchmark="reg", source="test", tolerance=0.1)))
    entries = E.load_expected([f])
    assert len(entries) == len(obs) == 9 and all(e.sample == E.Sample.from_config(sample) for e in entries)
    ok = E.check(entries, obs, {"bm25": None, "dense": None, "clip-untrained": None}, {"os": None}, {"task1"}, {"os": sample})
    assert set(ok["status"]) == {"OK"}
    moved = E.observations_from_task_metrics(_metrics(tmp_path, cells={"bm25": {"stat": 25.0, "calc": 10.0, "Avg.": 17.5}}))
    bad = E.check(entries, moved, {"bm25": None}, {"os": None}, {"task1"}, {"os": sample})
    bm25 = bad[bad["system"] == "bm25"].set_index("domain")["status"]
    assert bm25.to_dict() == {"stat": "FAIL", "calc": "OK", "Avg.": "FAIL"}
    assert set(bad[bad["system"] != "bm25"]["status"]) == {"not run"}
    with pytest.raises(ValueError, match="tolerance"):
        E.freeze(obs, {}, benchmark="reg", source="test", tolerance=0)
