"""Read side of the vector store: ``(rows_i, d)`` .npy shards seen as one ``(n, d)`` matrix, and the store's errors.

Rows are read with positional reads (``os.preadv``), not a memory mapping, so RSS stays at one chunk.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mmir.core.errors import DataError


class StoreError(DataError):
    """A vector store, its manifest or one of its shards is not what was recorded or asked for (names the file)."""


class ShardMismatchError(StoreError):
    """A shard's bytes, rows, dtype or dim differ from its manifest entry or from its writer's parameters."""


class EncoderKeyMismatchError(StoreError):
    """The store was written by another encoder (its encoder key differs from the one asked for)."""


class DimensionMismatchError(StoreError, ValueError):
    """Query vectors and document vectors have different dimensions (also a ValueError)."""


class MissingShardError(StoreError):
    """A shard (or the manifest) the store needs is absent."""


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, bool, int]:
    """``(shape, dtype, fortran_order, data offset)`` of an .npy file, reading only its header."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ShardMismatchError(path, f"unsupported .npy format version {version}")
        shape, fortran, dtype = read(f)
        return shape, dtype, fortran, f.tell()


def _pread_into(fd: int, buf: np.ndarray, offset: int, where: str) -> None:
    """Fill the C-contiguous ``buf`` with the bytes of ``fd`` at ``offset`` (loops over short reads)."""
    view = memoryview(buf).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise ShardMismatchError(where, f"file ends at byte {offset + done}; expected {len(view) - done} more")
        done += got



class ShardedMatrix:
    """Several ``(rows_i, d)`` .npy shards presented as one ``(n, d)`` read-only matrix, without loading them.

    Supports ``shape``, ``dtype``, ``len()``, ``nbytes``, ``m[i]``, ``m[a:b]`` and ``m[int_array]`` (each a new ndarray).

    Args:
        source: what error messages name (the store directory).
        names: per-shard labels for error messages (default: the file names).
    """

    def __init__(self, paths: Sequence[str | Path], source: str | Path | None = None,
                 names: Sequence[str] | None = None):
        self.paths = [Path(p) for p in paths]
        if not self.paths:
            raise MissingShardError(source or "<none>", "a sharded matrix needs at least one shard")
        self.source = str(source or self.paths[0].parent)
        self.names = list(names or [p.name for p in self.paths])
        rows, dims, dtypes, self._offsets = [], set(), set(), []
        for p in self.paths:
            if not p.exists():
                raise MissingShardError(p, "shard file missing")
            shape, dtype, fortran, offset = _npy_header(p)
            if len(shape) != 2 or fortran:
                raise ShardMismatchError(p, f"expected a C-order 2-D array, got shape {shape}"
                                         f"{' (Fortran order)' if fortran else ''}")
            rows.append(shape[0])
            dims.add(shape[1])
            dtypes.add(dtype)
            self._offsets.append(offset)
        if len(dims) > 1 or len(dtypes) > 1:
            raise ShardMismatchError(self.source, f"shards differ in dim {sorted(dims)} or dtype {sorted(map(str, dtypes))}")
        self.dtype = dtypes.pop()
        self.d = dims.pop()
        self.rows = rows
        self.starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        self.shape = (int(self.starts[-1]), self.d)
        self.ndim = 2
        self._fds: list[int | None] = [None] * len(self.paths)
        self._scratch = np.empty(0, dtype=self.dtype)

    # -- array-like surface ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.d * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"ShardedMatrix(shape={self.shape}, dtype={self.dtype}, shards={len(self.paths)}, source={self.source!r})"

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple):
            rows, cols = key[0], key[1:]
            return self[rows][(slice(None), *cols)] if not np.isscalar(rows) else self[rows][cols]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"row {key} out of range for {self.shape[0]} rows")
            return self.read_rows(i, i + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                return self.read_rows(start, max(start, stop))
            return self.take(np.arange(start, stop, step))
        return self.take(np.asarray(key))

    def __array__(self, dtype=None, copy=None):
        return self.read_rows(0, self.shape[0], dtype=dtype)

    # -- reading --------------------------------------------------------------------------------------------
    def _fd(self, s: int) -> int:
        if self._fds[s] is None:
            self._fds[s] = os.open(self.paths[s], os.O_RDONLY)
        return self._fds[s]

    def close(self) -> None:
        for i, fd in enumerate(self._fds):
            if fd is not None:
                os.close(fd)
                self._fds[i] = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def _read_shard(self, s: int, lo: int, hi: int, out: np.ndarray) -> None:
        """Rows ``lo..hi-1`` of shard ``s`` into ``out`` (shape ``(hi - lo, d)``, any float dtype)."""
        where = f"{self.source}: {self.names[s]}"
        offset = self._offsets[s] + lo * self.d * self.dtype.itemsize
        if out.dtype == self.dtype and out.flags.c_contiguous:
            _pread_into(self._fd(s), out, offset, where)
            return
        need = (hi - lo) * self.d
        if self._scratch.size < need:
            self._scratch = np.empty(need, dtype=self.dtype)
        tmp = self._scratch[:need].reshape(hi - lo, self.d)
        _pread_into(self._fd(s), tmp, offset, where)
        np.copyto(out, tmp, casting="unsafe")

    def read_rows(self, start: int, stop: int, out: np.ndarray | None = None, dtype=None) -> np.ndarray:
        """Rows ``start..stop-1`` as ``(stop - start, d)``, into ``out`` when given (its dtype wins)."""
        if not 0 <= start <= stop <= self.shape[0]:
            raise IndexError(f"rows {start}..{stop} out of range for {self.shape[0]} rows")
        if out is None:
            out = np.empty((stop - start, self.d), dtype=dtype or self.dtype)
        elif out.shape != (stop - start, self.d):
            raise ValueError(f"out has shape {out.shape}, expected {(stop - start, self.d)}")
        s = int(np.searchsorted(self.starts, start, side="right")) - 1
        pos = start
        while pos < stop:
            lo = pos - int(self.starts[s])
            hi = min(stop, int(self.starts[s + 1])) - int(self.starts[s])
            if hi > lo:
                self._read_shard(s, lo, hi, out[pos - start : pos - start + hi - lo])
            pos += hi - lo
            s += 1
        return out

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows at the given indices (any order, repeats allowed; negative counts from the end)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64).ravel()
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        if rows.size and (rows.min() < 0 or rows.max() >= self.shape[0]):
            raise IndexError(f"row index out of range for {self.shape[0]} rows")
        out = np.empty((rows.size, self.d), dtype=self.dtype)
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        breaks = np.flatnonzero(np.diff(srt) != 1) + 1  # runs of consecutive rows: one read each
        for a, b in zip(np.concatenate([[0], breaks]), np.concatenate([breaks, [srt.size]])):
            if b > a:
                out[order[a:b]] = self.read_rows(int(srt[a]), int(srt[b - 1]) + 1)
        return out

    def memmap(self, shard: int) -> np.ndarray:
        """Shard ``shard`` as a read-only ``np.memmap`` (every page it touches counts in RSS while mapped)."""
        return np.load(self.paths[shard], mmap_mode="r")


def check_dimension(query_shape: tuple, matrix: ShardedMatrix) -> None:
    """Raise :class:`DimensionMismatchError` (naming the store) unless queries of ``query_shape`` are ``(q, d)``."""
    if len(query_shape) != 2 or query_shape[1] != matrix.d:
        raise DimensionMismatchError(matrix.source, f"query vectors have shape {tuple(query_shape)}, but the "
                                     f"document vectors have dim {matrix.d}: different encoders?")
