"""Benchmark: full-size MM-BRIGHT storage and search in bounded memory (prints a table and ratios; no timed asserts).

Every step runs in a fresh subprocess and its peak RSS is that process's own (``os.wait4``), so steps never mask
each other. On a synthetic physics-sized domain (bench/synth_domain.py: 338,291 documents, mean ~2,200 chars,
a few of several MB, one of 25 MB):

- (a) ``bm25``: read the documents parquet into a list (as the workflow does), index with mmir's BM25 (bm25s
  backend, Lucene, k1 0.9, b 0.4), score 100 queries and cut each at k: time, peak RSS, and the gold documents
  found in the top 10 (a sanity check); ``bm25_stream``: the same with the corpus streamed from the parquet file;
- (b) ``store_write`` / ``store_search``: 338,291 x 1,024 random unit vectors written as float16 through the shard
  writer (shards of 65,536 rows), then exact top-k (``topk_inner_product`` over the ShardedMatrix) for 100 queries;
- (c) ``faiss_flat``: the same search with ``faiss.IndexFlatIP`` (vectors added from the store as float32), in the
  same run; the ratio ours / FAISS is printed and the result lists compared;
- (d) ``all_write`` / ``all_search``: all 29 domains in one store, 2,499,273 x 1,024 float16 (one shard per domain,
  with the real domains' document counts), written and searched;
- (e) ``cache_*``: the embedding cache (SQLite key index + float32 segment files) writing 338,291 x 1,024 vectors
  in batches of 1,024 and reading them all back by key in chunks, vs. the previous layout (one SQLite row of
  float32 bytes per vector), and ``cache_encode_to``: a warm cache streamed into a store shard.

Targets: peak RSS under 4 GB in every step; exact search within 2x of FAISS flat.

Usage: ``python bench/bench_fullsize.py [--work /work/tmp-bench/full] [--steps a,b,c,d,e] [--k 1000] [--clean]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from synth_domain import random_unit_vectors, write_domain  # noqa: E402

DIM = 1024
N_QUERIES = 100
SHARD_ROWS = 65536
BATCH = 4096
KEY = "bench:random-unit-vectors-1024"
GiB = 1 << 30
RSS_TARGET = 4 * 10**9


def _domains() -> list[tuple[str, int]]:
    tsv = HERE.parents[1] / "shared/data/mm-bright-stats/domains.tsv"
    if not tsv.exists():
        tsv = Path("/work/shared/data/mm-bright-stats/domains.tsv")
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:] if line.strip()]
    return [(r[0], int(r[2])) for r in rows]


def _queries(seed: int = 99) -> np.ndarray:
    return random_unit_vectors(0, N_QUERIES, DIM, seed=seed)


# ---------------------------------------------------------------------------------------------------------
# steps (each runs in its own process and prints one JSON line)
# ---------------------------------------------------------------------------------------------------------

def step_synth(work: Path, args) -> dict:
    if (work / "synth/documents/physics.parquet").exists():
        return {"note": "reused"}
    max_chars = 25_000_000 if not args.docs else min(25_000_000, 100 * args.docs)  # a scaled-down run: smaller
    info = write_domain(work / "synth", "physics", n_docs=args.docs, max_chars=max_chars, seed=0)
    return {"note": f"{info['docs']:,} docs, {info['chars'] / 1e6:,.0f} M chars, longest {info['longest']:,}"}


def step_bm25(work: Path, args) -> dict:
    import pandas as pd

    from mmir.retrieval.bm25 import BM25
    from mmir.retrieval.runs import top_k

    t0 = time.perf_counter()
    docs = pd.read_parquet(work / "synth/documents/physics.parquet")
    ex = pd.read_parquet(work / "synth/examples/physics.parquet")
    ids = docs["id"].tolist()
    texts = docs["content"].tolist()
    del docs
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = BM25(texts, method="lucene", k1=0.9, b=0.4)
    t_index = time.perf_counter() - t0
    del texts
    t0 = time.perf_counter()
    found = 0
    pos = {d: i for i, d in enumerate(ids)}
    for scores, gold in zip(index.iter_scores(ex["query"].tolist()), ex["gold_ids"]):
        idx, _ = top_k(scores, args.k)
        found += len({pos[g] for g in gold} & set(idx[:10].tolist()))
    t_query = time.perf_counter() - t0
    n_gold = int(sum(len(g) for g in ex["gold_ids"]))
    return {"time_s": t_read + t_index + t_query,
            "note": f"read {t_read:.0f} s, index {t_index:.0f} s ({len(ids) / t_index:,.0f} docs/s), "
                    f"{len(ex)} queries {t_query:.1f} s; gold in top-10: {found}/{n_gold}"}


def step_bm25_stream(work: Path, args) -> dict:
    """(a) again, the corpus streamed from the parquet file by record batches instead of held as a list."""
    import pandas as pd
    import pyarrow.parquet as pq

    from mmir.retrieval.bm25 import BM25
    from mmir.retrieval.runs import top_k

    path = work / "synth/documents/physics.parquet"
    ids = pq.read_table(path, columns=["id"])["id"].to_pylist()
    ex = pd.read_parquet(work / "synth/examples/physics.parquet")

    def texts():
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048, columns=["content"]):
            yield from batch.column(0).to_pylist()

    t0 = time.perf_counter()
    index = BM25(texts(), method="lucene", k1=0.9, b=0.4)
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = 0
    pos = {d: i for i, d in enumerate(ids)}
    for scores, gold in zip(index.iter_scores(ex["query"].tolist()), ex["gold_ids"]):
        idx, _ = top_k(scores, args.k)
        found += len({pos[g] for g in gold} & set(idx[:10].tolist()))
    t_query = time.perf_counter() - t0
    n_gold = int(sum(len(g) for g in ex["gold_ids"]))
    return {"time_s": t_index + t_query,
            "note": f"corpus streamed from parquet (2,048-row batches): index {t_index:.0f} s, {len(ex)} queries "
                    f"{t_query:.1f} s; gold in top-10: {found}/{n_gold}"}


def _write_store(path: Path, sizes: list[int], seed: int) -> dict:
    from mmir.encoders.store import ShardFormat, finalize_store, write_shard

    t0 = time.perf_counter()
    start = 0
    computed = skipped = 0
    for s, rows in enumerate(sizes):
        ids = [f"d{start + i}" for i in range(rows)]
        st = write_shard(path, s, ids, lambda lo, hi, a=start: random_unit_vectors(a + lo, a + hi, DIM, seed),
                         ShardFormat(dim=DIM, encoder_key=KEY, dtype="float16"), batch_size=BATCH)
        computed += st.batches_computed
        skipped += st.batches_skipped
        start += rows
    manifest = finalize_store(path, KEY, len(sizes))
    dt = time.perf_counter() - t0
    nbytes = sum(s["bytes"] for s in manifest["shards"])
    return {"time_s": dt, "rows": start, "bytes": nbytes,
            "note": f"{start:,} x {DIM} float16 = {nbytes / GiB:.2f} GiB in {len(sizes)} shards, "
                    f"{nbytes / dt / 2**20:,.0f} MiB/s (incl. random vectors, fsync, sha256); "
                    f"batches computed {computed}, skipped {skipped}"}


def _search_store(path: Path, args, save: Path | None) -> dict:
    from mmir.encoders.store import open_store
    from mmir.retrieval.topk import topk_inner_product

    t0 = time.perf_counter()
    store = open_store(path, KEY, verify="hash")
    t_open = time.perf_counter() - t0
    q = _queries()
    topk_inner_product(q[:2], store.matrix[:1000], 10)  # warm BLAS
    t0 = time.perf_counter()
    s, i = topk_inner_product(q, store.matrix, args.k, chunk_size=args.chunk_size)
    t_search = time.perf_counter() - t0
    if save is not None:
        np.save(save.with_suffix(".idx.npy"), i)
        np.save(save.with_suffix(".scores.npy"), s)
    n = len(store)
    return {"time_s": t_search, "open_s": t_open,
            "note": f"{N_QUERIES} queries, k={args.k}, over {n:,} rows: {t_search:.1f} s "
                    f"({N_QUERIES / t_search:.1f} q/s, {n * N_QUERIES / t_search / 1e6:,.1f} M {DIM}-d dot products/s); "
                    f"open + sha256 check {t_open:.1f} s"}


def step_store_write(work: Path, args) -> dict:
    n = args.docs or 338_291
    return _write_store(work / "store-physics", [min(SHARD_ROWS, n - s) for s in range(0, n, SHARD_ROWS)], seed=1)


def step_store_search(work: Path, args) -> dict:
    return _search_store(work / "store-physics", args, work / "ours")


def step_faiss_flat(work: Path, args) -> dict:
    import faiss

    from mmir.encoders.store import open_store
    from mmir.retrieval.ann import FaissIndex

    store = open_store(work / "store-physics", KEY, verify="size")
    t0 = time.perf_counter()
    index = FaissIndex(store.matrix, "flat")
    t_add = time.perf_counter() - t0
    q = _queries()
    index.search(q[:2], 10)
    t0 = time.perf_counter()
    s, i = index.search(q, args.k)
    t_search = time.perf_counter() - t0
    ours_i = np.load(work / "ours.idx.npy")
    ours_s = np.load(work / "ours.scores.npy")
    same = float((ours_i == i).mean())
    dscore = float(np.abs(ours_s - s).max())
    return {"time_s": t_search, "add_s": t_add,
            "note": f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads: add {t_add:.1f} s "
                    f"(float32 in RAM {store.matrix.shape[0] * DIM * 4 / GiB:.2f} GiB), search {t_search:.1f} s; "
                    f"same index at the same rank as ours: {same:.4%}, max |score diff| {dscore:.1e}"}


def step_all_write(work: Path, args) -> dict:
    sizes = [n for _, n in _domains()]
    if args.docs:  # a scaled-down run
        sizes = [max(1, n * args.docs // 338_291) for n in sizes]
    return _write_store(work / "store-all", sizes, seed=2)


def step_all_search(work: Path, args) -> dict:
    return _search_store(work / "store-all", args, None)


def _cache_keys(n: int) -> list[str]:
    from mmir.encoders.cache import content_key

    return [content_key(KEY, "document", f"doc {i}") for i in range(n)]


class LegacySqliteCache:
    """The previous layout, for comparison: one row per vector (key TEXT, dim, float32 BLOB), WAL, batch commits."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")

    def put_many(self, keys, vecs) -> None:
        self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?, ?)",
                            [(k, vecs.shape[1], v.tobytes()) for k, v in zip(keys, vecs)])
        self.db.commit()

    def get_many(self, keys) -> dict:
        found = {}
        for i in range(0, len(keys), 900):
            chunk = keys[i : i + 900]
            q = f"SELECT key, vec FROM vec WHERE key IN ({','.join('?' * len(chunk))})"
            for k, blob in self.db.execute(q, chunk):
                found[k] = np.frombuffer(blob, dtype=np.float32)
        return found


def _cache_n(args) -> int:
    return args.docs or 338_291


def step_cache_new_write(work: Path, args) -> dict:
    from mmir.encoders.cache import EmbeddingCache

    n, keys = _cache_n(args), _cache_keys(_cache_n(args))
    shutil.rmtree(work / "cache-new", ignore_errors=True)
    t0 = time.perf_counter()
    with EmbeddingCache(work / "cache-new", {"model": "bench"}) as c:
        for s in range(0, n, 1024):
            c.put_matrix(keys[s : s + 1024], random_unit_vectors(s, min(n, s + 1024), DIM, seed=3))
    dt = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in (work / "cache-new").rglob("*") if f.is_file())
    return {"time_s": dt, "note": f"{n:,} x {DIM} float32 in batches of 1,024: {n / dt:,.0f} vec/s; "
                                  f"{size / GiB:.2f} GiB on disk"}


def step_cache_new_read(work: Path, args) -> dict:
    from mmir.encoders.cache import EmbeddingCache

    n, keys = _cache_n(args), _cache_keys(_cache_n(args))
    rng = np.random.default_rng(0)
    shuffled = [keys[i] for i in rng.permutation(n)]
    with EmbeddingCache(work / "cache-new", {"model": "bench"}) as c:
        t0 = time.perf_counter()
        total = 0
        for _vecs, found in c.iter_read(keys, chunk=32768):
            total += int(found.sum())
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _vecs, found in c.iter_read(shuffled, chunk=32768):
            total += int(found.sum())
        t_rnd = time.perf_counter() - t0
        check = random_unit_vectors(1000, 1010, DIM, seed=3)
        ok = np.array_equal(c.get_many(keys[1000:1010])[keys[1005]], check[5])
    return {"time_s": t_seq, "note": f"read {n:,} by key in chunks of 32,768: written order {t_seq:.1f} s "
                                     f"({n / t_seq:,.0f} vec/s), shuffled {t_rnd:.1f} s ({n / t_rnd:,.0f} vec/s); "
                                     f"found {total:,}/{2 * n:,}, values {'equal' if ok else 'DIFFER'}"}


def step_cache_old_write(work: Path, args) -> dict:
    n, keys = _cache_n(args), _cache_keys(_cache_n(args))
    path = work / "cache-old.sqlite"
    for p in work.glob("cache-old.sqlite*"):
        p.unlink()
    c = LegacySqliteCache(path)
    t0 = time.perf_counter()
    for s in range(0, n, 1024):
        c.put_many(keys[s : s + 1024], random_unit_vectors(s, min(n, s + 1024), DIM, seed=3))
    dt = time.perf_counter() - t0
    c.db.close()
    return {"time_s": dt, "note": f"{n:,} x {DIM} float32 in batches of 1,024: {n / dt:,.0f} vec/s; "
                                  f"{path.stat().st_size / GiB:.2f} GiB on disk"}


def step_cache_old_read(work: Path, args) -> dict:
    n, keys = _cache_n(args), _cache_keys(_cache_n(args))
    rng = np.random.default_rng(0)
    shuffled = [keys[i] for i in rng.permutation(n)]
    c = LegacySqliteCache(work / "cache-old.sqlite")
    times = []
    for ks in (keys, shuffled):
        t0 = time.perf_counter()
        for s in range(0, n, 32768):
            got = c.get_many(ks[s : s + 32768])
            np.stack([got[k] for k in ks[s : s + 32768]])
        times.append(time.perf_counter() - t0)
    return {"time_s": times[0], "note": f"read {n:,} by key in chunks of 32,768: written order {times[0]:.1f} s "
                                        f"({n / times[0]:,.0f} vec/s), shuffled {times[1]:.1f} s "
                                        f"({n / times[1]:,.0f} vec/s)"}


def step_cache_encode_to(work: Path, args) -> dict:
    from mmir.encoders.cache import EmbeddingCache
    from mmir.encoders.store import ShardWriter

    n, keys = _cache_n(args), _cache_keys(_cache_n(args))
    shutil.rmtree(work / "store-from-cache", ignore_errors=True)
    calls = []
    t0 = time.perf_counter()
    with EmbeddingCache(work / "cache-new", {"model": "bench"}) as c, \
            ShardWriter(work / "store-from-cache", 0, rows=n, dim=DIM, encoder_key=KEY, batch_size=BATCH) as w:
        st = c.encode_to(w, keys, keys, lambda xs: calls.append(len(xs)) or np.zeros((len(xs), DIM)),
                         ids=[f"d{i}" for i in range(n)])
    dt = time.perf_counter() - t0
    return {"time_s": dt, "note": f"warm cache -> float16 shard of {n:,} rows: {n / dt:,.0f} rows/s; hits "
                                  f"{st['hits']:,}, misses {st['misses']}, model calls {st['model_calls']}"}


STEPS = {
    "synth": ("synthetic physics domain written", step_synth),
    "bm25": ("(a) BM25 index + 100 queries", step_bm25),
    "bm25_stream": ("(a) the same, corpus streamed", step_bm25_stream),
    "store_write": ("(b) store write, 338k x 1024 fp16", step_store_write),
    "store_search": ("(b) exact top-k over the store", step_store_search),
    "faiss_flat": ("(c) faiss.IndexFlatIP, same search", step_faiss_flat),
    "all_write": ("(d) store write, 2.5M x 1024 fp16", step_all_write),
    "all_search": ("(d) exact top-k over 2.5M", step_all_search),
    "cache_new_write": ("(e) cache write, index+segments", step_cache_new_write),
    "cache_new_read": ("(e) cache read by key, index+segments", step_cache_new_read),
    "cache_old_write": ("(e) cache write, row per vector", step_cache_old_write),
    "cache_old_read": ("(e) cache read by key, row per vector", step_cache_old_read),
    "cache_encode_to": ("(e) encode_to: warm cache -> shard", step_cache_encode_to),
}
GROUPS = {"a": ["synth", "bm25", "bm25_stream"], "b": ["store_write", "store_search"], "c": ["faiss_flat"],
          "d": ["all_write", "all_search"],
          "e": ["cache_new_write", "cache_new_read", "cache_old_write", "cache_old_read", "cache_encode_to"]}


def run_step(name: str, args) -> dict:
    """Run one step in a fresh interpreter; returns its JSON result plus wall time and its own peak RSS."""
    cmd = [sys.executable, __file__, "--step", name, "--work", str(args.work), "--k", str(args.k),
           "--chunk-size", str(args.chunk_size)] + (["--docs", str(args.docs)] if args.docs else [])
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    res = json.loads(lines[-1]) if p.returncode == 0 and lines else {"note": f"FAILED (exit {p.returncode})"}
    res.setdefault("time_s", wall)
    res["peak_rss"] = ru.ru_maxrss * 1024
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/work/tmp-bench/full"))
    ap.add_argument("--steps", default="a,b,c,d,e", help="groups a..e or step names, comma-separated")
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--chunk-size", type=int, default=65536)
    ap.add_argument("--docs", type=int, default=None, help="scale the corpus down (physics documents; for a smoke run)")
    ap.add_argument("--clean", action="store_true", help="delete --work at the end")
    ap.add_argument("--step", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step:
        print(json.dumps(STEPS[args.step][1](args.work, args)))
        return 0

    names = [s for g in args.steps.split(",") for s in GROUPS.get(g, [g])]
    if "faiss_flat" in names and "store_search" not in names:
        names = ["store_search" if n == "faiss_flat" else n for n in names] + ["faiss_flat"]
    print(f"bench_fullsize: work dir {args.work}, k = {args.k}, chunk_size = {args.chunk_size}, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}")
    results = {}
    for name in names:
        results[name] = r = run_step(name, args)
        print(f"  {STEPS[name][0]:<40} {r['time_s']:8.1f} s  peak RSS {r['peak_rss'] / 2**20:7,.0f} MiB  {r['note']}",
              flush=True)
    print()
    print("| step | time (s) | peak RSS (MiB) | < 4 GB | details |")
    print("|---|---:|---:|:---:|---|")
    for name, r in results.items():
        ok = "yes" if r["peak_rss"] < RSS_TARGET else "NO"
        print(f"| {STEPS[name][0]} | {r['time_s']:.1f} | {r['peak_rss'] / 2**20:,.0f} | {ok} | {r['note']} |")
    print()
    if "store_search" in results and "faiss_flat" in results:
        ours, fl = results["store_search"]["time_s"], results["faiss_flat"]
        print(f"exact top-k / faiss flat search: {ours / fl['time_s']:.2f}x (target <= 2x); "
              f"/ faiss add + search: {ours / (fl['time_s'] + fl['add_s']):.2f}x")
    if "cache_new_write" in results and "cache_old_write" in results:
        print(f"cache write, row per vector / index+segments: "
              f"{results['cache_old_write']['time_s'] / results['cache_new_write']['time_s']:.2f}x slower")
    if "cache_new_read" in results and "cache_old_read" in results:
        print(f"cache read, row per vector / index+segments: "
              f"{results['cache_old_read']['time_s'] / results['cache_new_read']['time_s']:.2f}x slower")
    worst = max(r["peak_rss"] for r in results.values())
    print(f"highest peak RSS of any step: {worst / 2**20:,.0f} MiB ({'under' if worst < RSS_TARGET else 'OVER'} 4 GB)")
    if args.clean:
        shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
