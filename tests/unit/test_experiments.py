"""The pieces of DVC experiments and a shared MLflow that need no server: the committed metrics summary of a task
table, where MLflow artifacts go, the fast failure of a tracking server that is down, runs kept per DVC experiment,
and the DVC setup of a project. The servers themselves: tests/integration/test_experiments.py."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import time

import pytest

from mmir.core.io import write_json
from mmir.reporting.experiment_metrics import write_experiment_metrics
from mmir.reporting.tables import TableFiles, TableStatistics, collect, write_task_table


def _metric(tmp, ds, dom, sys_, ndcg):
    p = tmp / f"{ds}-{dom}-{sys_}.json"
    write_json(p, {"dataset": ds, "domain": dom, "system": sys_, "task": "task1", "queries": 4,
                   "queries_without_results": 0, "run_queries_without_qrels": 0, "measures": {"nDCG@10": ndcg}})
    return p


def test_summary_holds_every_table_cell_with_its_interval(tmp_path):
    """metrics/<task>.json: the table's values (×100) with the significance JSON's interval of the same cell,
    Avg. under ``avg``; a system with a row label (untrained) is found under its plain name."""
    files = [_metric(tmp_path, "os", "stat", "bm25", 0.2), _metric(tmp_path, "os", "calc", "bm25", 0.1),
             _metric(tmp_path, "os", "stat", "clip", 0.3), _metric(tmp_path, "os", "calc", "clip", None)]
    long = collect(files)
    long["system"] = long["system"].replace({"clip": "clip (untrained)"})
    met, sig = tmp_path / "t.metrics.json", tmp_path / "t.significance.json"
    write_task_table(long, "task1", "nDCG@10", "official", TableFiles(tmp_path / "t.md", tmp_path / "t.csv", met),
                     statistics=TableStatistics(labels={"clip": "clip (untrained)"}))
    write_json(sig, {"labels": {"clip": "clip (untrained)"}, "datasets": {"os": {"cells": {
        "bm25": {"stat": {"mean": 20.0, "ci_low": 12.5, "ci_high": 27.25}, "Avg.": {"mean": 15.0, "ci_low": 9.0, "ci_high": 21.0}},
        "clip (untrained)": {"stat": {"mean": 30.0, "ci_low": None, "ci_high": None}}}}}})
    out, forest = tmp_path / "metrics" / "task1.json", tmp_path / "metrics" / "task1_forest.csv"
    assert write_experiment_metrics("task1", met, sig, out, forest) == 6
    doc = json.loads(out.read_text())["task1"]["os"]
    assert doc["stat"]["bm25"] == {"nDCG@10": 20.0, "ci_low": 12.5, "ci_high": 27.25}
    assert doc["avg"]["bm25"] == {"nDCG@10": 15.0, "ci_low": 9.0, "ci_high": 21.0}
    assert doc["calc"]["bm25"] == {"nDCG@10": 10.0}  # no interval in the significance JSON: the value alone
    assert doc["stat"]["clip"] == {"nDCG@10": 30.0} and doc["calc"]["clip"] == {"nDCG@10": None}
    rows = list(csv.DictReader(forest.open()))
    assert {r["cell"] for r in rows} == {f"os/{d}/{s}" for d in ("stat", "calc", "avg") for s in ("bm25", "clip")}
    stat = next(r for r in rows if r["cell"] == "os/stat/bm25")
    assert (stat["measure"], stat["value"], stat["ci_low"], stat["ci_high"]) == ("nDCG@10", "20.0", "12.5", "27.25")
    write_experiment_metrics("task1", met, None, out, forest)  # no significance file: values only
    assert json.loads(out.read_text())["task1"]["os"]["stat"]["bm25"] == {"nDCG@10": 20.0}


def test_artifacts_go_to_the_server_for_a_server_and_to_mlartifacts_for_a_local_store(tmp_path):
    from mmir.tracking import artifact_location

    assert artifact_location("http://mlflow.example.org:5000", tmp_path) is None
    assert artifact_location("https://mlflow.example.org", tmp_path) is None
    assert artifact_location(f"sqlite:///{tmp_path / 'm.db'}", tmp_path) == (tmp_path / "mlartifacts").as_uri()
    assert artifact_location(str(tmp_path / "mlruns"), tmp_path) == (tmp_path / "mlartifacts").as_uri()


def test_a_server_that_is_down_fails_at_once_with_one_line_and_logs_nothing(tmp_path, monkeypatch):
    """Nothing listens on the port: ``log_units`` raises TrackingError within seconds (MLflow's client alone retries
    for minutes), its message one line naming the redacted URI; no run anywhere."""
    from mmir.tracking import TrackingError, log_units

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://user:pw@127.0.0.1:{port}")
    t0 = time.time()
    with pytest.raises(TrackingError) as err:
        log_units({"mlflow": {"experiment": "s"}}, "report", {}, [{"name": "u", "metrics": {"m": 1.0}}], tmp_path)
    assert time.time() - t0 < 15
    msg = str(err.value)
    assert "\n" not in msg and f"http://user:***@127.0.0.1:{port} is not reachable" in msg and "pw" not in msg
    assert "run it again" in msg


def test_each_dvc_experiment_keeps_its_own_current_runs(tmp_path, monkeypatch):
    """Under ``dvc exp run`` (DVC_EXP_NAME set) two experiments' runs of the same unit are both current, named and
    tagged by experiment; a rerun of one logs nothing; outside DVC the plain unit is a third."""
    import mlflow
    from mlflow.entities import ViewType

    from mmir.tracking import log_units

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    cfg = {"mlflow": {"experiment": "s"}}
    ids = {}
    for name, k1 in (("exp-a", "0.9"), ("exp-b", "1.2"), ("exp-a", "0.9")):
        monkeypatch.setenv("DVC_EXP_NAME", name)
        monkeypatch.setenv("DVC_EXP_BASELINE_REV", "abc123")
        ids.setdefault(name, []).append(log_units(cfg, "rag", {"k1": k1}, [{"name": "u", "metrics": {"m": float(k1)}}], tmp_path))
    assert ids["exp-a"][0] == ids["exp-a"][1] != ids["exp-b"][0]
    monkeypatch.delenv("DVC_EXP_NAME")
    plain = log_units(cfg, "rag", {"k1": "0.9"}, [{"name": "u", "metrics": {"m": 0.9}}], tmp_path)
    runs = mlflow.search_runs(experiment_names=["s"], run_view_type=ViewType.ACTIVE_ONLY)
    parents = runs[runs["tags.mmir.level"] == "invocation"]
    assert sorted(parents["tags.mlflow.runName"]) == ["rag", "rag@exp-a", "rag@exp-b"]
    by_name = parents.set_index("tags.mlflow.runName")
    assert by_name.loc["rag@exp-a", "params.k1"] == "0.9" and by_name.loc["rag@exp-b", "params.k1"] == "1.2"
    assert by_name.loc["rag@exp-b", "tags.mmir.dvc_exp"] == "exp-b" and by_name.loc["rag@exp-b", "tags.mmir.dvc_baseline"] == "abc123"
    assert by_name.loc["rag", "run_id"] == plain["parent"]
    assert len(runs) == 6 and len(mlflow.search_runs(experiment_names=["s"], run_view_type=ViewType.DELETED_ONLY)) == 0


def test_setup_dvc_writes_the_remote_and_no_credential(tmp_path, monkeypatch):
    from mmir.workflow.experiments import setup_dvc

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "never-in-a-file")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    ran = setup_dvc(tmp_path, remote="s3://bucket/mmir", endpoint_url="http://127.0.0.1:9000")
    assert ran[0] == ["dvc", "init", "-q"]
    config = (tmp_path / ".dvc" / "config").read_text()
    assert "autostage = true" in config and "remote = storage" in config
    assert "url = s3://bucket/mmir" in config and "endpointurl = http://127.0.0.1:9000" in config
    assert not any("never-in-a-file" in f.read_text(errors="ignore") for f in (tmp_path / ".dvc").rglob("*") if f.is_file())
    assert setup_dvc(tmp_path)[0] == ["dvc", "config", "core.autostage", "true"]  # again: no second init


def test_restore_mtimes_gives_checked_out_outputs_their_recorded_order(tmp_path):
    """A real two-rule Snakemake run; its files then get times in the wrong order (as a DVC checkout may write them):
    Snakemake would rerun a job; after :func:`restore_mtimes` it has nothing to do, the times in the records' order."""
    import os
    import sys
    from pathlib import Path

    from mmir.workflow.experiments import restore_mtimes

    snakemake = str(Path(sys.executable).parent / "snakemake")
    (tmp_path / "in.txt").write_text("x" * 2_000_000)  # over 1 MB: Snakemake keeps no checksum, the times decide
    (tmp_path / "Snakefile").write_text('rule all:\n    input: "b.txt"\n\nrule a:\n    input: "in.txt"\n    output: "a.txt"\n'
                                        '    shell: "cp {input} {output}"\n\nrule b:\n    input: "a.txt"\n    output: "b.txt"\n'
                                        '    shell: "cp {input} {output}"\n')
    def dry():
        return subprocess.run([snakemake, "-n", "--cores", "1"], cwd=tmp_path, capture_output=True, text=True).stdout

    subprocess.run([snakemake, "--cores", "1", "-q"], cwd=tmp_path, check=True, capture_output=True)
    now = time.time()
    os.utime(tmp_path / "in.txt", (now - 100, now - 100))
    os.utime(tmp_path / "b.txt", (now - 50, now - 50))
    os.utime(tmp_path / "a.txt", (now, now))  # a.txt written after b.txt
    assert "Nothing to be done" not in dry()
    assert restore_mtimes(tmp_path) == (2, 0)
    assert os.stat(tmp_path / "a.txt").st_mtime < os.stat(tmp_path / "b.txt").st_mtime  # the jobs' order
    assert "Nothing to be done" in dry()


def test_restore_mtimes_puts_outputs_after_a_workflow_installed_later(tmp_path):
    """Another machine: the workflow's script (mmir installed there) and the data are newer than the pulled records'
    end times; Snakemake compares a script job's outputs with its script's time, and big inputs by time alone. After
    :func:`restore_mtimes` the outputs keep the jobs' order and are newer than both: nothing to do."""
    import os
    import sys
    from pathlib import Path

    from mmir.workflow.experiments import restore_mtimes

    snakemake = str(Path(sys.executable).parent / "snakemake")
    (tmp_path / "in.txt").write_text("x" * 2_000_000)
    (tmp_path / "copy.py").write_text("import shutil\nshutil.copy(snakemake.input[0], snakemake.output[0])\n")
    (tmp_path / "Snakefile").write_text('rule all:\n    input: "b.txt"\n\nrule a:\n    input: "in.txt"\n    output: "a.txt"\n'
                                        '    script: "copy.py"\n\nrule b:\n    input: "a.txt"\n    output: "b.txt"\n'
                                        '    script: "copy.py"\n')
    subprocess.run([snakemake, "--cores", "1", "-q"], cwd=tmp_path, check=True, capture_output=True)
    later = time.time()  # the script and the data as the other machine has them: written after the run
    for f in ("copy.py", "in.txt"):
        os.utime(tmp_path / f, (later, later))
    dry = subprocess.run([snakemake, "-n", "--cores", "1"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "Nothing to be done" not in dry
    assert restore_mtimes(tmp_path) == (2, 0)
    a, b = (os.stat(tmp_path / f).st_mtime for f in ("a.txt", "b.txt"))
    assert later < a < b <= time.time()
    dry = subprocess.run([snakemake, "-n", "--cores", "1"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "Nothing to be done" in dry, dry


def test_every_command_of_the_experiments_page_is_run_by_a_test():
    """Each ``dvc …`` and ``python -m mmir.workflow.experiments …`` command of docs/experiments.md is one that
    tests/integration/test_experiments.py runs (directly, or through :func:`mmir.workflow.experiments.setup_dvc`)."""
    import re

    from conftest import PROJECT

    doc = (PROJECT / "docs" / "experiments.md").read_text(encoding="utf-8")
    ran = (PROJECT / "tests" / "integration" / "test_experiments.py").read_text(encoding="utf-8") + \
        (PROJECT / "src" / "mmir" / "workflow" / "experiments.py").read_text(encoding="utf-8")
    seen = []
    for block in re.findall(r"```bash\n(.*?)```", doc, re.S):
        for line in block.splitlines():
            words = line.split("#")[0].split()
            if words[:1] == ["dvc"]:
                sub = [w for w in words[1:3] if not w.startswith("-")][: 2 if words[1] in ("exp", "queue", "metrics", "params",
                                                                                        "plots", "remote") else 1]
                needle = ", ".join(f'"{w}"' for w in sub)
            elif words[:3] == ["python", "-m", "mmir.workflow.experiments"]:
                needle = '"after-pull"' if words[3] == "after-pull" else "setup_dvc("
            else:
                continue
            seen.append(needle)
            assert needle in ran, f"docs/experiments.md: `{line.strip()}` is run by no test ({needle})"
    assert len(seen) >= 15
