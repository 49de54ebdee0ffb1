"""mmir.encoders.cache: hits/misses as before, the previous one-row-per-vector databases still read, a killed
encode keeps its finished batches, two processes writing one cache, encode_to a store shard."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mmir.core.errors import DataError
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.encoders.store import ShardWriter, finalize_store, open_store

SPEC = {"model": "toy", "revision": "1"}
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _vec(text: str, d: int = 4) -> np.ndarray:
    """A deterministic vector per text (what a real encoder would return)."""
    seed = int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") ^ len(text)
    return np.random.default_rng(seed).standard_normal(d).astype(np.float32)


class Counting:
    def __init__(self):
        self.calls = []

    def __call__(self, items):
        self.calls.append(list(items))
        return np.stack([_vec(t) for t in items])


def _keys(items):
    return [content_key(encoder_key(SPEC), "text", t) for t in items]


def test_encode_hits_misses_and_reuse(tmp_path):
    items = ["a", "b", "a", "c", "d", "b"]
    fn = Counting()
    with EmbeddingCache(tmp_path, SPEC) as cache:
        m, st = cache.encode(items, _keys(items), fn, batch_size=2)
        assert st == {"hits": 0, "misses": 4, "model_calls": 2}
        assert m.dtype == np.float32 and m.shape == (6, 4)
        np.testing.assert_array_equal(m, np.stack([_vec(t) for t in items]))
        m2, st2 = cache.encode(items + ["e"], _keys(items + ["e"]), fn, batch_size=2)
        assert st2 == {"hits": 4, "misses": 1, "model_calls": 1} and fn.calls[-1] == ["e"]
        np.testing.assert_array_equal(m2[:6], m)
        assert len(cache) == 5 and cache.dim == 4
        got = cache.get_many(_keys(["c", "zzz"]))
        assert list(got) == _keys(["c"]) and np.array_equal(got[_keys(["c"])[0]], _vec("c"))
        assert cache.encode([], [], fn)[0].shape == (0, 0)
        with pytest.raises(DataError, match="dim 4"):
            cache.put_matrix(_keys(["x"]), np.ones((1, 3)))
    with EmbeddingCache(tmp_path, SPEC) as again:  # a later run
        _, st3 = again.encode(items, _keys(items), fn)
        assert st3 == {"hits": 4, "misses": 0, "model_calls": 0}
    with EmbeddingCache(tmp_path, {**SPEC, "revision": "2"}) as other:  # another encoder: nothing shared
        assert len(other) == 0


def test_previous_layout_is_still_read(tmp_path):
    """A database written by the one-row-per-vector cache: its vectors are hits, new ones go to segments."""
    with EmbeddingCache(tmp_path, SPEC) as cache:
        path = cache.path
    path.unlink()
    for p in tmp_path.glob("*.sqlite-*"):
        p.unlink()
    db = sqlite3.connect(path)  # exactly what the previous EmbeddingCache wrote
    db.execute("CREATE TABLE vec (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
    db.execute("CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT)")
    db.executemany("INSERT INTO vec VALUES (?, ?, ?)", [(k, 4, _vec(t).tobytes()) for k, t in zip(_keys("ab"), "ab")])
    db.commit()
    db.close()
    fn = Counting()
    with EmbeddingCache(tmp_path, SPEC) as cache:
        assert cache.dim == 4 and len(cache) == 2
        m, st = cache.encode(list("abc"), _keys("abc"), fn)
        assert st == {"hits": 2, "misses": 1, "model_calls": 1} and fn.calls == [["c"]]
        np.testing.assert_array_equal(m, np.stack([_vec(t) for t in "abc"]))
        assert len(cache) == 3


_KILLED = textwrap.dedent("""
    import sys, time
    import numpy as np
    from mmir.encoders.cache import EmbeddingCache, content_key
    root, ready = sys.argv[1], sys.argv[2]
    items = [f"t{i}" for i in range(40)]
    keys = [content_key("k", "text", t) for t in items]
    calls = 0
    def fn(batch):
        global calls
        calls += 1
        if calls == 4:
            open(ready, "w").close()
            time.sleep(600)  # killed while the 4th batch is being encoded
        return np.ones((len(batch), 3), np.float32) * np.array([[float(t[1:])] for t in batch], np.float32)
    EmbeddingCache(root, {"model": "m"}).encode(items, keys, fn, batch_size=5)
""")


def test_a_killed_encode_keeps_every_finished_batch(tmp_path):
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(tmp_path), str(ready)], env=env)
    deadline = time.time() + 60
    while not ready.exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    items = [f"t{i}" for i in range(40)]
    keys = [content_key("k", "text", t) for t in items]
    with EmbeddingCache(tmp_path, {"model": "m"}) as cache:
        assert len(cache) == 15
        m, st = cache.encode(items, keys, lambda b: np.ones((len(b), 3), np.float32) * np.array(
            [[float(t[1:])] for t in b], np.float32), batch_size=5)
    assert st == {"hits": 15, "misses": 25, "model_calls": 5}
    np.testing.assert_array_equal(m[:, 0], np.arange(40, dtype=np.float32))


_PARALLEL = textwrap.dedent("""
    import sys
    import numpy as np
    from mmir.encoders.cache import EmbeddingCache, content_key
    root, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with EmbeddingCache(root, {"model": "m"}) as c:
        for s in range(lo, hi, 7):  # many small committed batches, interleaving with the other process
            idx = list(range(s, min(hi, s + 7)))
            c.put_matrix([content_key("k", "text", str(i)) for i in idx],
                         np.stack([np.full(16, i, np.float32) for i in idx]))
""")


def test_two_processes_writing_one_cache(tmp_path, monkeypatch):
    monkeypatch.setattr("mmir.encoders.cache.SEGMENT_BYTES", 64 * 100)  # force several segment files
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with EmbeddingCache(tmp_path, {"model": "m"}):
        pass
    script = _PARALLEL.replace("import numpy as np", "import numpy as np\nimport mmir.encoders.cache as C\n"
                               "C.SEGMENT_BYTES = 64 * 100")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), lo, hi], env=env)
             for lo, hi in (("0", "600"), ("300", "900"))]  # overlapping keys 300..599
    assert [p.wait(120) for p in procs] == [0, 0]
    keys = [content_key("k", "text", str(i)) for i in range(900)]
    with EmbeddingCache(tmp_path, {"model": "m"}) as cache:
        assert len(cache) == 900  # each key once
        out = np.zeros((900, 16), np.float32)
        assert cache.read_into(keys, out).all()
        np.testing.assert_array_equal(out, np.repeat(np.arange(900, dtype=np.float32)[:, None], 16, 1))
        assert len(list(cache.seg_dir.glob("*.f32"))) >= 9
        rows = cache._db.execute("SELECT seg, row FROM idx").fetchall()
        assert len(set(rows)) == 900  # no two keys share a row


def test_encode_to_streams_into_a_shard_and_resumes(tmp_path):
    items = [f"doc {i % 30}" for i in range(50)]
    keys = _keys(items)
    ids = [f"d{i}" for i in range(50)]
    fn = Counting()
    with EmbeddingCache(tmp_path / "cache", SPEC) as cache:
        cache.encode(items[:10], keys[:10], fn)  # 10 distinct texts already cached
        with ShardWriter(tmp_path / "store", 0, rows=50, dim=4, encoder_key="toy", batch_size=16) as w:
            st = cache.encode_to(w, items, keys, fn, ids=ids, model_batch_size=8, seal=False)
            assert (st["hits"], st["misses"], st["batches_computed"]) == (30, 20, 4)
            assert w.pending() == []
        with ShardWriter(tmp_path / "store", 0, rows=50, dim=4, encoder_key="toy", batch_size=16) as w:
            st2 = cache.encode_to(w, items, keys, fn, ids=ids)
            assert (st2["batches_skipped"], st2["batches_computed"], st2["model_calls"]) == (4, 0, 0)
            assert st2["sha256"]
        expected, _ = cache.encode(items, keys, fn)
    assert sum(len(c) for c in fn.calls[1:]) == 20  # each missing distinct text encoded once
    finalize_store(tmp_path / "store", "toy")
    with open_store(tmp_path / "store", "toy") as store:
        np.testing.assert_array_equal(store.matrix[:], expected)  # float32, the default store
        assert store.ids == ids
