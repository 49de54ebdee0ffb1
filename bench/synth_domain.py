"""A synthetic MM-BRIGHT domain at full size, deterministic by seed (for bench/bench_fullsize.py).

Writes, in the MM-BRIGHT layout (``source: local`` reads it):

- ``<out>/documents/<domain>.parquet``: ``id``, ``content``; the real domain's document count (physics:
  338,291), lognormal lengths with the given mean (~2,200 characters), ~0.2 % empty documents, a few documents
  of several MB and one of ``--max-chars`` (25 MB by default: the longest document of MM-BRIGHT, aviation's,
  is 25.2 M characters). Text is Zipf-distributed pseudo-words from a 60,000-word vocabulary, cut from one long
  random word stream at random offsets, so every document differs and term statistics look like text;
- ``<out>/examples/<domain>.parquet``: ``id``, ``query``, ``gold_ids``, ``gold_answers``, ``negative_ids``,
  ``image_paths``: each query is a dozen words sampled from its one or two gold documents (so BM25 finds them),
  with two random negatives.

Vectors, where a model would be too slow: :func:`random_unit_vectors` gives rows ``start..stop-1`` of a fixed
random unit-vector matrix (float32, each block of 4,096 rows seeded by ``(seed, block)``, so any row range is the
same whatever the batch order).

Usage: ``python bench/synth_domain.py --out /work/tmp-bench/synth [--domain physics] [--docs 338291]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

VOCAB = 60_000
STREAM_CHARS = 32 << 20
_BLOCK = 4096

# the real per-domain document counts (../shared/data/mm-bright-stats/domains.tsv)
DOMAIN_DOCS = {"physics": 338_291, "aviation": 203_938, "psychology": 328_520, "biology": 89_435}


def _words(rng: np.random.Generator) -> np.ndarray:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    lens = rng.integers(3, 11, size=VOCAB)
    out = np.empty(VOCAB, dtype=object)
    for i, n in enumerate(lens):
        out[i] = letters[rng.integers(0, 26, size=n)].tobytes().decode()
    return out


def word_stream(seed: int, chars: int = STREAM_CHARS) -> str:
    """A long space-separated stream of Zipf(1.1)-distributed pseudo-words (deterministic by seed)."""
    rng = np.random.default_rng([seed, 1])
    vocab = _words(rng)
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.1
    p /= p.sum()
    ids = rng.choice(VOCAB, size=chars // 6 + 1024, p=p)
    return " ".join(vocab[ids].tolist())[:chars]


def doc_lengths(n: int, mean_chars: float, seed: int, max_chars: int, big: int = 5) -> np.ndarray:
    """Document lengths: lognormal (sigma 1.1) with mean ``mean_chars``, 0.2 % zeros, ``big`` of 2-6 MB, one of
    ``max_chars`` (int64, deterministic)."""
    rng = np.random.default_rng([seed, 2])
    big = big if n >= 100_000 else 0  # a small (test) corpus gets only the one longest document
    pos = rng.choice(n, size=min(n, big + 1), replace=False)
    big_lens = np.append(rng.integers(2_000_000, 6_000_000, size=len(pos) - 1), max_chars)
    sigma = 1.1
    base = max(50.0, (mean_chars * n - big_lens.sum()) / max(1, n - len(pos)))  # the big ones count in the mean
    mu = np.log(base) - sigma**2 / 2
    lens = np.minimum(rng.lognormal(mu, sigma, size=n), 1_000_000).astype(np.int64)
    lens[rng.random(n) < 0.002] = 0
    lens[pos] = big_lens
    return lens


def random_unit_vectors(start: int, stop: int, dim: int, seed: int = 0) -> np.ndarray:
    """Rows ``start..stop-1`` of a fixed ``(n, dim)`` float32 matrix of random unit vectors (row-range stable)."""
    out = np.empty((stop - start, dim), dtype=np.float32)
    for b in range(start // _BLOCK, -(-stop // _BLOCK)):
        lo, hi = b * _BLOCK, (b + 1) * _BLOCK
        x = np.random.default_rng([seed, 3, b]).standard_normal((_BLOCK, dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        a, z = max(lo, start), min(hi, stop)
        out[a - start : z - start] = x[a - lo : z - lo]
    return out


def write_domain(out: str | Path, domain: str = "physics", n_docs: int | None = None, n_queries: int = 100,
                 mean_chars: float = 2200.0, max_chars: int = 25_000_000, seed: int = 0,
                 row_group: int = 8192) -> dict:
    """Write the documents and examples parquet files; returns counts (docs, chars, longest, queries)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_docs = n_docs or DOMAIN_DOCS.get(domain, 100_000)
    out = Path(out)
    (out / "documents").mkdir(parents=True, exist_ok=True)
    (out / "examples").mkdir(parents=True, exist_ok=True)
    stream = word_stream(seed, max(STREAM_CHARS, max_chars + 1024))
    lens = doc_lengths(n_docs, mean_chars, seed, max_chars)
    rng = np.random.default_rng([seed, 4])
    offsets = rng.integers(0, len(stream) - lens - 1)
    offsets[lens >= len(stream) // 2] = 0
    ids = [f"{domain}/{i:08x}_{i % 7}.txt" for i in range(n_docs)]
    qrng = np.random.default_rng([seed, 5])
    candidates = np.flatnonzero((lens > 400) & (lens < 20_000))
    gold = qrng.choice(candidates, size=(n_queries, 2), replace=False)
    gold_n = qrng.integers(1, 3, size=n_queries)
    gold_text: dict[int, str] = {}
    schema = pa.schema([("id", pa.string()), ("content", pa.string())])
    with pq.ParquetWriter(out / "documents" / f"{domain}.parquet", schema) as w:
        for s in range(0, n_docs, row_group):
            e = min(n_docs, s + row_group)
            texts = [stream[o : o + n] for o, n in zip(offsets[s:e].tolist(), lens[s:e].tolist())]
            for g in gold.ravel():
                if s <= g < e:
                    gold_text[int(g)] = texts[g - s]
            w.write_table(pa.table({"id": ids[s:e], "content": texts}, schema=schema))
    rows = []
    for q in range(n_queries):
        golds = [int(g) for g in gold[q, : gold_n[q]]]
        words = " ".join(gold_text[g] for g in golds).split()
        pick = qrng.choice(len(words), size=min(12, len(words)), replace=False)
        neg = qrng.choice(n_docs, size=2, replace=False)
        rows.append({"id": f"{domain}-q{q:04d}", "query": " ".join(words[i] for i in sorted(pick)),
                     "gold_ids": [ids[g] for g in golds], "gold_answers": ["synthetic"],
                     "negative_ids": [ids[int(g)] for g in neg if int(g) not in golds], "image_paths": []})
    pq.write_table(pa.Table.from_pylist(rows), out / "examples" / f"{domain}.parquet")
    return {"docs": n_docs, "chars": int(lens.sum()), "longest": int(lens.max()), "queries": n_queries}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--domain", default="physics")
    ap.add_argument("--docs", type=int, default=None, help="documents (default: the real domain's count)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--mean-chars", type=float, default=2200.0)
    ap.add_argument("--max-chars", type=int, default=25_000_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    info = write_domain(args.out, args.domain, args.docs, args.queries, args.mean_chars, args.max_chars, args.seed)
    print(f"{args.domain}: {info['docs']:,} documents, {info['chars'] / 1e6:,.0f} M characters (mean "
          f"{info['chars'] / info['docs']:,.0f}, longest {info['longest']:,}), {info['queries']} queries, "
          f"written to {args.out} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
