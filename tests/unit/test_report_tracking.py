import json

import pandas as pd
import pytest

from mmir.core.errors import ConfigError
from mmir.core.io import write_json
from mmir.reporting.tables import TableFiles, collect, write_task_table
from mmir.tracking import flatten, log_invocation, redact, tracking_uri


def _metric(tmp, ds, dom, sys_, ndcg, q=10):
    p = tmp / f"{ds}-{dom}-{sys_}.json"
    write_json(p, {"dataset": ds, "domain": dom, "system": sys_, "task": "task1", "queries": q,
                   "queries_without_results": 0, "run_queries_without_qrels": 0,
                   "measures": {"nDCG@10": ndcg, "MAP": ndcg / 2}})
    return p


def test_table_rows_systems_columns_domains_avg_best_bold(tmp_path):
    files = [_metric(tmp_path, "os", "stat", "bm25", 0.20), _metric(tmp_path, "os", "calc", "bm25", 0.10),
             _metric(tmp_path, "os", "stat", "dense", 0.30), _metric(tmp_path, "os", "calc", "dense", 0.05),
             _metric(tmp_path, "va", "va", "bm25", 0.40)]
    md, csv, met = tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "t.json"
    write_task_table(collect(files), "task1", "nDCG@10", "official", TableFiles(md, csv, met))
    text = md.read_text()
    assert "Protocol: **official**" in text and "## os" in text and "## va" in text
    assert "| bm25 | 20.0 | **10.0** | 15.0 |" in text
    assert "| dense | **30.0** | 5.0 | **17.5** |" in text
    df = pd.read_csv(csv)
    assert df.columns.tolist() == ["dataset", "system", "label", "stat", "calc", "va", "Avg."]
    assert df.loc[(df.dataset == "os") & (df.system == "dense"), "Avg."].item() == pytest.approx(17.5)
    m = json.loads(met.read_text())
    assert m["task1"]["os"]["bm25"] == {"stat": 20.0, "calc": 10.0, "Avg.": 15.0}


def test_flatten_and_redact():
    assert flatten({"a": {"b": 1, "c": [1, 2]}}) == {"a.b": "1", "a.c": "[1, 2]"}
    assert redact("https://user:s3cret@host/x") == "https://user:***@host/x"


def test_mlflow_parent_and_children_in_a_real_store(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-123")
    run_file = tmp_path / "r.trec"
    run_file.write_text("q 0 d 1 1.0 bm25\n")
    entries = [{"dataset": "os", "domain": d, "system": "bm25", "metrics_json": _metric(tmp_path, "os", d, "bm25", v),
                "run_file": run_file, "perquery": run_file,
                "params": {"system": {"k1": 0.9}}, "tags": {"dataset_revision": "local"}, "extra_metrics": {"seconds": 1.5}}
               for d, v in [("stat", 0.2), ("calc", 0.1)]]
    cfg = {"evaluation": {"protocol": "official", "top_k": 1000}, "mlflow": {"experiment": "t"}}
    prep = tmp_path / "data/prepared/os/stat"
    prep.mkdir(parents=True)
    (prep / "prepare.json").write_text('{"documents": 3}')
    monkeypatch.chdir(tmp_path)
    ids = log_invocation(cfg, "task1", entries, project_dir=tmp_path)
    client = mlflow.tracking.MlflowClient()
    parent = client.get_run(ids["parent"])
    assert parent.data.tags["mmir.level"] == "invocation"
    kids = [client.get_run(i) for i in ids["children"]]
    assert {k.data.tags["domain"] for k in kids} == {"stat", "calc"}
    for k in kids:
        assert k.data.tags["mlflow.parentRunId"] == ids["parent"]
        assert k.data.params["system.k1"] == "0.9" and k.data.metrics["seconds"] == 1.5
        assert json.loads(k.data.tags["wildcards"])["system"] == "bm25"
        assert {a.path for a in client.list_artifacts(k.info.run_id)} >= {"r.trec"}
    assert {k.data.tags["domain"]: k.data.metrics["nDCG_at_10"] for k in kids} == {"stat": 0.2, "calc": 0.1}
    # MLflow's own columns: the experiment opens on its runs (not GenAI traces), Source and Version are set, the
    # prepared domain is the run's dataset input (its prepare.json digest), a domain never prepared has none
    assert client.get_experiment_by_name("t").tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.tags["mlflow.source.name"] == "mmir task1" and "mlflow.source.git.commit" in parent.data.tags
    inputs = {k.data.tags["domain"]: [(d.dataset.name, d.dataset.source_type) for d in k.inputs.dataset_inputs] for k in kids}
    assert inputs == {"stat": [("os/stat", "local")], "calc": []}
    # no secret from the environment anywhere in params, tags or metrics
    blob = json.dumps([[r.data.params, r.data.tags, r.data.metrics] for r in [parent, *kids]])
    assert "SECRET" not in blob


def test_parallel_jobs_can_create_the_store_together(tmp_path):
    """Two track jobs starting at once on a fresh SQLite store (Snakemake runs them in parallel): both land."""
    import subprocess
    import sys

    metric = _metric(tmp_path, "os", "stat", "bm25", 0.2)
    code = (
        "import sys; from mmir.tracking import log_invocation; "
        f"e=[{{'dataset':'os','domain':'stat','system':'bm25','metrics_json':r'{metric}'}}]; "
        "log_invocation({'evaluation':{'protocol':'official','top_k':10},'mlflow':{}}, sys.argv[1], e, project_dir=sys.argv[2])"
    )
    env = {**__import__("os").environ}
    env.pop("MLFLOW_TRACKING_URI", None)
    procs = [subprocess.Popen([sys.executable, "-c", code, f"task{i}", str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (2, 3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    import sqlite3

    sql = "SELECT COUNT(*) FROM tags WHERE key='mmir.level' AND value='invocation'"
    n = sqlite3.connect(tmp_path / "mlflow.db").execute(sql).fetchone()[0]
    assert n == 2


# ------------------------------------------------------------------------------------------------ one run per unit
def _store(client, exp_name):
    """``(active runs, deleted runs)`` of an experiment, as ``{run name: [runs]}``."""
    from mlflow.entities import ViewType

    exp = client.get_experiment_by_name(exp_name).experiment_id
    out = []
    for view in (ViewType.ACTIVE_ONLY, ViewType.DELETED_ONLY):
        runs = {}
        for r in client.search_runs([exp], run_view_type=view, max_results=1000):
            runs.setdefault(r.info.run_name, []).append(r)
        out.append(runs)
    return out


def test_reruns_keep_one_current_run_per_unit_and_the_history(tmp_path, monkeypatch):
    """Three identical logs: one parent and one child per unit, the same ids. A recomputed unit (new metrics): still
    one active run per unit, the old parent and the old child deleted (restorable) and tagged with their successor,
    the unchanged child kept and moved under the new parent."""
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    cfg = {"evaluation": {"protocol": "official", "top_k": 1000}, "mlflow": {"experiment": "t"}}
    entries = [{"dataset": "os", "domain": d, "system": "bm25", "metrics_json": _metric(tmp_path, "os", d, "bm25", v),
                "params": {"system": {"k1": 0.9}}} for d, v in [("stat", 0.2), ("calc", 0.1)]]
    ids = [log_invocation(cfg, "task1", entries, project_dir=tmp_path) for _ in range(3)]
    assert ids[0] == ids[1] == ids[2]
    client = mlflow.tracking.MlflowClient()
    active, deleted = _store(client, "t")
    assert {n: len(r) for n, r in active.items()} == {"task1": 1, "task1/os/stat/bm25": 1, "task1/os/calc/bm25": 1}
    assert deleted == {}
    assert active["task1/os/stat/bm25"][0].data.tags["mmir.unit"] == "task1/task1/os/stat/bm25"

    _metric(tmp_path, "os", "stat", "bm25", 0.25)  # the stat unit is recomputed with another value
    new = log_invocation(cfg, "task1", entries, project_dir=tmp_path)
    assert new["parent"] != ids[0]["parent"]
    assert new["children"][1] == ids[0]["children"][1] and new["children"][0] != ids[0]["children"][0]
    active, deleted = _store(client, "t")
    assert {n: len(r) for n, r in active.items()} == {"task1": 1, "task1/os/stat/bm25": 1, "task1/os/calc/bm25": 1}
    assert {n: [r.info.run_id for r in rs] for n, rs in deleted.items()} == {
        "task1": [ids[0]["parent"]], "task1/os/stat/bm25": [ids[0]["children"][0]]}
    stat, calc = (client.get_run(i) for i in new["children"])
    assert stat.data.metrics["nDCG_at_10"] == 0.25 and stat.data.tags["mmir.supersedes"] == ids[0]["children"][0]
    assert calc.data.tags["mlflow.parentRunId"] == new["parent"] == stat.data.tags["mlflow.parentRunId"]
    old = client.get_run(ids[0]["children"][0])
    assert old.info.lifecycle_stage == "deleted" and old.data.tags["mmir.superseded_by"] == new["children"][0]
    assert client.get_run(ids[0]["parent"]).data.tags["mmir.superseded_by"] == new["parent"]
    client.restore_run(old.info.run_id)  # the history is reachable: the UI's "Deleted" list, and restore_run
    assert client.get_run(old.info.run_id).info.lifecycle_stage == "active"
    assert client.get_run(old.info.run_id).data.metrics["nDCG_at_10"] == 0.2
    client.delete_run(old.info.run_id)
    assert log_invocation(cfg, "task1", entries, project_dir=tmp_path) == new  # and a rerun now logs nothing again


def test_stage_parent_runs_are_not_repeated_by_plain_reruns(tmp_path, monkeypatch):
    """``log_units`` (the report, rag, m2rag, mmdr parents): three reruns, one parent; a changed artifact replaces."""
    import mlflow

    from mmir.tracking import log_units

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "index.html"
    page.write_text("<p>v1</p>")
    cfg = {"mlflow": {"experiment": "s"}}
    units = [{"name": "report/html", "tags": {"rule": "report_html"}, "metrics": {"tables": 3, "none": None},
              "artifacts": [str(page)]}]
    ids = [log_units(cfg, "report", {"tables": ["task1"]}, units, tmp_path) for _ in range(3)]
    assert ids[0] == ids[1] == ids[2]
    client = mlflow.tracking.MlflowClient()
    active, deleted = _store(client, "s")
    assert {n: len(r) for n, r in active.items()} == {"report": 1, "report/html": 1} and deleted == {}
    page.write_text("<p>v2</p>")
    new = log_units(cfg, "report", {"tables": ["task1"]}, units, tmp_path)
    active, deleted = _store(client, "s")
    assert {n: len(r) for n, r in active.items()} == {"report": 1, "report/html": 1}
    assert {n: len(r) for n, r in deleted.items()} == {"report": 1, "report/html": 1}
    assert active["report"][0].info.run_id == new["parent"] != ids[0]["parent"]


def test_a_log_that_failed_halfway_is_replaced_not_reused(tmp_path, monkeypatch):
    import mlflow

    from mmir.tracking import log_units

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    art = tmp_path / "a.txt"
    art.write_text("x")
    units = [{"name": "u", "metrics": {"m": 1.0}, "artifacts": [str(art)]}]
    real = mlflow.log_artifact
    monkeypatch.setattr(mlflow, "log_artifact", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        log_units({"mlflow": {"experiment": "f"}}, "rag", {}, units, tmp_path)
    monkeypatch.setattr(mlflow, "log_artifact", real)
    ids = log_units({"mlflow": {"experiment": "f"}}, "rag", {}, units, tmp_path)
    client = mlflow.tracking.MlflowClient()
    active, deleted = _store(client, "f")
    assert {n: [r.info.status for r in rs] for n, rs in active.items()} == {"rag": ["FINISHED"], "u": ["FINISHED"]}
    assert {n: [r.info.status for r in rs] for n, rs in deleted.items()} == {"rag": ["FAILED"], "u": ["FAILED"]}
    assert [r.info.run_id for r in active["u"]] == ids["children"]


def test_tracking_uri_reads_the_typed_mlflow_section(monkeypatch, tmp_path):
    """The store: MLFLOW_TRACKING_URI, else ``mlflow.tracking_uri`` (a step's own keys beside it are not checked), else
    the project's SQLite file; a misspelt mlflow key is a config error naming it."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri({"mlflow": {"tracking_uri": "http://h:5000"}, "untrained": ["clip"]}) == "http://h:5000"
    assert tracking_uri({"mlflow": {"tracking_uri": None}}, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert tracking_uri({}, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    with pytest.raises(ConfigError, match="mlflow.tracking_url"):
        tracking_uri({"mlflow": {"tracking_url": "http://h:5000"}})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///env.db")
    assert tracking_uri({"mlflow": {"tracking_uri": "http://h:5000"}}) == "sqlite:///env.db"
