"""Content-addressed, on-disk embedding cache shared by every task and stage.

A vector is stored under ``sha256(encoder_key || kind || content)`` where ``encoder_key`` names the model,
its revision (or file hash) and every preprocessing choice that changes the vector (instruction template,
max length, normalisation, image preprocessing). So a query, document or image encoded once is reused by any
later run, task or system with the same encoder, and nothing stale is ever returned after a change.

Storage: one SQLite database per encoder key (``<root>/<slug>-<hash12>.sqlite``, WAL mode), one row per
vector (``key TEXT PRIMARY KEY, dim INTEGER, vec BLOB`` of float32). Writes are committed per batch, so a
killed run keeps every finished batch and a rerun resumes from there.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


def content_key(encoder_key: str, kind: str, content: bytes | str) -> str:
    """Hex sha256 of the encoder key, the item kind (``text``/``image``/...) and the raw content."""
    h = hashlib.sha256()
    for part in (encoder_key.encode(), b"\0", kind.encode(), b"\0"):
        h.update(part)
    h.update(content.encode("utf-8") if isinstance(content, str) else content)
    return h.hexdigest()


def encoder_key(spec: dict) -> str:
    """A stable string for an encoder spec (model id, revision, templates, ...): canonical JSON."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)


class EmbeddingCache:
    """Float32 vectors by content key, for one encoder.

    Args:
        root: cache directory (created).
        spec: dict describing the encoder and its preprocessing; see :func:`encoder_key`.
    """

    def __init__(self, root: str | Path, spec: dict):
        self.spec = spec
        self.key = encoder_key(spec)
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(spec.get("model", "encoder")))[-60:]
        self.path = root / f"{slug}-{hashlib.sha256(self.key.encode()).hexdigest()[:12]}.sqlite"
        self._db = sqlite3.connect(self.path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('encoder', ?)", (self.key,))
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors present in the cache for ``keys`` (absent keys are left out)."""
        found: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 900):  # SQLite's bound-parameter limit
            chunk = uniq[i : i + 900]
            q = f"SELECT key, vec FROM vec WHERE key IN ({','.join('?' * len(chunk))})"
            for k, blob in self._db.execute(q, chunk):
                found[k] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors (cast to float32) and commit."""
        rows = [(k, int(v.shape[-1]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()]
        self._db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?, ?)", rows)
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM vec").fetchone()[0]

    def encode(
        self,
        items: Sequence,
        keys: Sequence[str],
        encode_fn: Callable[[list], np.ndarray],
        batch_size: int = 64,
        progress: str | None = None,
    ) -> tuple[np.ndarray, dict]:
        """Vectors for ``items``, computing only the ones missing from the cache.

        Args:
            items: the inputs (texts, images, ...) in order; ``keys[i]`` is the content key of ``items[i]``.
            encode_fn: maps a list of missing items to a float array of shape ``(len(list), dim)``.
            batch_size: items per ``encode_fn`` call; each batch is committed before the next starts.
            progress: tqdm description, or None for no bar.

        Returns:
            ``(matrix, stats)``: ``matrix`` float32 of shape ``(len(items), dim)`` in input order;
            ``stats`` = ``{"hits", "misses", "model_calls"}`` counts.
        """
        from tqdm.auto import tqdm

        if len(items) != len(keys):
            raise ValueError(f"{len(items)} items but {len(keys)} keys")
        have = self.get_many(keys)
        missing: dict[str, object] = {}
        for item, k in zip(items, keys):
            if k not in have and k not in missing:
                missing[k] = item
        calls = 0
        miss_keys = list(missing)
        bar = tqdm(total=len(miss_keys), desc=progress, disable=progress is None or not miss_keys)
        for i in range(0, len(miss_keys), batch_size):
            chunk = miss_keys[i : i + batch_size]
            vecs = np.asarray(encode_fn([missing[k] for k in chunk]), dtype=np.float32)
            calls += 1
            if vecs.shape[0] != len(chunk):
                raise RuntimeError(f"encoder returned {vecs.shape[0]} vectors for {len(chunk)} inputs")
            new = dict(zip(chunk, vecs))
            self.put_many(new)
            have.update(new)
            bar.update(len(chunk))
        bar.close()
        if not keys:
            return np.zeros((0, 0), dtype=np.float32), {"hits": 0, "misses": 0, "model_calls": 0}
        matrix = np.stack([have[k] for k in keys]).astype(np.float32, copy=False)
        hits = len(set(keys)) - len(miss_keys)
        return matrix, {"hits": hits, "misses": len(miss_keys), "model_calls": calls}
