"""MM-BRIGHT from the Hugging Face hub: list domains and download only the configured ones.

Files land in ``data/raw/<dataset>/`` in the local layout (``<config>/<domain>.parquet`` or the hub's
shards), so the prepare step reads hub and local copies the same way.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from mmir.core.errors import DataError

OFFLINE_HELP = (
    "cannot reach the Hugging Face hub to fetch {repo}@{rev} ({why}). On a machine with network, download it "
    "with `hf download {repo} --repo-type dataset --revision {rev} --local-dir /path/to/MM-BRIGHT` "
    "(or only the domains you need with --include '*/<domain>*.parquet'), copy that folder here, and set in "
    "params.yaml: `source: local` and `root: /path/to/MM-BRIGHT` for this dataset."
)


def _offline_error(repo: str, rev: str, why: str, where: str) -> DataError:
    return DataError(where, OFFLINE_HELP.format(repo=repo, rev=rev, why=why))


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    """A TCP connection to the hub endpoint opens within ``timeout_s`` (so offline DAG building never waits on
    the client's retries)."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def list_hub_domains(repo_id: str, revision: str) -> list[str]:
    """Domain names of the hub dataset (from its ``documents/`` files); [] when the hub is unreachable. Asked once
    per process and (repo, revision): the DAG asks for it for every job."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or not _hub_reachable():
        return []
    try:
        from huggingface_hub import HfApi

        files = HfApi().list_repo_files(repo_id, repo_type="dataset", revision=revision)
    except Exception:  # offline or hub error: the caller falls back to the published domain list
        return []
    names = set()
    for f in files:
        m = re.match(r"^documents/(.+?)(-\d{5}-of-\d{5})?\.parquet$", f)
        if m:
            names.add(m.group(1))
    return sorted(names)


def check_reachable(repo_id: str, revision: str) -> str:
    """Resolve ``revision`` to a commit on the hub; raises DataError (local-copy recipe) when unreachable."""
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(repo_id, revision=revision).sha
    except Exception as exc:  # offline, DNS, HTTP, auth: all end the same way
        raise _offline_error(repo_id, revision, f"{type(exc).__name__}: {str(exc)[:200]}", f"hf://{repo_id}") from exc


def fetch_domain(repo_id: str, revision: str, domain: str, configs: list[str], dest: str | Path) -> dict:
    """Download ``configs`` of one ``domain`` into ``dest`` (local layout). Returns ``{"commit", "files"}``.

    Raises:
        DataError: at once, with instructions for a local copy, when the hub cannot be reached; no file of the
            first config (the documents) for the domain.
    """
    patterns = [p for c in configs for p in (f"{c}/{domain}.parquet", f"{c}/{domain}-*-of-*.parquet")]
    info = fetch_files(repo_id, revision, patterns, dest)
    if not any(f.startswith(f"{configs[0]}/") for f in info["files"]):
        raise DataError(f"hf://{repo_id}@{info['commit']}", f"no {configs[0]} file for domain '{domain}'")
    return info


def fetch_files(repo_id: str, revision: str, patterns: list[str], dest: str | Path) -> dict:
    """Download the files of hub dataset ``repo_id`` at ``revision`` matching ``patterns`` into ``dest`` (through
    ``huggingface_hub.snapshot_download`` at the resolved commit). Returns ``{"commit", "files"}`` (paths under ``dest``).

    Raises:
        DataError: at once, with instructions for a local copy, when the hub cannot be reached.
    """
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise DataError(repo_id, f"huggingface_hub is not installed: {exc}") from exc
    try:
        info = HfApi().dataset_info(repo_id, revision=revision)
        path = snapshot_download(
            repo_id, repo_type="dataset", revision=info.sha, allow_patterns=patterns, local_dir=str(dest)
        )
    except Exception as exc:  # offline, DNS, HTTP, auth: all end the same way, with the local-copy recipe
        raise _offline_error(repo_id, revision, f"{type(exc).__name__}: {str(exc)[:200]}", f"hf://{repo_id}") from exc
    files = sorted(str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file() and ".cache" not in p.parts)
    return {"commit": info.sha, "files": files}
