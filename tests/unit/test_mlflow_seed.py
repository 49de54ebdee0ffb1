"""A new project's SQLite MLflow store starts as a copy of an empty store MLflow made once (mmir.tracking.seed_store):
the same schema as a store MLflow creates itself, its Default experiment where MLflow would put it, and usable."""

from __future__ import annotations

import sqlite3

import mlflow

from mmir.tracking import seed_store


def _schema(db) -> tuple:
    """The alembic revision, and each table's columns (name, type, not null, primary key) and index names. Not the
    CREATE text: two stores MLflow makes itself may order a table's constraints differently (hash seed)."""
    with sqlite3.connect(db) as con:
        names = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        cols = {n: sorted((c[1], c[2], c[3], c[5]) for c in con.execute(f"PRAGMA table_info('{n}')")) for n in names}
        indexes = sorted(n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'"))
        return con.execute("SELECT version_num FROM alembic_version").fetchall(), cols, indexes


def test_a_seeded_store_is_the_store_mlflow_makes(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    own = tmp_path / "own" / "mlflow.db"
    own.parent.mkdir()
    monkeypatch.chdir(own.parent)  # MLflow puts the Default experiment's artifacts under the working directory
    mlflow.MlflowClient(tracking_uri=f"sqlite:///{own}").search_experiments()

    project = tmp_path / "project"
    assert seed_store(f"sqlite:///{project / 'mlflow.db'}", cache)
    template = next(cache.glob("empty-*.db"))
    assert _schema(project / "mlflow.db") == _schema(own)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    default = client.get_experiment("0")
    assert default.name == "Default" and default.artifact_location == str(project.resolve() / "mlruns" / "0")
    exp = client.create_experiment("mmir", artifact_location=(project / "mlartifacts").as_uri())
    run = client.create_run(exp)
    client.log_metric(run.info.run_id, "ndcg_at_10", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {"ndcg_at_10": 0.5}

    # the next project copies the same template; an existing store and another backend are left alone
    made = template.stat().st_mtime_ns
    assert seed_store(f"sqlite:///{tmp_path / 'second' / 'mlflow.db'}", cache) and template.stat().st_mtime_ns == made
    assert mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'second' / 'mlflow.db'}").get_experiment("0").name == "Default"
    assert not seed_store(f"sqlite:///{project / 'mlflow.db'}", cache)
    assert not seed_store("http://127.0.0.1:5000", cache)
