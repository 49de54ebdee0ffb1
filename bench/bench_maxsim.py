"""Benchmark: exact MaxSim top-k (mmir.retrieval.maxsim) over a physics-sized multi-vector store, vs PyLate.

The store: 338,291 documents (MM-BRIGHT physics) of token vectors, 128-d float16, written to disk shards through
the real writer (:mod:`mmir.encoders.token_store`). Token counts: the synthetic physics domain's lognormal
character lengths (``bench/synth_domain.py``: mean ~2,200 characters) at 4.5 characters a token plus 2 special
tokens, capped at 256 (a ColBERT ``document_length``). Vectors: drawn from a pool of 2^20 unit vectors sharing a
common direction (pairwise cosine ~0.3, as trained ColBERT vectors are anisotropic), deterministic by seed: drawing
46M token vectors one by one would take longer than the search.

Steps (each in its own process, so each peak RSS is its own):
- ``write``: the store (skipped when its manifest exists);
- ``search``: ``--queries`` queries of 32 tokens, exact top-``k`` over the first ``--search-shards`` shards
  (all by default) read with positional reads (``ShardedMatrix``: pages in the page cache, not in RSS); queries/s,
  token rows/s and, for a part of the store, the full-store time extrapolated by token count;
- ``pylate``: on the first ``--slice-docs`` documents (both in memory): mmir's ``topk_maxsim`` against PyLate's own
  exact scoring, ``pylate.scores.colbert_scores`` over padded batches of ``--pylate-batch`` documents with a document
  mask (its einsum makes a queries x docs x query tokens x doc tokens tensor, so the whole store cannot go through
  it at once), then ``torch.topk``; the ratio of times and the agreement of the top-k.

Usage: ``.venv/bin/python bench/bench_maxsim.py [--out /tmp/mmir-bench-maxsim] [--search-shards 3] [--clean]``
"""

from __future__ import annotations

import argparse
import math
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

DOCS, DIM, SHARD_DOCS, CAP, POOL = 338_291, 128, 16_384, 256, 1 << 20


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def lengths(n: int, seed: int = 0) -> np.ndarray:
    from synth_domain import doc_lengths

    chars = doc_lengths(n, 2200.0, seed, max_chars=25_000_000)
    return np.minimum(CAP, 2 + np.ceil(chars / 4.5)).astype(np.int64)


def unit_rows(rng: np.random.Generator, n: int, common: np.ndarray) -> np.ndarray:
    x = rng.standard_normal((n, DIM), dtype=np.float32) + 8.0 * common
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def common_direction() -> np.ndarray:
    c = np.random.default_rng(99).standard_normal(DIM).astype(np.float32)
    return c / np.linalg.norm(c)


def step_write(out: Path, n: int) -> None:
    from mmir.encoders.store import ShardFormat
    from mmir.encoders.token_store import finalize_token_store, write_token_shard

    if (out / "manifest.json").exists():
        print(f"write: {out} exists, kept")
        return
    lens, fmt = lengths(n), ShardFormat(dim=DIM, encoder_key="bench")
    t0 = time.perf_counter()
    rng0, c = np.random.default_rng(5), common_direction()
    pool = np.concatenate([unit_rows(rng0, POOL // 8, c).astype(np.float16) for _ in range(8)])  # in pieces: a small peak
    n_shards = math.ceil(n / SHARD_DOCS)
    for s in range(n_shards):
        a, b = s * SHARD_DOCS, min(n, (s + 1) * SHARD_DOCS)

        def compute(x, y, a=a, s=s):
            rng = np.random.default_rng([s, x])
            rows = pool[rng.integers(0, POOL, size=int(lens[a + x : a + y].sum()))]
            return np.split(rows, np.cumsum(lens[a + x : a + y])[:-1])

        write_token_shard(out, s, [f"d{i}" for i in range(a, b)], compute, fmt, batch_size=2048, fsync=False)
    m = finalize_token_store(out, "bench", n_shards)
    dt = time.perf_counter() - t0
    gb = m["total_tokens"] * DIM * 2 / 1e9
    print(f"write: {m['total_items']:,} documents, {m['total_tokens']:,} tokens (mean {m['total_tokens'] / m['total_items']:.1f}, "
          f"max {int(lens.max())}), {gb:.2f} GB float16 in {n_shards} shards, {dt:.0f}s; peak RSS {rss_mib():.0f} MiB")


def queries(nq: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [unit_rows(rng, 32, common_direction()) for _ in range(nq)]


def step_search(out: Path, nq: int, k: int, shards: int | None, chunk_tokens: int, query_tokens: int) -> None:
    from mmir.encoders.sharded import ShardedMatrix
    from mmir.encoders.token_store import open_token_store
    from mmir.retrieval.maxsim import plan, topk_maxsim, working_memory_bytes

    store = open_token_store(out, "bench", verify="size")
    sh = store.manifest["shards"][: shards or None]
    items, toks = sum(s["items"] for s in sh), sum(s["tokens"] for s in sh)
    tokens = ShardedMatrix([out / s["file"] for s in sh], source=out)
    lens, qs = store.lengths[:items], queries(nq)
    p = plan(lens, [32] * nq, chunk_tokens, query_tokens)
    t0 = time.perf_counter()
    s, i = topk_maxsim(qs, tokens, lens, k, chunk_tokens=chunk_tokens, query_tokens=query_tokens)
    dt = time.perf_counter() - t0
    total = store.manifest["total_tokens"]
    print(f"search: {nq} queries x 32 tokens, top-{k}, over {items:,} documents / {toks:,} tokens ({toks / total:.1%} of "
          f"the store): {dt:.1f}s, {nq / dt:.3f} queries/s, {toks * nq / dt / 1e6:.1f}M doc-token x query scorings/s; "
          f"chunk_tokens {chunk_tokens}, query_tokens {query_tokens}: largest temporary {p.largest_sim} float32, "
          f"working memory <= {working_memory_bytes(p, DIM, k) / 2**20:.0f} MiB; peak RSS {rss_mib():.0f} MiB")
    if toks < total:
        full = dt * total / toks
        print(f"search: full store extrapolated by token count: {full:.0f}s for {nq} queries = {nq / full:.4f} queries/s")
    print(f"search: first query's top 3: {i[0, :3].tolist()} {np.round(s[0, :3], 4).tolist()}")


def step_pylate(out: Path, nq: int, k: int, slice_docs: int, batch: int) -> None:
    import torch
    from pylate.scores import colbert_scores

    from mmir.encoders.token_store import open_token_store
    from mmir.retrieval.maxsim import topk_maxsim

    store = open_token_store(out, "bench", verify="size")
    lens = store.lengths[:slice_docs]
    tok = store.tokens.read_rows(0, int(lens.sum()))  # (tokens, 128) float16, in memory for both
    qs = queries(nq)
    offs = np.concatenate([[0], np.cumsum(lens)])
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    s_ours, i_ours = topk_maxsim(qs, tok, lens, k)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    qt = torch.from_numpy(np.stack(qs))
    parts = []
    for a in range(0, slice_docs, batch):
        b = min(slice_docs, a + batch)
        docs = torch.zeros((b - a, CAP, DIM), dtype=torch.float32)
        mask = torch.zeros((b - a, CAP), dtype=torch.float32)
        for j in range(a, b):
            n = int(lens[j])
            docs[j - a, :n] = torch.from_numpy(tok[offs[j] : offs[j] + n].astype(np.float32))
            mask[j - a, :n] = 1
        parts.append(colbert_scores(qt, docs, documents_mask=mask, backend="torch"))
    scores = torch.cat(parts, dim=1)
    s_py, i_py = torch.topk(scores, k, dim=1)
    t_py = time.perf_counter() - t0
    overlap = np.mean([len(set(a) & set(b)) / k for a, b in zip(i_ours.tolist(), i_py.numpy().tolist())])
    diff = float(np.abs(np.take_along_axis(scores.numpy(), i_ours, 1) - s_ours).max())
    print(f"pylate: {slice_docs:,} documents ({int(lens.sum()):,} tokens) x {nq} queries, top-{k}: mmir topk_maxsim {t_ours:.2f}s, "
          f"pylate colbert_scores (padded batches of {batch}) + topk {t_py:.2f}s: ratio {t_py / t_ours:.2f}x; top-{k} overlap "
          f"{overlap:.4f}, max |score diff| {diff:.2e}; peak RSS {rss_mib():.0f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/mmir-bench-maxsim"))
    ap.add_argument("--step", choices=["all", "write", "search", "pylate"], default="all")
    ap.add_argument("--docs", type=int, default=DOCS)
    ap.add_argument("--queries", type=int, default=32)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--search-shards", type=int, default=None, help="search the first N shards of 16,384 documents (default all)")
    ap.add_argument("--chunk-tokens", type=int, default=16_384)
    ap.add_argument("--query-tokens", type=int, default=1_024)
    ap.add_argument("--slice-docs", type=int, default=4_096)
    ap.add_argument("--pylate-batch", type=int, default=128)
    ap.add_argument("--clean", action="store_true", help="delete the store afterwards")
    a = ap.parse_args()
    if a.step == "write":
        step_write(a.out, a.docs)
    elif a.step == "search":
        step_search(a.out, a.queries, a.k, a.search_shards, a.chunk_tokens, a.query_tokens)
    elif a.step == "pylate":
        step_pylate(a.out, a.queries, a.k, a.slice_docs, a.pylate_batch)
    else:
        base = [sys.executable, __file__, "--out", str(a.out), "--docs", str(a.docs), "--queries", str(a.queries), "--k", str(a.k),
                "--chunk-tokens", str(a.chunk_tokens), "--query-tokens", str(a.query_tokens), "--slice-docs", str(a.slice_docs),
                "--pylate-batch", str(a.pylate_batch)] + (["--search-shards", str(a.search_shards)] if a.search_shards else [])
        for step in ("write", "search", "pylate"):
            subprocess.run([*base, "--step", step], check=True)
        if a.clean:
            shutil.rmtree(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
