"""The measurement that chose the embedding cache's layout (prototypes, not the implementation).

Writes N x D float32 vectors by content key in batches of 1,024 (one commit each), then reads them all back by
key in shuffled chunks of 32,768, for three layouts: (a) one SQLite row of float32 bytes per vector (the previous
cache), (b) an SQLite index key -> (segment, row) with the vectors appended to a raw segment file (chosen; the
implementation in mmir.encoders.cache reads rows with pread instead of this prototype's memmap, whose
fault-around inflates RSS), (c) a FAISS IndexIDMap2(IndexFlatIP) (durable only by rewriting the whole index).
Run one layout per process, e.g. ``for l in a b c; do python bench/bench_cache_layouts.py $l /tmp/layouts; done``
(N=338291, D=1024 by default: about 4 GB of scratch files).
"""
import hashlib
import os
import resource
import sqlite3
import sys
import time

import numpy as np

N = int(os.environ.get("N", 338291))
D = int(os.environ.get("D", 1024))
B = 1024
ROOT = sys.argv[2]
os.makedirs(ROOT, exist_ok=True)


def keys():
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(N)]


def vecs(s, e):
    rng = np.random.default_rng(s)
    return rng.standard_normal((e - s, D), dtype=np.float32)


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def a_sqlite_rows():
    ks = keys()
    db = sqlite3.connect(f"{ROOT}/a.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE vec (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
    t0 = time.perf_counter()
    for s in range(0, N, B):
        v = vecs(s, min(N, s + B))
        db.executemany("INSERT OR REPLACE INTO vec VALUES (?,?,?)", [(k, D, x.tobytes()) for k, x in zip(ks[s:s + B], v)])
        db.commit()
    tw = time.perf_counter() - t0
    print(f"A write {tw:.1f}s {N / tw:,.0f} vec/s  rss {rss():.0f} MiB")
    rng = np.random.default_rng(0)
    order = rng.permutation(N)
    t0 = time.perf_counter()
    tot = 0.0
    for c in range(0, N, 32768):
        ck = [ks[i] for i in order[c:c + 32768]]
        got = {}
        for j in range(0, len(ck), 900):
            sub = ck[j:j + 900]
            for k, blob in db.execute(f"SELECT key, vec FROM vec WHERE key IN ({','.join('?' * len(sub))})", sub):
                got[k] = np.frombuffer(blob, np.float32)
        m = np.stack([got[k] for k in ck])
        tot += float(m[:, 0].sum())
    tr = time.perf_counter() - t0
    print(f"A read {tr:.1f}s {N / tr:,.0f} vec/s  rss {rss():.0f} MiB  file {os.path.getsize(f'{ROOT}/a.sqlite') / 2**20:.0f} MiB")


def b_segments():
    ks = keys()
    db = sqlite3.connect(f"{ROOT}/b.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE idx (key BLOB PRIMARY KEY, seg INTEGER, row INTEGER) WITHOUT ROWID")
    f = os.open(f"{ROOT}/b.seg0", os.O_RDWR | os.O_CREAT)
    rowb = D * 4
    t0 = time.perf_counter()
    for s in range(0, N, B):
        v = vecs(s, min(N, s + B))
        os.pwrite(f, v.tobytes(), s * rowb)
        db.executemany("INSERT OR IGNORE INTO idx VALUES (?,?,?)",
                       [(bytes.fromhex(k), 0, s + i) for i, k in enumerate(ks[s:s + B])])
        db.commit()
    tw = time.perf_counter() - t0
    os.close(f)
    print(f"B write {tw:.1f}s {N / tw:,.0f} vec/s  rss {rss():.0f} MiB")
    rng = np.random.default_rng(0)
    order = rng.permutation(N)
    t0 = time.perf_counter()
    tot = 0.0
    for c in range(0, N, 32768):
        ck = [bytes.fromhex(ks[i]) for i in order[c:c + 32768]]
        loc = {}
        for j in range(0, len(ck), 30000):
            sub = ck[j:j + 30000]
            for k, _seg, r in db.execute(f"SELECT key, seg, row FROM idx WHERE key IN ({','.join('?' * len(sub))})", sub):
                loc[k] = r
        rows = np.fromiter((loc[k] for k in ck), np.int64, len(ck))
        mm = np.memmap(f"{ROOT}/b.seg0", dtype=np.float32, mode="r", shape=(N, D))
        srt = np.argsort(rows)
        m = np.empty((len(ck), D), np.float32)
        m[srt] = mm[rows[srt]]
        del mm
        tot += float(m[:, 0].sum())
    tr = time.perf_counter() - t0
    print(f"B read {tr:.1f}s {N / tr:,.0f} vec/s  rss {rss():.0f} MiB  index {os.path.getsize(f'{ROOT}/b.sqlite') / 2**20:.0f} MiB")


def c_faiss():
    import faiss
    ks = keys()
    ids = np.array([int(k[:15], 16) for k in ks], dtype=np.int64)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(D))
    t0 = time.perf_counter()
    for s in range(0, N, B):
        index.add_with_ids(vecs(s, min(N, s + B)), ids[s:s + B])
    tadd = time.perf_counter() - t0
    t0 = time.perf_counter()
    faiss.write_index(index, f"{ROOT}/c.faiss")
    tsave = time.perf_counter() - t0
    print(f"C add {tadd:.1f}s, one write_index (= the per-batch durability cost) {tsave:.1f}s; "
          f"x{N // B} batches = {tsave * (N // B) / 2:.0f}s est. amortised; rss {rss():.0f} MiB")
    del index
    t0 = time.perf_counter()
    index = faiss.read_index(f"{ROOT}/c.faiss")
    rng = np.random.default_rng(0)
    order = rng.permutation(N)
    tot = 0.0
    for c in range(0, N, 32768):
        m = index.reconstruct_batch(ids[order[c:c + 32768]])
        tot += float(m[:, 0].sum())
    tr = time.perf_counter() - t0
    print(f"C read (load + reconstruct) {tr:.1f}s {N / tr:,.0f} vec/s  rss {rss():.0f} MiB")


{"a": a_sqlite_rows, "b": b_segments, "c": c_faiss}[sys.argv[1]]()
