"""Content-addressed, on-disk embedding cache shared by every task and stage.

A vector is stored under ``sha256(encoder_key || kind || content)``, ``encoder_key`` naming the model, its
revision and every preprocessing choice that changes the vector. Storage: an SQLite index (WAL) maps each key
to ``(segment, row)`` of float32 segment files ``.seg/<segment>.f32`` (≤ 1 GiB); layout chosen by
``bench/bench_cache_layouts.py``. A database of the old layout (table ``vec``) is still read.

Guarantees: a killed run keeps every finished batch (bytes fsynced before the index rows commit); several
processes may write at once (file lock ``.lock``; first write of a key wins); :meth:`EmbeddingCache.read_into`
and :meth:`EmbeddingCache.encode_to` work in chunks (bounded memory).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
from filelock import FileLock

from mmir.core.errors import DataError
from mmir.core.paths import project_path

#: bytes per segment file (a new segment starts when the next row would not fit)
SEGMENT_BYTES = 1 << 30
#: keys looked up per SQLite query (well under every build's bound-parameter limit)
_LOOKUP_CHUNK = 30_000


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


def _pread_rows(fd: int, out: np.ndarray, row0: int, rowbytes: int, where: str) -> None:
    view = memoryview(out).cast("B")
    done, offset = 0, row0 * rowbytes
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise DataError(where, f"segment ends before row {row0 + done // rowbytes}: the cache is damaged")
        done += got


class EmbeddingCache:
    """Float32 vectors by content key, for one encoder.

    Args:
        spec: dict describing the encoder and its preprocessing; see :func:`encoder_key`.
        fsync: flush segment bytes to disk before committing their index rows (crash-safe, not only kill-safe).
    """

    def __init__(self, root: str | Path, spec: dict, fsync: bool = True):
        self.spec = spec
        self.key = encoder_key(spec)
        self.fsync = fsync
        root = project_path(str(root))  # ~ and $VARS: the default lies under ~/.cache/mmir
        root.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(spec.get("model", "encoder")))[-60:]
        stem = f"{slug}-{hashlib.sha256(self.key.encode()).hexdigest()[:12]}"
        self.path = root / f"{stem}.sqlite"
        self.seg_dir = root / f"{stem}.seg"
        self.lock = FileLock(str(root / f"{stem}.lock"))
        with self.lock:
            self.seg_dir.mkdir(exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=600)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")  # legacy
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            self._db.execute("CREATE TABLE IF NOT EXISTS idx (key BLOB PRIMARY KEY, seg INTEGER, row INTEGER) "
                             "WITHOUT ROWID")
            self._db.execute("CREATE TABLE IF NOT EXISTS segments (seg INTEGER PRIMARY KEY, rows INTEGER)")
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('encoder', ?)", (self.key,))
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('layout', 'segments-f32/1')")
            self._db.commit()
        self._legacy = self._db.execute("SELECT 1 FROM vec LIMIT 1").fetchone() is not None
        self._fds: dict[int, int] = {}

    # -- housekeeping -----------------------------------------------------------------------------------------
    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __len__(self) -> int:
        return (self._db.execute("SELECT COUNT(*) FROM idx").fetchone()[0]
                + self._db.execute("SELECT COUNT(*) FROM vec").fetchone()[0])

    @property
    def dim(self) -> int | None:
        """Vector dimension of this cache (None while it is empty)."""
        row = self._db.execute("SELECT v FROM meta WHERE k = 'dim'").fetchone()
        if row:
            return int(row[0])
        row = self._db.execute("SELECT dim FROM vec LIMIT 1").fetchone() if self._legacy else None
        return int(row[0]) if row else None

    def _seg_path(self, seg: int) -> Path:
        return self.seg_dir / f"{seg:06d}.f32"

    def _fd(self, seg: int) -> int:
        if seg not in self._fds:
            self._fds[seg] = os.open(self._seg_path(seg), os.O_RDWR | os.O_CREAT, 0o666)
        return self._fds[seg]

    # -- lookup and read --------------------------------------------------------------------------------------
    def _locate(self, uniq: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``key -> (segment, row)`` for the keys in segments; legacy keys map to ``(-1, -1)``."""
        found: dict[str, tuple[int, int]] = {}
        for i in range(0, len(uniq), _LOOKUP_CHUNK):
            chunk = [bytes.fromhex(k) for k in uniq[i : i + _LOOKUP_CHUNK]]
            q = f"SELECT key, seg, row FROM idx WHERE key IN ({','.join('?' * len(chunk))})"
            for k, seg, row in self._db.execute(q, chunk):
                found[k.hex()] = (seg, row)
        if self._legacy:
            rest = [k for k in uniq if k not in found]
            for i in range(0, len(rest), 900):
                chunk = rest[i : i + 900]
                q = f"SELECT key FROM vec WHERE key IN ({','.join('?' * len(chunk))})"
                for (k,) in self._db.execute(q, chunk):
                    found[k] = (-1, -1)
        return found

    def _read_located(self, locs: Sequence[tuple[int, int]], out: np.ndarray, keys: Sequence[str]) -> None:
        """Fill ``out[i]`` with the vector at ``locs[i]`` (runs of consecutive rows are one read each)."""
        d = out.shape[1]
        rowbytes = 4 * d
        arr = np.fromiter(itertools.chain.from_iterable(locs), dtype=np.int64, count=2 * len(locs)).reshape(-1, 2)
        legacy = np.flatnonzero(arr[:, 0] < 0)
        for i in legacy:
            blob = self._db.execute("SELECT vec FROM vec WHERE key = ?", (keys[i],)).fetchone()[0]
            out[i] = np.frombuffer(blob, dtype=np.float32)
        order = np.lexsort((arr[:, 1], arr[:, 0]))
        order = order[arr[order, 0] >= 0]
        if not order.size:
            return
        seg, row = arr[order, 0], arr[order, 1]
        # a run: consecutive rows of one segment; read straight into out when their destinations are consecutive too
        brk = np.flatnonzero((np.diff(seg) != 0) | (np.diff(row) != 1) | (np.diff(order) != 1)) + 1
        starts, stops = np.concatenate([[0], brk]), np.concatenate([brk, [order.size]])
        direct = out.dtype == np.float32 and out.flags.c_contiguous
        tmp = None if direct else np.empty((int((stops - starts).max()), d), dtype=np.float32)
        for a, b in zip(starts.tolist(), stops.tolist()):
            s, o = int(seg[a]), int(order[a])
            dest = out[o : o + b - a] if direct else tmp[: b - a]
            _pread_rows(self._fd(s), dest, int(row[a]), rowbytes, str(self._seg_path(s)))
            if not direct:
                out[o : o + b - a] = dest

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """``{key: float32 (dim,)}`` of the cached ``keys`` (absent ones left out); for millions use :meth:`read_into`."""
        uniq = list(dict.fromkeys(keys))
        locs = self._locate(uniq)
        hit = [k for k in uniq if k in locs]
        if not hit:
            return {}
        out = np.empty((len(hit), self._dim_or_legacy(hit)), dtype=np.float32)
        self._read_located([locs[k] for k in hit], out, hit)
        return dict(zip(hit, out))

    def _dim_or_legacy(self, hit: Sequence[str]) -> int:
        d = self.dim
        if d is None:  # only legacy rows so far
            d = self._db.execute("SELECT dim FROM vec WHERE key = ?", (hit[0],)).fetchone()[0]
        return int(d)

    def read_into(self, keys: Sequence[str], out: np.ndarray, chunk: int = 65536) -> np.ndarray:
        """Write the cached vector of ``keys[i]`` into ``out[i]`` (``(len(keys), dim)`` float32); absent rows untouched.

        Returns:
            Boolean ``(len(keys),)`` mask of the keys found.

        Raises:
            DataError: ``out``'s dim differs from the cache's.
        """
        if out.shape[0] != len(keys):
            raise ValueError(f"out has {out.shape[0]} rows for {len(keys)} keys")
        d = self.dim
        if d is not None and out.shape[1] != d:
            raise DataError(self.path, f"cache vectors have dim {d}, out has dim {out.shape[1]}")
        found = np.zeros(len(keys), dtype=bool)
        for c in range(0, len(keys), chunk):
            ck = keys[c : c + chunk]
            locs = self._locate(list(dict.fromkeys(ck)))
            if len(locs) == len(ck) or all(k in locs for k in ck):  # all found: read straight into out
                dest = out[c : c + len(ck)]
                if dest.dtype == np.float32 and dest.flags.c_contiguous:
                    self._read_located([locs[k] for k in ck], dest, ck)
                    found[c : c + len(ck)] = True
                    continue
            pos = [i for i, k in enumerate(ck) if k in locs]
            if pos:
                buf = np.empty((len(pos), out.shape[1]), dtype=np.float32)
                self._read_located([locs[ck[i]] for i in pos], buf, [ck[i] for i in pos])
                out[np.asarray(pos) + c] = buf
                found[np.asarray(pos) + c] = True
        return found

    def iter_read(self, keys: Sequence[str], chunk: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(vectors float32 (m, dim), found bool (m,))`` for consecutive chunks of ``keys`` (bounded memory)."""
        d = self.dim
        for c in range(0, len(keys), chunk):
            ck = keys[c : c + chunk]
            buf = np.zeros((len(ck), d or 0), dtype=np.float32)
            yield buf, (self.read_into(ck, buf) if d else np.zeros(len(ck), dtype=bool))

    # -- write ------------------------------------------------------------------------------------------------
    def put_many(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors (cast to float32) and commit; keys already present are kept as they are."""
        if items:
            self.put_matrix(list(items), np.stack([np.asarray(v, dtype=np.float32).ravel() for v in items.values()]))

    def put_matrix(self, keys: Sequence[str], vectors: np.ndarray) -> int:
        """Store ``vectors[i]`` (``(len(keys), dim)``, cast to float32) under ``keys[i]`` in one commit; returns the count added.

        Raises:
            DataError: a dim different from the cache's, or NaN/inf values.
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(keys):
            raise ValueError(f"{len(keys)} keys but vectors of shape {vectors.shape}")
        if not len(keys):
            return 0
        if not np.isfinite(vectors).all():
            raise DataError(self.path, "refusing to cache NaN or inf vector values")
        d = vectors.shape[1]
        with self.lock:
            have = self.dim
            if have is not None and have != d:
                raise DataError(self.path, f"cache vectors have dim {have}, got vectors of dim {d}")
            first: dict[str, int] = {}
            for i, k in enumerate(keys):
                first.setdefault(k, i)
            present = self._locate(list(first))
            new = [(k, i) for k, i in first.items() if k not in present]
            if not new:
                return 0
            rowbytes = 4 * d
            seg_rows = max(1, SEGMENT_BYTES // rowbytes)
            row = self._db.execute("SELECT seg, rows FROM segments ORDER BY seg DESC LIMIT 1").fetchone()
            seg, used = row if row else (0, 0)
            index_rows, seg_counts, pos = [], {}, 0
            while pos < len(new):
                if used >= seg_rows:
                    seg, used = seg + 1, 0
                take = new[pos : pos + seg_rows - used]
                block = vectors[[i for _, i in take]]
                fd = self._fd(seg)
                view, off = memoryview(block).cast("B"), used * rowbytes
                done = 0
                while done < len(view):
                    done += os.pwrite(fd, view[done:], off + done)
                if self.fsync:
                    os.fdatasync(fd) if hasattr(os, "fdatasync") else os.fsync(fd)
                index_rows.extend((bytes.fromhex(k), seg, used + j) for j, (k, _) in enumerate(take))
                used += len(take)
                seg_counts[seg] = used
                pos += len(take)
            with self._db:  # one transaction: the index rows and the segment sizes
                self._db.executemany("INSERT INTO idx VALUES (?, ?, ?)", index_rows)
                self._db.executemany("INSERT OR REPLACE INTO segments VALUES (?, ?)", seg_counts.items())
                if have is None:
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(d),))
            return len(new)

    # -- encode -----------------------------------------------------------------------------------------------
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
            encode_fn: maps a list of missing items to a float ``(len(list), dim)`` array.
            batch_size: items per ``encode_fn`` call; each batch is committed before the next starts.

        Returns:
            ``(matrix, stats)``: float32 ``(len(items), dim)`` in input order; ``{"hits", "misses", "model_calls"}``.
        """
        from tqdm.auto import tqdm

        if len(items) != len(keys):
            raise ValueError(f"{len(items)} items but {len(keys)} keys")
        uniq = list(dict.fromkeys(keys))
        locs = self._locate(uniq)
        missing: dict[str, object] = {}
        for item, k in zip(items, keys):
            if k not in locs and k not in missing:
                missing[k] = item
        calls = 0
        miss_keys = list(missing)
        bar = tqdm(total=len(miss_keys), desc=progress, disable=progress is None or not miss_keys)
        for i in range(0, len(miss_keys), batch_size):
            chunk = miss_keys[i : i + batch_size]
            vecs = np.asarray(encode_fn([missing[k] for k in chunk]), dtype=np.float32)
            calls += 1
            if vecs.ndim != 2 or vecs.shape[0] != len(chunk):
                raise RuntimeError(f"encoder returned {vecs.shape[0]} vectors for {len(chunk)} inputs")
            self.put_matrix(chunk, vecs)
            bar.update(len(chunk))
        bar.close()
        stats = {"hits": len(uniq) - len(miss_keys), "misses": len(miss_keys), "model_calls": calls}
        if not keys:
            return np.zeros((0, 0), dtype=np.float32), stats
        matrix = np.empty((len(keys), self._dim_or_legacy(list(locs) or uniq)), dtype=np.float32)
        found = self.read_into(list(keys), matrix)
        if not found.all():
            raise DataError(self.path, f"{int((~found).sum())} vectors vanished from the cache while encoding")
        return matrix, stats

    def encode_to(
        self,
        writer,
        items: Sequence,
        keys: Sequence[str],
        encode_fn: Callable[[list], np.ndarray],
        *,
        ids: Sequence[str],
        model_batch_size: int = 64,
        progress: str | None = None,
        seal: bool = True,
    ) -> dict:
        """Encode straight into a vector-store shard batch by batch (memory: one batch); written batches are skipped.

        Args:
            writer: a :class:`~mmir.encoders.store.ShardWriter` with ``rows == len(items)``.
            encode_fn: as in :meth:`encode`; called on a batch's misses, ``model_batch_size`` at a time.

        Returns:
            ``{"hits", "misses", "model_calls", "batches_total", "batches_skipped", "batches_computed", "sha256"}``.

        Raises:
            ValueError: lengths differ from ``writer.rows``; DataError / ShardMismatchError from the cache or writer.
        """
        from tqdm.auto import tqdm

        if not len(items) == len(keys) == writer.rows:
            raise ValueError(f"{len(items)} items, {len(keys)} keys, shard of {writer.rows} rows")
        todo = writer.pending()
        hits = misses = calls = 0
        for b in tqdm(todo, desc=progress, disable=progress is None or not todo):
            lo, hi = writer.batch_range(b)
            bk = list(keys[lo:hi])
            out = np.empty((hi - lo, writer.dim), dtype=np.float32)
            found = self.read_into(bk, out)
            todo_rows = np.flatnonzero(~found)
            first: dict[str, int] = {}
            for r in todo_rows:
                first.setdefault(bk[r], int(r))
            mk, computed = list(first), {}
            for i in range(0, len(mk), model_batch_size):
                chunk = mk[i : i + model_batch_size]
                vecs = np.asarray(encode_fn([items[lo + first[k]] for k in chunk]), dtype=np.float32)
                calls += 1
                if vecs.shape != (len(chunk), writer.dim):
                    raise RuntimeError(f"encoder returned shape {vecs.shape} for {len(chunk)} inputs of dim {writer.dim}")
                self.put_matrix(chunk, vecs)
                computed.update(zip(chunk, vecs))
            for r in todo_rows:
                out[r] = computed[bk[r]]
            hits += int(found.sum())
            misses += len(todo_rows)
            writer.write_batch(b, out)
        marker = writer.seal(ids) if seal else {}
        return {"hits": hits, "misses": misses, "model_calls": calls, "batches_total": writer.n_batches,
                "batches_skipped": writer.n_batches - len(todo), "batches_computed": len(todo),
                "sha256": marker.get("sha256")}
