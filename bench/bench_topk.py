"""Benchmark: exact chunked top-k (mmir.retrieval.topk) over a large float16 corpus.

Default: 1,000,000 x 512 float16 corpus vectors (1 GiB), 1,000 float32 queries, k = 100. Prints queries/s, the
chunk size, the peak memory allocated during the search (tracemalloc sees numpy's allocations) next to the
bound :func:`working_memory_bytes` gives for that chunk size, and the process's peak RSS. The corpus is built in
pieces so its construction does not inflate the peak. A sample of queries is checked against a brute-force
``argsort`` reference.

Usage: ``.venv/bin/python bench/bench_topk.py [--n 1000000] [--d 512] [--q 1000] [--k 100] [--chunk-size 65536]``
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np

from mmir.retrieval.topk import topk_inner_product, working_memory_bytes


def make_corpus(n: int, d: int, seed: int = 0, piece: int = 65536) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, d), dtype=np.float16)
    for s in range(0, n, piece):
        x = rng.standard_normal((min(piece, n - s), d), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[s : s + x.shape[0]] = x
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=512)
    ap.add_argument("--q", type=int, default=1000)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--chunk-size", type=int, default=65536)
    ap.add_argument("--query-block", type=int, default=256)
    ap.add_argument("--check", type=int, default=3, help="queries verified against a brute-force argsort")
    args = ap.parse_args()

    t0 = time.perf_counter()
    corpus = make_corpus(args.n, args.d)
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((args.q, args.d), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    print(f"corpus: {args.n:,} x {args.d} float16 ({corpus.nbytes / 2**30:.2f} GiB), built in "
          f"{time.perf_counter() - t0:.1f} s; queries: {args.q:,} x {args.d} float32; k = {args.k}")
    bound = working_memory_bytes(args.chunk_size, args.d, args.query_block)
    print(f"chunk_size = {args.chunk_size:,} rows, query_block = {args.query_block}; "
          f"working-memory bound = {bound / 2**20:.0f} MiB")

    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    scores, idx = topk_inner_product(queries, corpus, args.k, chunk_size=args.chunk_size,
                                     query_block=args.query_block)
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_extra = peak - base
    out_bytes = scores.nbytes + idx.nbytes
    print(f"search: {dt:.1f} s -> {args.q / dt:.1f} queries/s "
          f"({args.n * args.q / dt / 1e6:.0f} M {args.d}-d inner products/s)")
    print(f"peak memory allocated during the search: {peak_extra / 2**20:.0f} MiB "
          f"(bound {bound / 2**20:.0f} MiB + outputs {out_bytes / 2**20:.1f} MiB; "
          f"corpus itself {corpus.nbytes / 2**20:.0f} MiB, not copied)")
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")
    within = peak_extra <= bound + out_bytes + (16 << 20)
    print(f"memory bounded by the chunk size: {'yes' if within else 'NO'}")

    # correctness on a few queries
    for r in range(min(args.check, args.q)):
        full = (corpus.astype(np.float32) @ queries[r]) if args.n * args.d <= 50_000_000 else None
        if full is None:  # avoid a 2 GiB float32 copy: score in pieces
            full = np.concatenate([corpus[s : s + 65536].astype(np.float32) @ queries[r]
                                   for s in range(0, args.n, 65536)])
        ref = np.argsort(-full, kind="stable")[: args.k]
        assert np.array_equal(ref, idx[r]), f"query {r}: mismatch with brute force"
    print(f"checked {min(args.check, args.q)} queries against brute-force argsort: identical")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
