"""Sharded on-disk vector store: one directory per (dataset, domain, encoder), millions of rows, bounded memory.

Layout of a store directory::

    manifest.json              format, encoder key, dtype, dim, total rows, per shard: rows, bytes, sha256
    shard-00000.npy            (rows, dim) float32 (default) or float16, a plain .npy (np.load(mmap_mode="r") maps it)
    shard-00000.ids.json       the ids of the shard's rows, in row order
    shard-00000.sealed.json    written last, atomically, when the shard is complete (rows, sha256, ...)
    shard-00000.progress       only while a shard is being written: a JSON header line, then one finished batch a line

A kill loses at most the batch being written (a batch is recorded in ``.progress`` only after its bytes).
:func:`open_store` checks the manifest and presents the shards as one ``(n, dim)``
:class:`~mmir.encoders.sharded.ShardedMatrix`. See the README, "Full size".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmir.core.io import write_json, write_text
from mmir.encoders.sharded import (
    DimensionMismatchError,
    EncoderKeyMismatchError,
    MissingShardError,
    ShardedMatrix,
    ShardMismatchError,
    StoreError,
    _npy_header,
    check_dimension,
)

__all__ = [
    "BatchedShardWriter", "DimensionMismatchError", "EncoderKeyMismatchError", "MissingShardError", "ShardFormat",
    "ShardMismatchError", "ShardWriteStats", "ShardWriter", "ShardedMatrix", "StoreError", "VectorStore", "check_dimension",
    "finalize_store", "open_store", "read_manifest", "read_shard_ids", "sealed_markers", "shard_name", "shard_ranges",
    "sha256_file", "write_shard",
]

FORMAT = "mmir-vector-store/1"
MANIFEST = "manifest.json"
DTYPES = ("float16", "float32")
_HASH_BLOCK = 16 << 20


def shard_name(shard: int) -> str:
    """File stem of shard number ``shard``: ``shard-00000``."""
    if shard < 0:
        raise ValueError(f"shard number must be >= 0, got {shard}")
    return f"shard-{shard:05d}"


def shard_ranges(n_rows: int, shard_rows: int) -> list[tuple[int, int]]:
    """The ``[start, stop)`` row range of each shard when ``n_rows`` rows are cut into shards of ``shard_rows``."""
    if shard_rows < 1:
        raise ValueError(f"shard_rows must be >= 1, got {shard_rows}")
    return [(s, min(s + shard_rows, n_rows)) for s in range(0, n_rows, shard_rows)] or [(0, 0)]


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in 16 MiB blocks (bounded memory, no mapping)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


# ---------------------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShardWriteStats:
    """What one :class:`ShardWriter` run did: batches skipped (already written), computed, and the total."""

    shard: int
    rows: int
    batches_total: int
    batches_skipped: int
    batches_computed: int
    sealed: bool
    sha256: str | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class BatchedShardWriter:
    """What the shard writers share (this store's :class:`ShardWriter`, the multi-vector store's
    :class:`~mmir.encoders.token_store.TokenShardWriter`): ``size`` units (rows, or items) cut into batches of
    ``batch_size``, the shard file's descriptor (closed on exit), and the checks of a sealed marker and of a
    ``.progress`` header against the writer's own ``_header``."""

    _fd: int | None = None
    _header: dict

    def __init__(self, store_dir: str | Path, shard: int, *, unit: str, size: int, dim: int, dtype: str, batch_size: int,
                 fsync: bool):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if size < 0 or dim < 1 or batch_size < 1:
            raise ValueError(f"{unit} >= 0, dim >= 1 and batch_size >= 1 required (got {size}, {dim}, {batch_size})")
        self.dir = Path(store_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shard, self.dim, self.dtype, self.fsync = shard, dim, np.dtype(dtype), fsync
        self._size, self.batch_size, self.n_batches = size, batch_size, -(-size // batch_size)
        stem = shard_name(shard)
        self.npy, self.ids_path = self.dir / f"{stem}.npy", self.dir / f"{stem}.ids.json"
        self.sealed_path, self.progress_path = self.dir / f"{stem}.sealed.json", self.dir / f"{stem}.progress"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def batch_range(self, batch: int) -> tuple[int, int]:
        """Unit range ``[start, stop)`` (rows or items, within the shard) of batch number ``batch``."""
        if not 0 <= batch < self.n_batches:
            raise IndexError(f"batch {batch} out of range 0..{self.n_batches - 1}")
        return batch * self.batch_size, min((batch + 1) * self.batch_size, self._size)

    def _check_sealed(self, keys: Sequence[str]) -> None:
        """Raise ShardMismatchError when the sealed marker differs from this writer in one of ``keys``."""
        marker = json.loads(self.sealed_path.read_text())
        for k in keys:
            if marker.get(k) != self._header[k]:
                raise ShardMismatchError(self.sealed_path, f"sealed with {k}={marker.get(k)!r}, but this writer has "
                                         f"{k}={self._header[k]!r}; delete the shard's files to rewrite it")

    def _progress_records(self) -> list[str]:
        """The complete record lines of a partial shard's ``.progress`` after its header (a line torn by a kill is cut
        from the file and left out).

        Raises:
            ShardMismatchError: a header other than this writer's.
        """
        lines = self.progress_path.read_text().split("\n")
        try:
            header = json.loads(lines[0])
        except ValueError:
            header = None
        if header != self._header:
            raise ShardMismatchError(self.progress_path, f"a partial shard written with {header}, but this writer "
                                     f"has {self._header}; delete the shard's files to rewrite it")
        if lines[-1]:  # a torn last line: cut it, so the next record starts on a line of its own
            with open(self.progress_path, "r+") as f:
                f.truncate(len("\n".join(lines[:-1]).encode()) + 1)
        return lines[1:-1]


class ShardWriter(BatchedShardWriter):
    """Writes one shard of a store batch by batch, resumable after a kill.

    Args:
        shard: shard number (``>= 0``), the store's ``shard``-th contiguous row range.
        encoder_key: names the encoder and its preprocessing (recorded, checked on reopen).
        dtype: ``float32`` (default) or ``float16`` on disk.
        batch_size: rows per batch: the unit of work, of resumption and of loss on a kill.
        fsync: flush each batch's bytes before recording it (survives a machine crash too).

    Raises:
        ShardMismatchError: reopened over a shard written with different parameters.
    """

    def __init__(self, store_dir: str | Path, shard: int, *, rows: int, dim: int, encoder_key: str,
                 dtype: str = "float32", batch_size: int = 4096, fsync: bool = True):
        super().__init__(store_dir, shard, unit="rows", size=rows, dim=dim, dtype=dtype, batch_size=batch_size, fsync=fsync)
        self.rows, self.encoder_key = rows, encoder_key
        self._header = {"format": FORMAT, "encoder_key": encoder_key, "dtype": self.dtype.name, "dim": dim,
                        "rows": rows, "batch_size": batch_size}
        self._done: set[int] = set()
        self._offset = 0
        self.sealed = self.sealed_path.exists()
        if self.sealed:
            self._check_sealed(("encoder_key", "dtype", "dim", "rows"))
            self._done = set(range(self.n_batches))
        else:
            self._open()

    # -- state ----------------------------------------------------------------------------------------------
    def _open(self) -> None:
        if self.progress_path.exists() and self.npy.exists():
            records = self._progress_records()
            shape, dtype, _, offset = _npy_header(self.npy)
            if shape != (self.rows, self.dim) or dtype != self.dtype:
                raise ShardMismatchError(self.npy, f"holds {shape} {dtype}, expected ({self.rows}, {self.dim}) "
                                         f"{self.dtype}; delete the shard's files to rewrite it")
            for line in records:
                if line.strip().isdigit() and int(line) < self.n_batches:
                    self._done.add(int(line))
            self._offset = offset
        else:
            mm = np.lib.format.open_memmap(self.npy, mode="w+", dtype=self.dtype, shape=(self.rows, self.dim))
            self._offset = mm.offset
            del mm  # the file is preallocated (sparse); batches are written with pwrite, not through a mapping
            self.progress_path.write_text(json.dumps(self._header, sort_keys=True) + "\n")
        self._fd = os.open(self.npy, os.O_RDWR)

    def pending(self) -> list[int]:
        """Batch numbers not written yet, ascending."""
        return [b for b in range(self.n_batches) if b not in self._done]

    # -- writing --------------------------------------------------------------------------------------------
    def write_batch(self, batch: int, vectors: np.ndarray) -> None:
        """Write batch ``batch``: float ``(stop - start, dim)`` (cast to the store dtype).

        Raises:
            ShardMismatchError: wrong shape, a sealed shard, or a non-finite value (NaN, inf, or a float16 overflow).
        """
        if self.sealed:
            raise ShardMismatchError(self.sealed_path, "the shard is sealed; it cannot be written")
        start, stop = self.batch_range(batch)
        with np.errstate(over="ignore"):  # an overflow to inf is reported below, naming the batch
            arr = np.ascontiguousarray(vectors, dtype=self.dtype)
        if arr.shape != (stop - start, self.dim):
            raise ShardMismatchError(self.npy, f"batch {batch} (rows {start}..{stop - 1}) needs shape "
                                     f"({stop - start}, {self.dim}), got {np.shape(vectors)}")
        if not np.isfinite(arr).all():
            raise ShardMismatchError(self.npy, f"batch {batch} (rows {start}..{stop - 1}) has NaN or inf values "
                                     f"after the cast to {self.dtype}")
        _pwrite_all(self._fd, memoryview(arr).cast("B"), self._offset + start * self.dim * self.dtype.itemsize)
        if self.fsync:
            os.fdatasync(self._fd) if hasattr(os, "fdatasync") else os.fsync(self._fd)
        with open(self.progress_path, "a") as f:  # recorded only after the bytes are written
            f.write(f"{batch}\n")
        self._done.add(batch)

    def run(self, compute: Callable[[int, int], np.ndarray], progress: str | None = None) -> ShardWriteStats:
        """Compute and write every pending batch: ``compute(start, stop)`` returns the ``(stop - start, dim)``
        vectors of the shard's rows ``start..stop-1``. Returns the counts (not sealed yet: see :meth:`seal`)."""
        from tqdm.auto import tqdm

        todo = self.pending()
        skipped = self.n_batches - len(todo)
        for b in tqdm(todo, desc=progress, disable=progress is None or not todo):
            self.write_batch(b, compute(*self.batch_range(b)))
        return ShardWriteStats(self.shard, self.rows, self.n_batches, skipped, len(todo), self.sealed)

    def seal(self, ids: Sequence[str]) -> dict:
        """Hash the complete shard and write its ids and sealed marker (atomically, marker last).

        Returns:
            The marker: ``{format, encoder_key, dtype, dim, rows, bytes, sha256, ids_sha256}``.

        Raises:
            ShardMismatchError: batches still missing, or ``len(ids) != rows``.
        """
        if self.sealed:
            return json.loads(self.sealed_path.read_text())
        missing = self.pending()
        if missing:
            raise ShardMismatchError(self.npy, f"{len(missing)} of {self.n_batches} batches not written yet "
                                     f"(first: batch {missing[0]}); cannot seal")
        ids = [str(i) for i in ids]
        if len(ids) != self.rows:
            raise ShardMismatchError(self.ids_path, f"{len(ids)} ids for {self.rows} rows")
        self.close()
        ids_text = json.dumps(ids, ensure_ascii=False)
        write_text(self.ids_path, ids_text)
        marker = {**{k: self._header[k] for k in ("format", "encoder_key", "dtype", "dim", "rows")},
                  "bytes": self.npy.stat().st_size, "sha256": sha256_file(self.npy),
                  "ids_sha256": hashlib.sha256(ids_text.encode("utf-8")).hexdigest()}
        write_json(self.sealed_path, marker)
        self.progress_path.unlink(missing_ok=True)
        self.sealed = True
        return marker


@dataclass(frozen=True)
class ShardFormat:
    """What a shard holds: vectors of ``dim`` columns stored as ``dtype``, by the encoder ``encoder_key``."""

    dim: int
    encoder_key: str
    dtype: str = "float32"


def write_shard(store_dir: str | Path, shard: int, ids: Sequence[str], compute: Callable[[int, int], np.ndarray],
                fmt: ShardFormat, *, batch_size: int = 4096, fsync: bool = True, progress: str | None = None) -> ShardWriteStats:
    """Write (or resume) and seal one shard; ``compute(start, stop)`` gives rows start..stop-1. Returns :class:`ShardWriteStats`."""
    with ShardWriter(store_dir, shard, rows=len(ids), dim=fmt.dim, encoder_key=fmt.encoder_key, dtype=fmt.dtype,
                     batch_size=batch_size, fsync=fsync) as w:
        stats = w.run(compute, progress=progress)
        marker = w.seal(ids)
    return ShardWriteStats(shard, len(ids), stats.batches_total, stats.batches_skipped, stats.batches_computed,
                           True, marker["sha256"])


def sealed_markers(store_dir: Path, n_shards: int, encoder_key: str, fmt: str | None = None) -> list[dict]:
    """The sealed markers of shards ``0..n_shards-1``, checked to be one encoder's, of one dtype and dim (and of format
    ``fmt`` when given): what a manifest gathers.

    Raises:
        MissingShardError: a shard not sealed (saying when it is partly written), or no shard at all.
        StoreError: another format. EncoderKeyMismatchError, ShardMismatchError (another dtype or dim than shard 0's).
    """
    markers: list[dict] = []
    for s in range(n_shards):
        path = store_dir / f"{shard_name(s)}.sealed.json"
        if not path.exists():
            partial = (store_dir / f"{shard_name(s)}.progress").exists()
            raise MissingShardError(path, "shard not sealed" + (" (partly written: rerun its job)" if partial else ""))
        m = json.loads(path.read_text())
        if fmt is not None and m.get("format") != fmt:
            raise StoreError(path, f"format {m.get('format')!r}, expected {fmt!r}")
        if m["encoder_key"] != encoder_key:
            raise EncoderKeyMismatchError(path, f"written by encoder {_short(m['encoder_key'])}, expected "
                                          f"{_short(encoder_key)}")
        first = markers[0] if markers else m
        if (m["dtype"], m["dim"]) != (first["dtype"], first["dim"]):
            raise ShardMismatchError(path, f"{m['dtype']} dim {m['dim']}, but shard 0 has {first['dtype']} "
                                     f"dim {first['dim']}")
        markers.append(m)
    if not markers:
        raise MissingShardError(store_dir, "no sealed shard")
    return markers


def finalize_store(store_dir: str | Path, encoder_key: str, n_shards: int | None = None) -> dict:
    """Gather the sealed shards ``0..n_shards-1`` (all present when None) into ``manifest.json`` (atomic); returns it.

    Raises:
        MissingShardError, EncoderKeyMismatchError, ShardMismatchError (different dtype or dim).
    """
    store_dir = Path(store_dir)
    if n_shards is None:
        found = sorted(int(m.group(1)) for p in store_dir.glob("shard-*.sealed.json")
                       if (m := re.fullmatch(r"shard-(\d+)\.sealed\.json", p.name)))
        n_shards = (max(found) + 1) if found else 0
    markers = sealed_markers(store_dir, n_shards, encoder_key)
    shards = [{"name": shard_name(s), "file": f"{shard_name(s)}.npy", "ids_file": f"{shard_name(s)}.ids.json",
               **{k: m[k] for k in ("rows", "bytes", "sha256", "ids_sha256")}} for s, m in enumerate(markers)]
    first = markers[0]
    manifest = {"format": FORMAT, "encoder_key": encoder_key, "dtype": first["dtype"], "dim": first["dim"],
                "total_rows": sum(s["rows"] for s in shards), "shards": shards}
    write_json(store_dir / MANIFEST, manifest)
    return manifest


def _short(key: str, n: int = 120) -> str:
    return repr(key if len(key) <= n else key[:n] + "...")


# ---------------------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------------------

def read_manifest(store_dir: Path, fmt: str, encoder_key: str, verify: str, finalize: str) -> dict:
    """The ``manifest.json`` of a store of format ``fmt`` written by ``encoder_key`` (``verify`` checked to be ``hash``
    or ``size``; ``finalize`` names the function that writes the manifest, for the error).

    Raises:
        ValueError: another ``verify``. MissingShardError: no manifest. StoreError: another format.
        EncoderKeyMismatchError: another encoder's store.
    """
    if verify not in ("hash", "size"):
        raise ValueError(f"verify must be 'hash' or 'size', got {verify!r}")
    mpath = store_dir / MANIFEST
    if not mpath.exists():
        raise MissingShardError(mpath, f"no manifest: the store was not finalised (run {finalize} after every shard)")
    manifest = json.loads(mpath.read_text())
    if manifest.get("format") != fmt:
        raise StoreError(mpath, f"unknown format {manifest.get('format')!r}, expected {fmt!r}")
    if manifest["encoder_key"] != encoder_key:
        raise EncoderKeyMismatchError(mpath, f"written by encoder {_short(manifest['encoder_key'])}, but "
                                      f"{_short(encoder_key)} was asked for")
    return manifest


def read_shard_ids(path: Path, sha256: str, count: int, unit: str) -> list[str]:
    """A shard's ids file, checked against its manifest entry: the text's ``sha256`` and ``count`` ids (of ``unit``).

    Raises:
        MissingShardError: no file. ShardMismatchError: other bytes or another count.
    """
    if not path.exists():
        raise MissingShardError(path, "id file missing")
    text = path.read_text(encoding="utf-8")
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != sha256:
        raise ShardMismatchError(path, "ids differ from the manifest (sha256)")
    part = json.loads(text)
    if len(part) != count:
        raise ShardMismatchError(path, f"{len(part)} ids for {count} {unit}")
    return part


@dataclass
class VectorStore:
    """An opened store: its manifest, the :class:`ShardedMatrix` of its rows, and (lazily) its ids."""

    path: Path
    manifest: dict
    matrix: ShardedMatrix

    @property
    def encoder_key(self) -> str:
        return self.manifest["encoder_key"]

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    def __len__(self) -> int:
        return int(self.manifest["total_rows"])

    @property
    def ids(self) -> list[str]:
        """Every row's id in row order (read from the shards' id files on first use, checked against the manifest)."""
        if not hasattr(self, "_ids"):
            ids: list[str] = []
            for sh in self.manifest["shards"]:
                ids.extend(read_shard_ids(self.path / sh["ids_file"], sh["ids_sha256"], sh["rows"], "rows"))
            self._ids = ids
        return self._ids

    def check_queries(self, queries: np.ndarray) -> None:
        """Raise :class:`DimensionMismatchError` unless ``queries`` is ``(q, dim)``."""
        check_dimension(np.shape(queries), self.matrix)

    def close(self) -> None:
        self.matrix.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_store(store_dir: str | Path, encoder_key: str, *, verify: str = "hash") -> VectorStore:
    """Open a finalised store for reading, checking it against its manifest.

    Args:
        verify: ``hash`` (default: recompute every shard's sha256) or ``size`` (header and byte size only).

    Returns:
        A :class:`VectorStore` whose ``matrix`` is ``(total_rows, dim)`` of the manifest's dtype.

    Raises:
        MissingShardError: no manifest, or a shard file missing.
        EncoderKeyMismatchError: the manifest's encoder key differs from ``encoder_key``.
        ShardMismatchError: a shard's rows, dim, dtype, byte size or sha256 differ from the manifest.
    """
    store_dir = Path(store_dir)
    manifest = read_manifest(store_dir, FORMAT, encoder_key, verify, finalize="finalize_store")
    paths = []
    for sh in manifest["shards"]:
        p = store_dir / sh["file"]
        if not p.exists():
            raise MissingShardError(p, f"shard {sh['name']} missing ({sh['rows']} rows in the manifest)")
        shape, dtype, _, _ = _npy_header(p)
        if shape != (sh["rows"], manifest["dim"]) or dtype.name != manifest["dtype"]:
            raise ShardMismatchError(p, f"holds {shape} {dtype.name}, manifest says ({sh['rows']}, "
                                     f"{manifest['dim']}) {manifest['dtype']}")
        size = p.stat().st_size
        if size != sh["bytes"]:
            raise ShardMismatchError(p, f"{size} bytes, manifest says {sh['bytes']}")
        if verify == "hash" and (got := sha256_file(p)) != sh["sha256"]:
            raise ShardMismatchError(p, f"sha256 {got[:16]}... differs from the manifest's {sh['sha256'][:16]}...")
        paths.append(p)
    matrix = ShardedMatrix(paths, source=store_dir, names=[sh["name"] for sh in manifest["shards"]])
    return VectorStore(store_dir, manifest, matrix)
