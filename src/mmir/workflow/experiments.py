"""DVC experiments and remotes of a project (this repository, or a project ``mmir init`` makes): its DVC setup, and
the step after a DVC checkout (``dvc pull``, a queued experiment's copy) that lets Snakemake see the checked-out
outputs as up to date. docs: Experiments.

Snakemake decides what to rerun from modification times and its own records (``.snakemake/metadata``: each output's
params, code and the time its job ended). DVC keeps those records with the outputs (stage ``caches``) but writes files
in any order, so a checked-out output can look older than its inputs: :func:`restore_mtimes` gives the outputs times in
the order in which the jobs ran, the last one now (newer than the workflow and the data the machine already had).

``python -m mmir.workflow.experiments setup [--remote URL] [--endpoint-url URL]`` and
``python -m mmir.workflow.experiments after-pull`` run :func:`setup_dvc` and :func:`after_pull`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mmir.core.errors import MmirError

REMOTE_NAME = "storage"
METADATA = Path(".snakemake") / "metadata"
#: seconds between the modification times :func:`restore_mtimes` gives consecutive jobs' outputs
TIME_STEP = 0.01


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _dvc(project_dir: Path, *args: str) -> str:
    p = subprocess.run([_tool("dvc"), *args], cwd=project_dir, capture_output=True, text=True)
    if p.returncode != 0:
        raise MmirError(f"dvc {' '.join(args)} (in {project_dir}) failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return p.stdout


def setup_dvc(project_dir: str | Path = ".", remote: str | None = None, endpoint_url: str | None = None,
              name: str = REMOTE_NAME) -> list[list[str]]:
    """Make ``project_dir`` (a git work tree) ready for DVC experiments and remotes; returns the ``dvc`` commands run.

    ``dvc init`` when it has no ``.dvc/``; ``core.autostage true``, so that ``dvc repro`` and ``dvc exp`` stage
    ``dvc.lock`` and the committed ``metrics/`` files in git; with ``remote`` (a folder, ``s3://bucket/prefix``, any
    URL DVC takes) the default remote ``name`` (``dvc remote add -d``, replaced when it exists), with ``endpoint_url``
    its ``endpointurl`` (an S3-compatible server). No credential is written: DVC's S3 remote reads
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` from the environment. Raises :class:`MmirError` naming the
    ``dvc`` command that failed."""
    project_dir = Path(project_dir)
    ran = []

    def dvc(*args: str) -> None:
        _dvc(project_dir, *args)
        ran.append(["dvc", *args])

    if not (project_dir / ".dvc").is_dir():
        dvc("init", "-q")
    dvc("config", "core.autostage", "true")
    if remote:
        dvc("remote", "add", "--force", "-d", name, remote)
        if endpoint_url:
            dvc("remote", "modify", name, "endpointurl", endpoint_url)
    return ran


def stale_stages(project_dir: str | Path = ".") -> list[str]:
    """The DVC stages whose deps, params or outs differ from ``dvc.lock`` (``dvc status --json``)."""
    return sorted(json.loads(_dvc(Path(project_dir), "status", "--json") or "{}"))


def restore_mtimes(project_dir: str | Path = ".") -> tuple[int, int]:
    """Give every output that has a Snakemake record (``.snakemake/metadata``; the record's file name is the output
    path, base64, cut into ``@``-prefixed parts when long) a modification time in the order of the records' ``endtime``
    (when its job ended): the jobs' order, the last one now, :data:`TIME_STEP` apart (equal end times stay equal). So
    each output is newer than its inputs and than every file written before this call: the workflow's scripts and the
    data on another machine, which Snakemake compares by time too. Returns ``(outputs set, records whose output is
    absent)``."""
    project_dir = Path(project_dir)
    meta = project_dir / METADATA
    ended: list[tuple[float, Path]] = []
    absent = 0
    for rec in sorted(meta.rglob("*")) if meta.is_dir() else []:
        if not rec.is_file():
            continue
        parts = rec.relative_to(meta).parts
        key = "".join(p.removeprefix("@") for p in parts[:-1]) + parts[-1]
        try:
            path = project_dir / base64.urlsafe_b64decode(key).decode()
            endtime = json.loads(rec.read_text(encoding="utf-8")).get("endtime")
        except (ValueError, UnicodeDecodeError):  # not a record (a partly written file)
            continue
        if endtime is None:
            continue
        if path.exists():
            ended.append((endtime, path))
        else:
            absent += 1
    order = {t: i for i, t in enumerate(sorted({t for t, _ in ended}))}
    now = time.time()
    for endtime, path in ended:
        t = now - (len(order) - 1 - order[endtime]) * TIME_STEP
        os.utime(path, (t, t), follow_symlinks=False)
    return len(ended), absent


def in_dvc_copy() -> bool:
    """Whether this process runs a stage of a queued (or ``--temp``) DVC experiment: DVC then runs it in a copy of the
    repository under ``.dvc/tmp/exps/`` and sets ``DVC_ROOT`` to the repository itself."""
    root = os.environ.get("DVC_ROOT")
    return bool(os.environ.get("DVC_EXP_NAME") and root and Path(root).resolve() != Path.cwd().resolve())


def after_pull(project_dir: str | Path = ".") -> tuple[int, int]:
    """After ``dvc pull`` (or ``dvc checkout``): check with ``dvc status`` that every stage matches ``dvc.lock``
    (content hashes), then :func:`restore_mtimes`. Returns its counts.

    Raises :class:`MmirError` naming the stale stages (pull or ``dvc repro`` first): their outputs are not the ones the
    records describe."""
    stale = stale_stages(project_dir)
    if stale:
        raise MmirError(f"{len(stale)} DVC stages are not up to date ({', '.join(stale[:5])}{' ...' if len(stale) > 5 else ''}): "
                        "`dvc pull` all of them, or `dvc repro`, before after-pull")
    return restore_mtimes(project_dir)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = argparse.ArgumentParser(prog="python -m mmir.workflow.experiments", description=__doc__)
    sub = top.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("setup", help="dvc init, autostage, a default remote")
    p.add_argument("--remote", help="the default remote's URL (a folder, s3://bucket/prefix, ...)")
    p.add_argument("--endpoint-url", help="an S3-compatible server's URL")
    sub.add_parser("after-pull", help="after `dvc pull`: check DVC is up to date, then give outputs times in their jobs' order")
    args = top.parse_args(argv)
    try:
        if args.cmd == "setup":
            for cmd in setup_dvc(".", args.remote, args.endpoint_url):
                print("ran: " + " ".join(cmd))
            return 0
        done, absent = after_pull(".")
        print(f"mmir: {done} outputs given modification times in the order of their Snakemake records ({absent} records "
              "without their output)")
        return 0
    except MmirError as exc:
        print(f"mmir: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
