"""Multi-vector (late-interaction) store: every item's token vectors, one after another, in sharded .npy files.

Layout of a store directory (the vector store's layout, :mod:`mmir.encoders.store`, with token rows)::

    manifest.json              format, encoder key, dtype, dim, items, tokens, per shard: items, tokens, sha256s
    shard-00000.npy            (tokens, dim) float32 (default) or float16: the shard's items' token vectors in item order
    shard-00000.lengths.npy    (items,) int64: tokens of each item (>= 1); an item's offset is the sum of those before it
    shard-00000.ids.json       the ids of the shard's items, in item order
    shard-00000.sealed.json    written last, atomically, when the shard is complete
    shard-00000.progress       only while a shard is being written: a JSON header line, then one finished batch a line
                               (``{"batch": b, "lengths": [...]}``), recorded after the batch's bytes

Token counts are unknown before encoding, so a shard is appended batch by batch in item order: the .npy header has
a fixed size and gets its final shape when the shard is sealed. A kill loses at most the batch being written: on
resume the file is cut back to the tokens of the recorded batches.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmir.core.io import atomic_path, write_json, write_text
from mmir.encoders.sharded import MissingShardError, ShardedMatrix, ShardMismatchError, _npy_header
from mmir.encoders.store import (
    BatchedShardWriter,
    ShardFormat,
    read_manifest,
    read_shard_ids,
    sealed_markers,
    sha256_file,
    shard_name,
)

FORMAT = "mmir-multivector-store/1"
MANIFEST = "manifest.json"
#: bytes of the fixed .npy header (magic, length, dict, padding): room for any shape, a multiple of 64
HEADER_BYTES = 128


class TokenCountMismatchError(ShardMismatchError):
    """A shard's token rows differ from the sum of its items' lengths, or from its manifest entry."""


def _header(rows: int, dim: int, dtype: np.dtype) -> bytes:
    body = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (rows, dim)}).encode("latin1")
    pad = HEADER_BYTES - 10 - len(body) - 1
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", HEADER_BYTES - 10) + body + b" " * pad + b"\n"


def _sync(fd: int) -> None:
    os.fdatasync(fd) if hasattr(os, "fdatasync") else os.fsync(fd)


class TokenShardWriter(BatchedShardWriter):
    """Writes one shard of a multi-vector store batch by batch, in item order, resumable after a kill.

    Args:
        items: items in the shard; ``batch_size`` items a batch (the unit of work, resumption and loss).
        dim, encoder_key, dtype: as :class:`mmir.encoders.store.ShardWriter`.

    Raises:
        ShardMismatchError: reopened over a shard written with different parameters.
    """

    def __init__(self, store_dir: str | Path, shard: int, *, items: int, dim: int, encoder_key: str,
                 dtype: str = "float32", batch_size: int = 64, fsync: bool = True):
        super().__init__(store_dir, shard, unit="items", size=items, dim=dim, dtype=dtype, batch_size=batch_size, fsync=fsync)
        self.items, self.lengths_path = items, self.dir / f"{shard_name(shard)}.lengths.npy"
        self._header = {"format": FORMAT, "encoder_key": encoder_key, "dtype": self.dtype.name, "dim": dim,
                        "items": items, "batch_size": batch_size}
        self.lengths: list[int] = []  # of the batches written, in order
        self.sealed = self.sealed_path.exists()
        if self.sealed:
            self._check_sealed(("encoder_key", "dtype", "dim", "items"))
            self.done = self.n_batches
        else:
            self._open()

    def _open(self) -> None:
        self.done = 0
        if self.progress_path.exists() and self.npy.exists():
            for line in self._progress_records():
                rec = json.loads(line)
                if rec["batch"] != self.done:
                    raise ShardMismatchError(self.progress_path, f"batch {rec['batch']} recorded after {self.done} batches")
                self.lengths.extend(int(n) for n in rec["lengths"])
                self.done += 1
            self._fd = os.open(self.npy, os.O_RDWR)
            os.ftruncate(self._fd, self._end())  # drop the bytes of a batch written but not recorded
        else:
            write_text(self.progress_path, json.dumps(self._header, sort_keys=True) + "\n")
            self._fd = os.open(self.npy, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.pwrite(self._fd, _header(0, self.dim, self.dtype), 0)

    def _end(self) -> int:
        return HEADER_BYTES + sum(self.lengths) * self.dim * self.dtype.itemsize

    def write_batch(self, batch: int, vectors: Sequence[np.ndarray]) -> None:
        """Append batch ``batch`` (the next one): one ``(tokens_i, dim)`` float array per item, ``tokens_i >= 1``.

        Raises:
            ShardMismatchError: out of order, wrong count or shape, an item without tokens, or a non-finite value.
        """
        if self.sealed or batch != self.done:
            raise ShardMismatchError(self.npy, f"batch {batch} written, but the next batch is {self.done}"
                                     f"{' (sealed)' if self.sealed else ''}")
        start, stop = self.batch_range(batch)
        if len(vectors) != stop - start:
            raise ShardMismatchError(self.npy, f"batch {batch} (items {start}..{stop - 1}) needs {stop - start} "
                                     f"token matrices, got {len(vectors)}")
        lengths = []
        for i, v in enumerate(vectors):
            shape = np.shape(v)
            if len(shape) != 2 or shape[1] != self.dim or shape[0] < 1:
                raise ShardMismatchError(self.npy, f"item {start + i} of batch {batch}: token matrix of shape {shape}, "
                                         f"expected (tokens >= 1, {self.dim})")
            lengths.append(shape[0])
        with np.errstate(over="ignore"):
            arr = np.ascontiguousarray(np.concatenate(vectors), dtype=self.dtype)
        if not np.isfinite(arr).all():
            raise ShardMismatchError(self.npy, f"batch {batch} (items {start}..{stop - 1}) has NaN or inf values "
                                     f"after the cast to {self.dtype}")
        data, offset, done = memoryview(arr).cast("B"), self._end(), 0
        while done < len(data):
            done += os.pwrite(self._fd, data[done:], offset + done)
        if self.fsync:
            _sync(self._fd)
        with open(self.progress_path, "a") as f:  # recorded only after the bytes are written
            f.write(json.dumps({"batch": batch, "lengths": lengths}) + "\n")
        self.lengths.extend(lengths)
        self.done += 1

    def run(self, compute: Callable[[int, int], Sequence[np.ndarray]]) -> tuple[int, int]:
        """Compute and append every pending batch (``compute(start, stop)``: the token matrices of items
        ``start..stop-1``). Returns ``(batches skipped, batches computed)``."""
        skipped = self.done
        for b in range(self.done, self.n_batches):
            self.write_batch(b, compute(*self.batch_range(b)))
        return skipped, self.n_batches - skipped

    def seal(self, ids: Sequence[str]) -> dict:
        """Write the final header, the lengths and ids, then the sealed marker (last, atomically); returns it.

        Raises:
            ShardMismatchError: batches missing, or ``len(ids) != items``.
        """
        if self.sealed:
            return json.loads(self.sealed_path.read_text())
        if self.done < self.n_batches:
            raise ShardMismatchError(self.npy, f"{self.n_batches - self.done} of {self.n_batches} batches not written "
                                     f"yet (first: batch {self.done}); cannot seal")
        ids = [str(i) for i in ids]
        if len(ids) != self.items:
            raise ShardMismatchError(self.ids_path, f"{len(ids)} ids for {self.items} items")
        tokens = sum(self.lengths)
        os.pwrite(self._fd, _header(tokens, self.dim, self.dtype), 0)
        _sync(self._fd)
        self.close()
        with atomic_path(self.lengths_path) as tmp, open(tmp, "wb") as f:  # a file object: np.save would add .npy to a name
            np.save(f, np.asarray(self.lengths, dtype=np.int64), allow_pickle=False)
        ids_text = json.dumps(ids, ensure_ascii=False)
        write_text(self.ids_path, ids_text)
        marker = {**{k: self._header[k] for k in ("format", "encoder_key", "dtype", "dim", "items")}, "tokens": tokens,
                  "bytes": self.npy.stat().st_size, "sha256": sha256_file(self.npy),
                  "ids_sha256": hashlib.sha256(ids_text.encode("utf-8")).hexdigest(),
                  "lengths_sha256": sha256_file(self.lengths_path)}
        write_json(self.sealed_path, marker)
        self.progress_path.unlink(missing_ok=True)
        self.sealed = True
        return marker


def write_token_shard(store_dir: str | Path, shard: int, ids: Sequence[str], compute: Callable[[int, int], Sequence[np.ndarray]],
                      fmt: ShardFormat, *, batch_size: int = 64, fsync: bool = True) -> dict:
    """Write (or resume) and seal one shard; returns ``{items, tokens, batches_total, batches_skipped,
    batches_computed, sha256}``."""
    with TokenShardWriter(store_dir, shard, items=len(ids), dim=fmt.dim, encoder_key=fmt.encoder_key, dtype=fmt.dtype,
                          batch_size=batch_size, fsync=fsync) as w:
        skipped, computed = w.run(compute)
        marker = w.seal(ids)
    return {"items": len(ids), "tokens": marker["tokens"], "batches_total": w.n_batches, "batches_skipped": skipped,
            "batches_computed": computed, "sha256": marker["sha256"]}


def finalize_token_store(store_dir: str | Path, encoder_key: str, n_shards: int) -> dict:
    """Gather sealed shards ``0..n_shards-1`` into ``manifest.json`` (atomic); returns it.

    Raises:
        MissingShardError, EncoderKeyMismatchError, ShardMismatchError (another dtype or dim).
    """
    store_dir = Path(store_dir)
    markers = sealed_markers(store_dir, n_shards, encoder_key, FORMAT)
    shards = [{"name": (name := shard_name(s)), "file": f"{name}.npy", "ids_file": f"{name}.ids.json",
               "lengths_file": f"{name}.lengths.npy",
               **{k: m[k] for k in ("items", "tokens", "bytes", "sha256", "ids_sha256", "lengths_sha256")}}
              for s, m in enumerate(markers)]
    first = markers[0]
    manifest = {"format": FORMAT, "encoder_key": encoder_key, "dtype": first["dtype"], "dim": first["dim"],
                "total_items": sum(s["items"] for s in shards), "total_tokens": sum(s["tokens"] for s in shards),
                "shards": shards}
    write_json(store_dir / MANIFEST, manifest)
    return manifest


@dataclass
class TokenStore:
    """An opened multi-vector store: ``tokens`` ``(total_tokens, dim)``, per item ``lengths`` and ``offsets``
    (int64 ``(items,)``, item ``i`` is rows ``offsets[i]..offsets[i] + lengths[i] - 1``) and ``ids``."""

    path: Path
    manifest: dict
    tokens: ShardedMatrix
    lengths: np.ndarray
    ids: list[str]

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    def __len__(self) -> int:
        return len(self.lengths)

    def item(self, i: int) -> np.ndarray:
        """Item ``i``'s ``(lengths[i], dim)`` token matrix (store dtype)."""
        o = int(self.offsets[i])
        return self.tokens.read_rows(o, o + int(self.lengths[i]))

    def close(self) -> None:
        self.tokens.close()


def open_token_store(store_dir: str | Path, encoder_key: str, *, verify: str = "hash") -> TokenStore:
    """Open a finalised multi-vector store, checked against its manifest (``verify``: ``hash`` or ``size``).

    Raises:
        MissingShardError: no manifest or a file missing. EncoderKeyMismatchError: another encoder's store.
        TokenCountMismatchError: a shard whose token rows, lengths or item count differ from the manifest (names
            the shard and both counts). ShardMismatchError: bytes, dim, dtype or sha256 differ.
    """
    store_dir = Path(store_dir)
    manifest = read_manifest(store_dir, FORMAT, encoder_key, verify, finalize="finalize_token_store")
    paths, lengths, ids = [], [], []
    for sh in manifest["shards"]:
        p, lp, ip = store_dir / sh["file"], store_dir / sh["lengths_file"], store_dir / sh["ids_file"]
        for f in (p, lp, ip):
            if not f.exists():
                raise MissingShardError(f, f"file of shard {sh['name']} missing")
        shape, dtype, _, _ = _npy_header(p)
        if shape[1:] != (manifest["dim"],) or dtype.name != manifest["dtype"]:
            raise ShardMismatchError(p, f"holds {shape} {dtype.name}, manifest says dim {manifest['dim']} {manifest['dtype']}")
        lens = np.load(lp, allow_pickle=False)
        if shape[0] != sh["tokens"] or int(lens.sum()) != sh["tokens"] or len(lens) != sh["items"] or (lens < 1).any():
            raise TokenCountMismatchError(p, f"{shape[0]} token rows and {len(lens)} item lengths summing to "
                                          f"{int(lens.sum())} (min {int(lens.min()) if len(lens) else 0}); the manifest "
                                          f"says {sh['items']} items of {sh['tokens']} tokens")
        if (size := p.stat().st_size) != sh["bytes"]:
            raise ShardMismatchError(p, f"{size} bytes, manifest says {sh['bytes']}")
        if verify == "hash":
            for f, key in ((p, "sha256"), (lp, "lengths_sha256")):
                if sha256_file(f) != sh[key]:
                    raise ShardMismatchError(f, f"sha256 differs from the manifest's {key}")
        ids.extend(read_shard_ids(ip, sh["ids_sha256"], sh["items"], "items"))
        paths.append(p)
        lengths.append(lens.astype(np.int64))
    tokens = ShardedMatrix(paths, source=store_dir, names=[sh["name"] for sh in manifest["shards"]])
    return TokenStore(store_dir, manifest, tokens, np.concatenate(lengths), ids)

