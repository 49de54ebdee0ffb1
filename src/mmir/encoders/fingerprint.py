"""What identifies model weights loaded from a local path, for cache keys (a hub model is its resolved commit)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SMALL_FILE = 1 << 20  # configs, tokenizers, vocabularies: hashed whole


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
