"""The code commit of a git checkout, for MLflow tags and result manifests (one helper for the whole project)."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any


def code_commit(repo_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout holding ``repo_dir`` (default: this
    package); ``None`` values when git or the repository is unavailable."""
    d = Path(repo_dir) if repo_dir is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=d, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return {"commit": None, "dirty": None}
        st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=d, capture_output=True,
                            text=True, timeout=30)
        return {"commit": sha.stdout.strip(), "dirty": bool(st.stdout.strip()) if st.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def commit_label(repo_dir: str | os.PathLike | None = None) -> str:
    """The commit as one string: ``<sha>``, ``<sha>-dirty`` when tracked files changed, or ``unknown``."""
    c = code_commit(repo_dir)
    return "unknown" if c["commit"] is None else c["commit"] + ("-dirty" if c["dirty"] else "")


@functools.cache
def mmir_version() -> dict[str, Any]:
    """The mmir that runs: ``{"version": the distribution's version, "commit": sha or None, "dirty": bool or None,
    "label": "0.1.0 (commit abc...)"}``. The commit is the checkout's (an editable install or a source tree), else the
    one pip recorded for an install from git (``direct_url.json``: ``vcs_info.commit_id``), else None."""
    import importlib.metadata
    import json

    try:
        dist = importlib.metadata.distribution("mmir")
        version = dist.version
    except importlib.metadata.PackageNotFoundError:
        dist, version = None, "unknown"
    c = code_commit(Path(__file__).resolve().parent)
    if c["commit"] is None and dist is not None:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        c = {"commit": (direct.get("vcs_info") or {}).get("commit_id"), "dirty": None}
    label = version + (f" (commit {c['commit']}{'-dirty' if c['dirty'] else ''})" if c["commit"] else "")
    return {"version": version, "commit": c["commit"], "dirty": c["dirty"], "label": label}
