"""mmir.encoders.store: shard writer round trips, manifest checks, each bad input's error, SIGKILL resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mmir.core.errors import DataError, MmirError
from mmir.encoders.store import (
    DimensionMismatchError,
    EncoderKeyMismatchError,
    MissingShardError,
    ShardedMatrix,
    ShardFormat,
    ShardMismatchError,
    ShardWriter,
    finalize_store,
    open_store,
    shard_ranges,
    write_shard,
)

KEY = "enc:test"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _data(n=103, d=6, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _build(path, x, shard_rows=25, dtype="float16", batch_size=7, key=KEY):
    ranges = shard_ranges(len(x), shard_rows)
    for s, (a, b) in enumerate(ranges):
        write_shard(path, s, [f"id{i}" for i in range(a, b)], lambda lo, hi, a=a: x[a + lo : a + hi],
                    ShardFormat(dim=x.shape[1], encoder_key=key, dtype=dtype), batch_size=batch_size)
    return finalize_store(path, key, len(ranges))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_round_trip_and_manifest(tmp_path, dtype):
    x = _data()
    manifest = _build(tmp_path, x, dtype=dtype)
    assert manifest["dtype"] == dtype and manifest["dim"] == 6 and manifest["total_rows"] == 103
    assert [s["rows"] for s in manifest["shards"]] == [25, 25, 25, 25, 3]
    assert all(len(s["sha256"]) == 64 for s in manifest["shards"])
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    with open_store(tmp_path, KEY) as store:
        m = store.matrix
        ref = x.astype(dtype)
        assert m.shape == (103, 6) and m.ndim == 2 and m.dtype == np.dtype(dtype) and len(m) == 103
        np.testing.assert_array_equal(m[:], ref)
        np.testing.assert_array_equal(m[20:80], ref[20:80])  # across three shard borders
        np.testing.assert_array_equal(m[-1], ref[-1])
        np.testing.assert_array_equal(m[[99, 0, 25, 24, 0]], ref[[99, 0, 25, 24, 0]])
        np.testing.assert_array_equal(m[10:60:7], ref[10:60:7])
        np.testing.assert_array_equal(m[30:40, 2], ref[30:40, 2])
        out = np.empty((50, 6), np.float32)
        np.testing.assert_array_equal(m.read_rows(10, 60, out=out), ref[10:60].astype(np.float32))
        assert store.ids == [f"id{i}" for i in range(103)]
        np.testing.assert_array_equal(np.load(m.paths[1], mmap_mode="r"), ref[25:50])  # plain .npy files


def test_rerun_of_a_sealed_shard_computes_nothing(tmp_path):
    x = _data(20)
    st = write_shard(tmp_path, 0, [str(i) for i in range(20)], lambda a, b: x[a:b], ShardFormat(dim=6, encoder_key=KEY),
                     batch_size=6)
    assert (st.batches_total, st.batches_computed, st.batches_skipped) == (4, 4, 0)
    again = write_shard(tmp_path, 0, [str(i) for i in range(20)], lambda a, b: 1 / 0, ShardFormat(dim=6, encoder_key=KEY),
                        batch_size=6)
    assert (again.batches_computed, again.batches_skipped, again.sha256) == (0, 4, st.sha256)


def test_errors_are_mmir_data_errors_naming_the_file(tmp_path):
    x = _data()
    _build(tmp_path, x)
    shard1 = tmp_path / "shard-00001.npy"

    with pytest.raises(EncoderKeyMismatchError, match="another:encoder") as e:
        open_store(tmp_path, "another:encoder")
    assert isinstance(e.value, DataError) and isinstance(e.value, MmirError) and "manifest.json" in str(e.value)

    raw = bytearray(shard1.read_bytes())
    raw[-3] ^= 0xFF  # same size, different bytes
    shard1.write_bytes(bytes(raw))
    open_store(tmp_path, KEY, verify="size")  # the cheap check cannot see it
    with pytest.raises(ShardMismatchError, match="shard-00001.npy.*sha256"):
        open_store(tmp_path, KEY)

    np.save(shard1, x[:24].astype(np.float16))  # one row short
    with pytest.raises(ShardMismatchError, match=r"shard-00001.npy.*\(24, 6\).*manifest says \(25, 6\)"):
        open_store(tmp_path, KEY)

    shard1.unlink()
    with pytest.raises(MissingShardError, match="shard-00001.npy.*missing"):
        open_store(tmp_path, KEY)

    (tmp_path / "manifest.json").unlink()
    with pytest.raises(MissingShardError, match="not finalised"):
        open_store(tmp_path, KEY)


def test_dimension_mismatch_names_the_store(tmp_path):
    from mmir.retrieval.topk import topk_inner_product

    _build(tmp_path, _data())
    with open_store(tmp_path, KEY) as store:
        with pytest.raises(DimensionMismatchError, match=f"{tmp_path}.*dim 6") as e:
            topk_inner_product(np.ones((2, 5), np.float32), store.matrix, 3)
        assert isinstance(e.value, ValueError)
        with pytest.raises(DimensionMismatchError):
            store.check_queries(np.ones((2, 7)))


def test_finalize_and_writer_refuse_inconsistent_shards(tmp_path):
    x = _data(30)
    write_shard(tmp_path, 0, [str(i) for i in range(10)], lambda a, b: x[a:b], ShardFormat(dim=6, encoder_key=KEY))
    with pytest.raises(MissingShardError, match="shard-00001.sealed.json"):
        finalize_store(tmp_path, KEY, n_shards=2)
    with pytest.raises(EncoderKeyMismatchError, match="shard-00000.sealed.json"):
        finalize_store(tmp_path, "other", n_shards=1)
    with pytest.raises(ShardMismatchError, match="sealed with dim=6"):
        ShardWriter(tmp_path, 0, rows=10, dim=8, encoder_key=KEY)
    w = ShardWriter(tmp_path, 1, rows=10, dim=6, encoder_key=KEY, batch_size=4, dtype="float16")  # a float16 store
    w.write_batch(0, x[:4])
    with pytest.raises(ShardMismatchError, match="batch 1 .*needs shape \\(4, 6\\)"):
        w.write_batch(1, x[:3])
    with pytest.raises(ShardMismatchError, match="NaN or inf"):
        w.write_batch(1, np.full((4, 6), 1e6))  # overflows float16
    with pytest.raises(ShardMismatchError, match="2 of 3 batches not written"):
        w.seal([str(i) for i in range(10)])
    w.close()
    with pytest.raises(ShardMismatchError, match="partial shard written with"):
        ShardWriter(tmp_path, 1, rows=10, dim=6, encoder_key=KEY, batch_size=5)
    resumed = ShardWriter(tmp_path, 1, rows=10, dim=6, encoder_key=KEY, batch_size=4, dtype="float16")
    assert resumed.pending() == [1, 2]
    resumed.close()


def test_sharded_matrix_of_plain_npy_files(tmp_path):
    parts = [_data(n, 4, seed=n) for n in (3, 0, 5)]
    paths = []
    for i, p in enumerate(parts):
        paths.append(tmp_path / f"{i}.npy")
        np.save(paths[-1], p)
    m = ShardedMatrix(paths)
    np.testing.assert_array_equal(m[:], np.concatenate(parts))
    np.testing.assert_array_equal(np.asarray(m), np.concatenate(parts))
    np.save(paths[1], np.zeros((2, 5), np.float32))
    with pytest.raises(ShardMismatchError, match="differ in dim"):
        ShardedMatrix(paths)


_WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from mmir.encoders.store import ShardWriter
    path, ready, stop_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    x = np.random.default_rng(0).standard_normal((100, 5)).astype(np.float32)
    w = ShardWriter(path, 0, rows=100, dim=5, encoder_key="k", batch_size=8, fsync=False)
    def compute(a, b):
        if a // 8 == stop_at:
            open(ready, "w").close()
            time.sleep(600)  # killed here, in the middle of the shard
        return x[a:b]
    w.run(compute)
""")


def test_sigkill_mid_shard_then_resume_recomputes_only_missing_batches(tmp_path):
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "killed"), str(ready), "5"], env=env)
    deadline = time.time() + 60
    while not ready.exists():
        assert proc.poll() is None and time.time() < deadline, "writer died or hung before batch 5"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed" / "shard-00000.sealed.json").exists()

    x = np.random.default_rng(0).standard_normal((100, 5)).astype(np.float32)
    calls = []

    def compute(a, b):
        calls.append(a // 8)
        return x[a:b]

    with ShardWriter(tmp_path / "killed", 0, rows=100, dim=5, encoder_key="k", batch_size=8) as w:
        assert w.pending() == list(range(5, 13))
        st = w.run(compute)
        w.seal([str(i) for i in range(100)])
    assert (st.batches_total, st.batches_skipped, st.batches_computed) == (13, 5, 8)
    assert calls == list(range(5, 13))
    write_shard(tmp_path / "clean", 0, [str(i) for i in range(100)], lambda a, b: x[a:b], ShardFormat(dim=5, encoder_key="k"),
                batch_size=8)
    assert (tmp_path / "killed/shard-00000.npy").read_bytes() == (tmp_path / "clean/shard-00000.npy").read_bytes()
    sealed = [json.loads((tmp_path / d / "shard-00000.sealed.json").read_text()) for d in ("killed", "clean")]
    assert sealed[0] == sealed[1]


def test_a_progress_line_cut_by_a_kill_is_ignored(tmp_path):
    x = _data(16, 3)
    w = ShardWriter(tmp_path, 0, rows=16, dim=3, encoder_key=KEY, batch_size=4)
    w.write_batch(0, x[:4])
    w.write_batch(1, x[4:8])
    w.close()
    with open(tmp_path / "shard-00000.progress", "a") as f:
        f.write("2")  # no newline: the process died while recording batch 2
    w = ShardWriter(tmp_path, 0, rows=16, dim=3, encoder_key=KEY, batch_size=4)
    assert w.pending() == [2, 3]
    w.close()
    w = ShardWriter(tmp_path, 0, rows=16, dim=3, encoder_key=KEY, batch_size=4)
    w.write_batch(3, x[12:])
    w.close()
    w = ShardWriter(tmp_path, 0, rows=16, dim=3, encoder_key=KEY, batch_size=4)
    assert w.pending() == [2]
    w.close()
