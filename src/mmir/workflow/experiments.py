"""DVC experiments and remotes of a project (this repository, or a project ``mmir init`` makes): its DVC setup, and
the step after ``dvc pull`` that lets Snakemake see the pulled outputs as up to date. docs: Experiments.

``python -m mmir.workflow.experiments setup [--remote URL] [--endpoint-url URL]`` and
``python -m mmir.workflow.experiments after-pull [-- SNAKEMAKE ARGS]`` run the two functions below.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from mmir.core.errors import MmirError

REMOTE_NAME = "storage"


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


def after_pull(project_dir: str | Path = ".", snakemake_args: list[str] = ()) -> int:
    """After ``dvc pull``: check with ``dvc status`` that every stage is up to date (DVC compares content hashes with
    ``dvc.lock``), then ``snakemake --touch --forceall`` so that Snakemake too sees the pulled outputs as current:
    it orders their modification times along the DAG (a pull writes them in any order) and records each job's
    params and code, which the next change is compared against. Returns Snakemake's exit status.

    Raises :class:`MmirError` naming the stale stages (pull or ``dvc repro`` first): touching them would hide work."""
    project_dir = Path(project_dir)
    stale = stale_stages(project_dir)
    if stale:
        raise MmirError(f"{len(stale)} DVC stages are not up to date ({', '.join(stale[:5])}{' ...' if len(stale) > 5 else ''}): "
                        "`dvc pull` all of them, or `dvc repro`, before after-pull")
    return subprocess.call([_tool("snakemake"), "--touch", "--forceall", "--cores", "1", "--quiet",
                            *snakemake_args], cwd=project_dir)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    top = argparse.ArgumentParser(prog="python -m mmir.workflow.experiments", description=__doc__)
    sub = top.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("setup", help="dvc init, autostage, a default remote")
    p.add_argument("--remote", help="the default remote's URL (a folder, s3://bucket/prefix, ...)")
    p.add_argument("--endpoint-url", help="an S3-compatible server's URL")
    sub.add_parser("after-pull", help="after `dvc pull`: check DVC is up to date, then snakemake --touch --forceall")
    args = top.parse_args(argv)
    try:
        if args.cmd == "setup":
            for cmd in setup_dvc(".", args.remote, args.endpoint_url):
                print("ran: " + " ".join(cmd))
            return 0
        return after_pull(".", extra)
    except MmirError as exc:
        print(f"mmir: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
