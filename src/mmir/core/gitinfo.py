"""The code commit of a git checkout, for MLflow tags and result manifests (one helper for the whole project)."""

from __future__ import annotations

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
