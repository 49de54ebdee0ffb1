"""``python -m mmir.workflow.resume``: a lock a killed Snakemake left is removed (by ``snakemake --unlock``), one a live
Snakemake holds is not. The kills themselves: tests/integration/test_resume_after_kill.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from mmir.workflow import resume

SNAKEMAKE = Path(sys.executable).parent / "snakemake"


def test_the_working_directory_is_snakemakes():
    assert resume.workdir(["--cores", "1", "--directory", "/x/y", "t"]) == Path("/x/y")
    assert resume.workdir(["-d", "rel", "--cores", "1"]) == Path("rel")
    assert resume.workdir(["--directory=/z"]) == Path("/z")
    assert resume.workdir(["--cores", "1"]) == Path.cwd()


def _locked(tmp_path: Path) -> Path:
    (tmp_path / "Snakefile").write_text('rule all:\n    output: "a.txt"\n    shell: "echo a > {output}"\n')
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("a.txt\n")  # what Snakemake writes while it runs
    return locks


def test_a_live_snakemake_keeps_its_lock_and_a_dead_ones_lock_is_removed(tmp_path):
    locks = _locked(tmp_path)
    args = ["-s", str(tmp_path / "Snakefile"), "--directory", str(tmp_path), "--cores", "1"]
    # a process in that directory whose command line names snakemake (as a Snakemake or one of its script jobs)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "snakemake"], cwd=tmp_path)
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "snakemake"], cwd=tmp_path.parent)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not resume.live_processes(tmp_path):
            time.sleep(0.05)
        assert [pid for pid, _ in resume.live_processes(tmp_path)] == [live.pid]  # not the other directory's, not ours
        note = resume.clear_stale_lock(SNAKEMAKE, args)
        assert f"pid {live.pid}" in note and "left as it is" in note and (locks / "0.output.lock").exists()
        # no Snakemake runs: the process is a job its killed Snakemake left (it was called "a running Snakemake")
        assert "a job of a Snakemake that no longer runs is still running here" in note and "running Snakemake" not in note
    finally:
        for p in (live, elsewhere):
            p.kill()
            p.wait()
    refused = subprocess.run([str(SNAKEMAKE), *args], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "LockException" in refused.stderr  # the lock is one Snakemake honours
    note = resume.clear_stale_lock(SNAKEMAKE, args)
    assert note.startswith("removed the lock") and not list(locks.glob("*.lock"))
    assert resume.clear_stale_lock(SNAKEMAKE, args) is None  # nothing left to remove
    proc = subprocess.run([str(SNAKEMAKE), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "a.txt").read_text() == "a\n", proc.stderr[-2000:]


def test_a_live_snakemake_is_told_from_its_jobs(tmp_path):
    _locked(tmp_path)
    fake = tmp_path / "bin" / "snakemake"  # a process whose command line is Snakemake's: python .../bin/snakemake
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(120)\n")
    main = subprocess.Popen([sys.executable, str(fake), "--cores", "1"], cwd=tmp_path)
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", ".snakemake/scripts/x.py"], cwd=tmp_path)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and len(resume.live_processes(tmp_path)) < 2:
            time.sleep(0.05)
        note = resume.clear_stale_lock(SNAKEMAKE, ["--directory", str(tmp_path)])
        assert note.startswith(f"{tmp_path} is locked by a running Snakemake (pid {main.pid}: ")
    finally:
        for p in (main, job):
            p.kill()
            p.wait()
    assert resume.is_snakemake("/v/bin/python /v/bin/snakemake --cores 2") and resume.is_snakemake("snakemake -n")
    assert resume.is_snakemake("python -m snakemake all")
    assert not resume.is_snakemake("/v/bin/python /w/.snakemake/scripts/tmpab.step.py")


def test_without_a_lock_nothing_is_run(tmp_path):
    assert resume.clear_stale_lock("/nonexistent/snakemake", ["--directory", str(tmp_path)]) is None
