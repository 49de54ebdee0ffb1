"""Benchmark (a): BM25 queries per second, ours (bm25s + deterministic top-k) vs rank_bm25 BM25Okapi.

Corpus: the Vaswani collection (11,429 abstracts) from ../shared/data/vaswani/trec; queries: its 93 topics
repeated to at least 10,000. rank_bm25 scores every document in Python for each query, so it is timed on a
sample of queries (its per-query cost does not depend on position in the stream) and its rate compared.
Both use the same tokens. Top-10 overlap is measured on the 93 distinct topics (different BM25 variants:
Lucene vs Okapi, so overlap, not identity, is expected). Target: ours >= 100x faster.

    python bench/bench_bm25.py [--data ../shared/data/vaswani/trec] [--queries 10000] [--ref-sample 200]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from mmir.data.trec import read_trec_documents, read_trec_topics
from mmir.retrieval.bm25 import BM25
from mmir.retrieval.topk import topk_scores


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/vaswani/trec"))
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--ref-sample", type=int, default=200)
    args = ap.parse_args()
    from rank_bm25 import BM25Okapi

    docs = [t for _, t in read_trec_documents(Path(args.data) / "corpus")]
    topics = [t for _, t in read_trec_topics(Path(args.data) / "query-text.trec")]
    stream = (topics * (args.queries // len(topics) + 1))[: max(args.queries, len(topics))]
    print(f"corpus: {len(docs)} documents; query stream: {len(stream)} ({len(topics)} topics repeated)")

    ours = BM25(docs, method="lucene", k1=0.9, b=0.4)
    ref = BM25Okapi(ours.tokenize(docs), k1=0.9, b=0.4)

    t0 = time.perf_counter()
    ours_top = [topk_scores(s, 10)[1] for s in ours.iter_scores(stream)]
    t_ours = time.perf_counter() - t0
    qps_ours = len(stream) / t_ours

    sample = stream[: args.ref_sample]
    sample_tokens = ours.tokenize(sample)
    t0 = time.perf_counter()
    ref_top = [topk_scores(ref.get_scores(toks), 10)[1] for toks in sample_tokens]
    t_ref = time.perf_counter() - t0
    qps_ref = len(sample) / t_ref

    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ours_top[: len(topics)], ref_top[: len(topics)])])
    print(f"ours (bm25s lucene + top-k): {len(stream)} queries in {t_ours:.2f}s = {qps_ours:,.0f} q/s")
    print(f"rank_bm25 BM25Okapi:         {len(sample)} queries in {t_ref:.2f}s = {qps_ref:,.1f} q/s")
    print(f"top-10 overlap (first {min(len(topics), len(sample))} topics): {overlap:.3f}")
    print(f"speed-up ours / rank_bm25: {qps_ours / qps_ref:.1f}x (target >= 100x)")


if __name__ == "__main__":
    main()
