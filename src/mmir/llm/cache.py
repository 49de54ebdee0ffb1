"""Durable generation cache (SQLite, WAL, one committed row per generation).

Key: ``sha256`` of canonical JSON of the backend identity (kind, model, revision or file sha256), the prompt
template (id, text sha256), the rendered input (:func:`~mmir.llm.messages.messages_sha256`) and the sampling
(``temperature``, ``max_tokens``, ``n``, ``seed``), and ``logprobs`` (the ``top_logprobs`` asked for) only when token
log-probabilities are asked for. Failed calls and rejected replies
(:meth:`GenerationCache.reject`) are stored as failure records, never hits, so the next run retries them.
The key fields (:func:`generation_key_fields`) are frozen (pinned by a test) so old caches keep hitting.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmir.core.paths import project_path
from mmir.llm.errors import GenerationFailure
from mmir.llm.messages import Message, messages_sha256

if TYPE_CHECKING:
    from mmir.llm.backends.base import Backend

REJECTED = "rejected_reply"

KEY_VERSION = 1


# ---------------------------------------------------------------------------------------------------- keys
def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def generation_key_fields(
    backend: Backend,
    messages: Sequence[Message],
    template_id: str,
    template_text: str,
    *,
    temperature: float = 0.0,
    max_tokens: int = 256,
    n: int = 1,
    seed: int | None = None,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    """The dict that :func:`generation_key` hashes (see the module docstring); ``logprobs`` is added only with
    ``top_logprobs``, so the keys of plain generations stay as they were."""
    return {
        "v": KEY_VERSION,
        **backend.cache_identity(),
        "template_id": template_id,
        "template_sha256": hashlib.sha256(template_text.encode("utf-8")).hexdigest(),
        "input_sha256": messages_sha256(messages),
        "sampling": {"temperature": float(temperature), "max_tokens": int(max_tokens), "n": int(n)},
        "seed": seed,
        **({"logprobs": int(top_logprobs)} if top_logprobs is not None else {}),
    }


def generation_key(backend: Backend, messages: Sequence[Message], template_id: str, template_text: str, **sampling: Any) -> str:
    """Hex sha256 cache key of one generation request. ``sampling``: temperature, max_tokens, n, seed."""
    return hashlib.sha256(_canon(generation_key_fields(backend, messages, template_id, template_text, **sampling)).encode()).hexdigest()


# --------------------------------------------------------------------------------------------------- cache
class GenerationCache:
    """SQLite-backed store of generation records, safe to share between threads and processes.

    Records have ``status`` ``"ok"`` or ``"failed"``; :attr:`stats` counts ``hits``, ``misses``,
    ``backend_calls`` and ``failures``.
    """

    def __init__(self, path: str | Path):
        if str(path) != ":memory:":
            path = project_path(str(path))  # ~ and $VARS: the default lies under ~/.cache/mmir
            path.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(path), timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS generations ("
            " key TEXT PRIMARY KEY, status TEXT NOT NULL, template_id TEXT, attempts INTEGER NOT NULL,"
            " record TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL)"
        )
        self.hits = self.misses = self.backend_calls = self.failures = 0

    @classmethod
    def in_memory(cls) -> GenerationCache:
        """A cache that lives in memory only (same code path, nothing kept after the process)."""
        return cls(":memory:")

    # plumbing -----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> GenerationCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path)!r})"

    @property
    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "backend_calls", "failures"}`` counted by this object."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "backend_calls": self.backend_calls, "failures": self.failures}

    # records ------------------------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record for ``key`` (ok or failed), or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT record, attempts FROM generations WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        rec = json.loads(row[0])
        rec["attempts"] = row[1]
        return rec

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store (or replace) ``record`` under ``key`` and commit at once.

        Raises:
            ValueError: ``record["status"]`` is not ``"ok"`` or ``"failed"``, or the record is not JSON-serialisable.
        """
        status = record.get("status")
        if status not in ("ok", "failed"):
            raise ValueError(f"record status must be 'ok' or 'failed', got {status!r}")
        rec = {k: v for k, v in record.items() if k not in ("cached", "attempts")}
        try:
            blob = json.dumps(rec, ensure_ascii=False)
        except TypeError as e:
            raise ValueError(f"record for key {key[:12]}... is not JSON-serialisable: {e}") from e
        attempts = int(record.get("attempts", 1))
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO generations (key, status, template_id, attempts, record, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET status = excluded.status,"
                " template_id = excluded.template_id, attempts = excluded.attempts, record = excluded.record,"
                " updated = excluded.updated",
                (key, status, rec.get("template_id"), attempts, blob, now, now),
            )  # autocommit mode: durable once this returns

    def reject(self, key: str, reason: str) -> None:
        """Turn the stored reply under ``key`` into a failure record (``error_kind = "rejected_reply"``, the
        texts kept): a parser rejected it, so the next request calls the backend again. No-op for an unknown key."""
        rec = self.get(key)
        if rec is None:
            return
        self.put(key, {**rec, "status": "failed", "error_kind": REJECTED, "error": reason})

    def keys(self, status: str | None = None) -> list[str]:
        """All stored keys, optionally only those with ``status`` ``"ok"`` / ``"failed"``."""
        with self._lock:
            if status is None:
                rows = self._db.execute("SELECT key FROM generations ORDER BY created").fetchall()
            else:
                rows = self._db.execute("SELECT key FROM generations WHERE status = ? ORDER BY created", (status,)).fetchall()
        return [r[0] for r in rows]

    def failed_records(self) -> list[dict[str, Any]]:
        """Every stored failure record (each with its ``key``), oldest first, for reports."""
        return [r for k in self.keys("failed") if (r := self.get(k)) is not None]

    # generation ---------------------------------------------------------------------------------------
    def cached_generate(
        self,
        backend: Backend,
        messages: Sequence[Message],
        template_id: str,
        template_text: str,
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        n: int = 1,
        top_logprobs: int | None = None,
        raise_on_failure: bool = False,
    ) -> dict[str, Any]:
        """The cached generation for this request, or a new one from ``backend`` (stored at once); ``top_logprobs``:
        also the reply tokens' log-probabilities (record key ``logprobs``, :class:`~mmir.llm.backends.base.Generation`).

        Returns:
            The record: ``key``, ``status``, ``cached``, ``attempts``, the key fields and either the
            :class:`Generation` fields or the failure fields.

        Raises:
            GenerationFailure: only with ``raise_on_failure``.
            UnsupportedInputError: malformed messages, or input the backend cannot take (not stored).
        """
        sampling = {"temperature": temperature, "max_tokens": max_tokens, "n": n, "seed": seed}
        lp = {} if top_logprobs is None else {"top_logprobs": top_logprobs}
        fields = generation_key_fields(backend, messages, template_id, template_text, **sampling, **lp)
        key = hashlib.sha256(_canon(fields).encode()).hexdigest()
        prev = self.get(key)
        if prev is not None and prev.get("status") == "ok":
            with self._lock:
                self.hits += 1
            backend.usage.add_cache_hit()
            return {**prev, "cached": True}
        with self._lock:
            self.misses += 1
            self.backend_calls += 1
        base = {"key": key, **fields, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        attempts = (prev or {}).get("attempts", 0) + 1
        try:
            gen = backend.generate(messages, temperature=temperature, max_tokens=max_tokens, seed=seed, n=n, **lp)
        except GenerationFailure as f:
            with self._lock:
                self.failures += 1
            rec = {**base, "status": "failed", **f.to_record(), "attempts": attempts}
            self.put(key, rec)
            if raise_on_failure:
                raise
            return {**rec, "cached": False}
        rec = {**base, "status": "ok", **gen.to_dict(), "attempts": attempts}
        self.put(key, rec)
        return {**rec, "cached": False}

    def cached_generate_many(
        self,
        backend: Backend,
        items: Sequence[Sequence[Message]],
        template_id: str,
        template_text: str,
        *,
        max_workers: int | None = None,
        **sampling: Any,
    ) -> list[dict[str, Any]]:
        """:meth:`cached_generate` over many message lists, ``backend.max_concurrency`` at a time
        (or ``max_workers``), in input order. Each generation is committed as soon as it finishes, so an
        interrupted call keeps everything finished so far. Failures come back as failure records."""
        sampling.pop("raise_on_failure", None)
        workers = max(1, min(max_workers or backend.max_concurrency, len(items) or 1))

        def one(msgs: Sequence[Message]) -> dict[str, Any]:
            return self.cached_generate(backend, msgs, template_id, template_text, **sampling)

        if workers == 1:
            return [one(m) for m in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gen-cache") as pool:
            return list(pool.map(one, items))
