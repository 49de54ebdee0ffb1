"""Run the workflow shipped in the package (:data:`mmir.core.paths.PIPELINE`) on a project, first removing the lock a
killed Snakemake left: ``mmir run [SNAKEMAKE ARGS]`` in the project directory, or ``python -m mmir.workflow.resume
[SNAKEMAKE ARGS]`` (``make run`` and ``make reproduce`` run the first; ``mmir snakemake`` does the same check).

The command is ``python -m snakemake -s <package>/pipeline/Snakefile --cores all [SNAKEMAKE ARGS]`` (``-s`` and
``--cores`` only when the arguments give none): Snakemake reads the project's ``params.yaml`` and the workflow profile
``profiles/default`` (the project's own when it has one, else the package's), and writes everything under the working
directory. ``--profile NAME`` names one of the package's profiles (``slurm``, ``local-cluster``) unless ``NAME`` is a
folder here.

Snakemake killed with its jobs (``kill -9``, an out-of-memory kill, a lost node) leaves two things behind: its lock on
the working directory, and the outputs of the jobs it was running marked incomplete. The workflow profile
(``profiles/default``: ``rerun-incomplete``) reruns the second; this removes the first (``snakemake --unlock`` with the
same arguments) when, and only when, no process on this machine runs Snakemake or one of its jobs in that directory.
A live run keeps its lock, and Snakemake refuses to start as usual. Processes on other machines are invisible here: on
a shared filesystem, run this only where the workflow was running.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mmir.core.errors import MmirError
from mmir.core.paths import PIPELINE

#: Snakemake as this interpreter runs it (a venv that reuses another's packages has no snakemake script of its own)
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

#: where Snakemake's default (file) persistence keeps the locks of a working directory
LOCKS = Path(".snakemake") / "locks"


def workdir(args: list[str]) -> Path:
    """The working directory Snakemake will use with ``args``: ``--directory`` / ``-d``, else the current one."""
    for i, a in enumerate(args):
        if a in ("--directory", "-d") and i + 1 < len(args):
            return Path(args[i + 1])
        if a.startswith("--directory="):
            return Path(a.partition("=")[2])
    return Path.cwd()


def _ancestors() -> set[int]:
    """This process and its parents (a wrapper's own command line may name snakemake)."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        pid = int(next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), 0))
    return out


def live_processes(directory: str | os.PathLike) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes on this machine (this one and its parents excepted) whose working
    directory is ``directory`` and whose command line names snakemake: Snakemake itself, or a job it started (a script
    job runs ``.snakemake/scripts/...``). Processes this user may not inspect are not seen."""
    target, mine = os.path.realpath(directory), _ancestors()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if os.path.realpath(os.readlink(entry / "cwd")) != target:
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone, a zombie, or another user's
            continue
        if "snakemake" in cmd:
            out.append((int(entry.name), cmd))
    return out


def is_snakemake(cmd: str) -> bool:
    """Whether a command line is Snakemake itself (``snakemake ...``, ``python .../snakemake ...``, ``python -m
    snakemake ...``), not one of its jobs (a script job runs ``python .snakemake/scripts/...``)."""
    tokens = cmd.split()
    return "snakemake" in [Path(t).name for t in tokens[:2]] or tokens[1:3] == ["-m", "snakemake"]


def clear_stale_lock(snakemake: str | os.PathLike | list[str], args: list[str]) -> str | None:
    """Remove the lock of the directory ``args`` run Snakemake in when no live Snakemake holds it
    (``snakemake --unlock ARGS``; ``snakemake``: the executable, or the command as a list). Returns what was done or why
    not (None: there is no lock).

    Raises:
        MmirError: ``snakemake --unlock`` failed (its output in the message).
    """
    directory = workdir(args)
    if not any((directory / LOCKS).glob("*.lock")):
        return None
    live = live_processes(directory)
    if live:
        main = [(pid, cmd) for pid, cmd in live if is_snakemake(cmd)]
        if main:
            pid, cmd = main[0]
            return (f"{directory} is locked by a running Snakemake (pid {pid}: {cmd[:120]}); left as it is: wait for it, "
                    "or stop it first")
        pid, cmd = live[0]  # a job whose Snakemake was killed alone: it runs on to its end
        return (f"{directory} is locked, and a job of a Snakemake that no longer runs is still running here (pid {pid}: "
                f"{cmd[:120]}); left as it is: wait for the job to end, or stop it, then run again")
    cmd = [str(snakemake)] if isinstance(snakemake, (str, os.PathLike)) else list(snakemake)
    proc = subprocess.run([*cmd, "--unlock", *args], capture_output=True, text=True)  # first: args may end in "-- targets"
    if proc.returncode != 0:
        raise MmirError(f"snakemake --unlock failed in {directory}:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return f"removed the lock a killed Snakemake left on {directory} (no Snakemake process of it is running here)"


def _has(args: list[str], *flags: str) -> bool:
    return any(a in flags or a.startswith(tuple(f"{f}=" for f in flags if f.startswith("--"))) for a in args)


def workflow_args(args: list[str]) -> list[str]:
    """``args`` completed for the packaged workflow: ``-s <package>/pipeline/Snakefile`` and ``--cores all`` unless given,
    ``--profile NAME`` of a package profile made its path (see the module docstring)."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a == "--profile" and not Path(out[i + 1]).exists() and (PIPELINE / "profiles" / out[i + 1]).is_dir():
            out[i + 1] = str(PIPELINE / "profiles" / out[i + 1])
    if not _has(out, "-s", "--snakefile", "--unlock"):
        out = ["-s", str(PIPELINE / "Snakefile"), *out]
    if not _has(out, "-c", "--cores", "-j", "--jobs", "--profile", "--unlock"):
        out = ["--cores", "all", *out]
    return out


def run(args: list[str]) -> int:
    """Clear a stale lock, then run ``snakemake ARGS`` (:func:`workflow_args`) as a child and return its exit status;
    Ctrl-C reaches it as usual (its process group), SIGTERM is passed on to it."""
    import signal

    args = workflow_args(args)
    note = clear_stale_lock(SNAKEMAKE, args)
    if note:
        print(f"mmir: {note}", file=sys.stderr, flush=True)
    proc = subprocess.Popen([*SNAKEMAKE, *args])
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: proc.send_signal(sig))
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # Snakemake got it too and stops its jobs: wait for it
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Clear a stale lock, then replace this process by ``snakemake ARGS`` (:func:`workflow_args`; its exit status is
    the command's)."""
    args = workflow_args(list(sys.argv[1:] if argv is None else argv))
    try:
        note = clear_stale_lock(SNAKEMAKE, args)
    except MmirError as exc:
        print(f"mmir: error: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"mmir: {note}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os.execv(sys.executable, [*SNAKEMAKE, *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
