"""MM-BRIGHT (and the ``bright`` and ``beir`` hub sources) from the Hugging Face hub: list domains and download only
the configured ones; offline, one message with the local-copy recipe of the dataset's source.

Files land in ``data/raw/<dataset>/`` in the local layout (``<config>/<domain>.parquet`` or the hub's
shards), so the prepare step reads hub and local copies the same way.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from mmir.core.errors import DataError

_DOWNLOAD = ("cannot reach the Hugging Face hub to fetch {repo}@{rev} ({why}). On a machine with network, download it with "
             "`hf download {repo} --repo-type dataset --revision {rev} --local-dir {local}`{only}, copy that folder here, and ")
#: the fix for each hub source: a local copy read by the same source's reader (a BRIGHT copy read as ``source: local``
#: would lose its excluded_ids; a BEIR copy is BEIR's layout, not MM-BRIGHT's)
OFFLINE_HELP = {
    "hf": _DOWNLOAD + "set in params.yaml for this dataset: `source: local` and `root: {local}`.",
    "bright": _DOWNLOAD + "set in params.yaml for this dataset: keep `source: bright` and add `root: {local}` (not `source: "
              "local`: only the bright reader removes each query's excluded_ids from its ranking).",
    "beir": _DOWNLOAD + "set in params.yaml for this dataset: keep `source: beir`, add `root: {local}` and remove `repo_id` "
            "and `revision`.",
}
_LOCAL = {"hf": "/path/to/MM-BRIGHT", "bright": "/path/to/BRIGHT", "beir": "/path/to/{name}"}
_ONLY = {"hf": " (or only the domains you need with --include '*/<domain>*.parquet')",
         "bright": " (or only the tasks you need with --include '*/<task>-*.parquet')", "beir": ""}


def offline_message(source: str, repo: str, rev: str, why: str) -> str:
    """The message for a hub dataset of ``source`` (hf, bright, beir) that cannot be fetched: how to make a local
    copy and how to point this source at it."""
    local = _LOCAL[source].format(name=repo.rsplit("/", 1)[-1])
    return OFFLINE_HELP[source].format(repo=repo, rev=rev, why=why, local=local, only=_ONLY[source])


def _offline_error(repo: str, rev: str, why: str, where: str, source: str = "hf") -> DataError:
    return DataError(where, offline_message(source, repo, rev, why))


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


def check_reachable(repo_id: str, revision: str, source: str = "hf") -> str:
    """Resolve ``revision`` to a commit on the hub; raises DataError (the local-copy recipe of ``source``) when
    unreachable."""
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(repo_id, revision=revision).sha
    except Exception as exc:  # offline, DNS, HTTP, auth: all end the same way
        raise _offline_error(repo_id, revision, f"{type(exc).__name__}: {str(exc)[:200]}", f"hf://{repo_id}", source) from exc


def fetch_domain(repo_id: str, revision: str, domain: str, configs: list[str], dest: str | Path, source: str = "hf") -> dict:
    """Download ``configs`` of one ``domain`` into ``dest`` (local layout). Returns ``{"commit", "files"}``.

    Raises:
        DataError: at once, with instructions for a local copy, when the hub cannot be reached; no file of the
            first config (the documents) for the domain.
    """
    patterns = [p for c in configs for p in (f"{c}/{domain}.parquet", f"{c}/{domain}-*-of-*.parquet")]
    info = fetch_files(repo_id, revision, patterns, dest, source)
    if not any(f.startswith(f"{configs[0]}/") for f in info["files"]):
        raise DataError(f"hf://{repo_id}@{info['commit']}", f"no {configs[0]} file for domain '{domain}'")
    return info


def fetch_files(repo_id: str, revision: str, patterns: list[str], dest: str | Path, source: str = "hf") -> dict:
    """Download the files of hub dataset ``repo_id`` at ``revision`` matching ``patterns`` into ``dest`` (through
    ``huggingface_hub.snapshot_download`` at the resolved commit). Returns ``{"commit", "files"}`` (paths under ``dest``).

    Raises:
        DataError: at once, with the local-copy recipe of ``source`` (hf, bright, beir), when the hub cannot be reached.
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
        raise _offline_error(repo_id, revision, f"{type(exc).__name__}: {str(exc)[:200]}", f"hf://{repo_id}", source) from exc
    files = sorted(str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file() and ".cache" not in p.parts)
    return {"commit": info.sha, "files": files}
