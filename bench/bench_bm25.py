"""Benchmark (a): BM25 queries per second on the path ``retrieve`` runs, against bm25s and rank_bm25 in the same run.

Timed, per corpus, on the same query stream and tokens (bm25s tokenisation, English stopwords, PyStemmer english):

- **mmir**: :class:`mmir.retrieval.retrievers.BM25Retriever` ``search(queries, k)`` as
  :func:`mmir.workflow.retrieval_steps.retrieve` calls it (the default ``bm25`` system: bm25s backend, lucene,
  k1 0.9, b 0.4; query tokenisation, scoring and the deterministic top-k, ties by corpus index, included);
- **bm25s**: ``bm25s.tokenize`` of the queries + ``bm25s.BM25.retrieve(k=k, n_threads=1)`` on an index that
  ``bm25s.BM25(method="lucene", k1=0.9, b=0.4).index`` built from the same tokens (its own top-k), once with its
  numpy backend (``backend_selection="numpy"``) and, when numba is installed, once with its numba backend (its
  jitted scoring and heap top-k, serial with one thread); the ratio is taken to the faster of the two;
- **rank_bm25**: ``BM25Okapi(k1=0.9, b=0.4).get_scores`` + ``np.argpartition`` top-k on a sample of the queries
  (``--ref-sample``; its per-query cost does not depend on the position in the stream), rate extrapolated.

Corpora: Vaswani (11,429 abstracts, ../shared/data/vaswani/trec; its 93 topics repeated to ``--queries``) and a
synthetic physics-sized domain (bench/synth_domain.py: 338,291 documents by default, ``--physics-docs`` scales it;
its 100 queries repeated to ``--physics-queries``). Targets: mmir >= 1.0x bm25s and >= 100x rank_bm25. All
run on one thread. Both numba paths (mmir's kernel, bm25s's numba backend) are compiled by an untimed call on
two queries first, so no rate includes JIT compilation. The agreement line compares mmir's top-k with bm25s's
numpy backend's (same scores; order may differ in ties).

    nice python bench/bench_bm25.py [--corpora vaswani,physics] [--k 1000] [--physics-docs 338291]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: the retriever's bar would garble the lines

from mmir.config.models import parse_system
from mmir.data.trec import read_trec_documents, read_trec_topics
from mmir.retrieval.retrievers import BM25Retriever

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def vaswani(args) -> tuple[list[str], list[str]]:
    data = Path(args.vaswani)
    docs = [t for _, t in read_trec_documents(data / "corpus")]
    topics = [t for _, t in read_trec_topics(data / "query-text.trec")]
    return docs, topics


def physics(args) -> tuple[list[str], list[str]]:
    import pyarrow.parquet as pq
    from synth_domain import write_domain

    out = Path(args.synth) / f"physics-{args.physics_docs}"
    if not (out / "examples" / "physics.parquet").exists():
        t0 = time.perf_counter()
        info = write_domain(out, "physics", n_docs=args.physics_docs)
        print(f"  wrote the synthetic domain to {out}: {info} in {time.perf_counter() - t0:.0f}s")
    docs = pq.read_table(out / "documents" / "physics.parquet", columns=["content"]).column("content").to_pylist()
    topics = pq.read_table(out / "examples" / "physics.parquet", columns=["query"]).column("query").to_pylist()
    return docs, topics


def run_corpus(name: str, docs: list[str], topics: list[str], n_queries: int, args) -> dict:
    import bm25s
    import Stemmer
    from rank_bm25 import BM25Okapi

    system = parse_system({"kind": "bm25"}, key="systems.bm25").model_dump()
    stream = (topics * (n_queries // len(topics) + 1))[: max(n_queries, len(topics))]
    k = min(args.k, len(docs))
    chars = sum(map(len, docs))
    print(f"\n== {name}: {len(docs):,} documents ({chars / 1e6:,.1f} M characters); {len(stream):,} queries "
          f"({len(topics)} topics repeated); top {k}")

    # mmir: the retrieve step's BM25Retriever (an untimed call on two queries first: numba's compilation)
    t0 = time.perf_counter()
    mmir = BM25Retriever(system)
    mmir.index(docs)
    t_index = time.perf_counter() - t0
    mmir.search(stream[:2], k, [])
    t0 = time.perf_counter()
    ours_s, ours_i = mmir.search(stream, k, [])
    t_mmir = time.perf_counter() - t0
    del mmir
    gc.collect()

    # bm25s's own index and retrieve, same tokens: its numpy backend, then its numba backend when installed
    stem = Stemmer.Stemmer(system["stemmer"])
    tok = dict(stopwords=system["stopwords"], stemmer=stem, show_progress=False)
    t0 = time.perf_counter()
    corpus_tokens = bm25s.tokenize(docs, return_ids=False, **tok)
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = bm25s.BM25(method=system["method"], k1=system["k1"], b=system["b"], backend="numpy")
    ref.index(corpus_tokens, show_progress=False)
    t_index_bm25s = t_tok + time.perf_counter() - t0
    t_bm25s = {}
    for backend in ("numpy", "numba") if bm25s.NUMBA_AVAILABLE else ("numpy",):
        ref.backend = backend  # the same index; retrieve dispatches on it
        ref.retrieve(bm25s.tokenize(stream[:2], return_ids=False, **tok), k=k, n_threads=1, show_progress=False,
                     backend_selection=backend)
        t0 = time.perf_counter()
        q_tokens = bm25s.tokenize(stream, return_ids=False, **tok)
        got_i, got_s = ref.retrieve(q_tokens, k=k, n_threads=1, show_progress=False, backend_selection=backend)
        t_bm25s[backend] = time.perf_counter() - t0
        if backend == "numpy":
            their_i, their_s = got_i, got_s
    del ref
    gc.collect()

    # agreement on the distinct topics: same scores at each rank, same item sets below the k-th score
    n_t = len(topics)
    same_scores = np.allclose(ours_s[:n_t], their_s[:n_t].astype(np.float64), rtol=0, atol=1e-6)
    same_sets = np.mean([len(set(a) & set(b)) / k for a, b in zip(ours_i[:n_t], their_i[:n_t])])

    # rank_bm25 on a sample (Okapi: its only variant), same tokens
    okapi = BM25Okapi([t or ["\0"] for t in corpus_tokens], k1=system["k1"], b=system["b"])
    del corpus_tokens
    sample = stream[: args.ref_sample]
    t0 = time.perf_counter()
    for toks in bm25s.tokenize(sample, return_ids=False, **tok):
        s = np.asarray(okapi.get_scores(toks))
        top = np.argpartition(-s, k - 1)[:k]
        top[np.argsort(-s[top], kind="stable")]
    t_rank = time.perf_counter() - t0
    del okapi
    gc.collect()

    r = {"mmir": len(stream) / t_mmir, "rank_bm25": len(sample) / t_rank}
    r.update({f"bm25s {b}": len(stream) / t for b, t in t_bm25s.items()})
    best = max((b for b in r if b.startswith("bm25s")), key=r.get)
    print(f"  index: mmir {t_index:.1f}s, bm25s {t_index_bm25s:.1f}s (tokenise + index)")
    print(f"  mmir  (BM25Retriever.search, top {k}):       {len(stream):>6,} queries in {t_mmir:7.2f}s = {r['mmir']:>9,.1f} q/s")
    for b, t in t_bm25s.items():
        print(f"  bm25s (tokenize + BM25.retrieve, {b:<5}):   {len(stream):>6,} queries in {t:7.2f}s = {r['bm25s ' + b]:>9,.1f} q/s")
    print(f"  rank_bm25 (BM25Okapi, sampled):             {len(sample):>6,} queries in {t_rank:7.2f}s = {r['rank_bm25']:>9,.2f} q/s")
    for b in (x for x in r if x.startswith("bm25s")):
        met = "met" if r["mmir"] >= r[b] else "NOT met"
        print(f"  mmir / {b}: {r['mmir'] / r[b]:6.2f}x" + (f" (the faster bm25s; target >= 1.0x: {met})" if b == best else ""))
    print(f"  mmir / rank_bm25: {r['mmir'] / r['rank_bm25']:6.1f}x (target >= 100x: "
          f"{'met' if r['mmir'] >= 100 * r['rank_bm25'] else 'NOT met'})")
    print(f"  mmir vs bm25s top {k} on the {n_t} topics: scores equal at every rank: {same_scores}; "
          f"item overlap {same_sets:.4f}")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="vaswani,physics")
    ap.add_argument("--vaswani", default=str(SHARED / "vaswani" / "trec"))
    ap.add_argument("--synth", default="/work/tmp-bench/synth", help="where the synthetic domain is written (reused)")
    ap.add_argument("--physics-docs", type=int, default=338_291, help="documents of the synthetic physics domain")
    ap.add_argument("--queries", type=int, default=10_000, help="Vaswani query stream")
    ap.add_argument("--physics-queries", type=int, default=1_000, help="physics query stream")
    ap.add_argument("--k", type=int, default=1000, help="top-k (retrieve's evaluation.top_k)")
    ap.add_argument("--ref-sample", type=int, default=100, help="queries timed for rank_bm25")
    args = ap.parse_args()
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for name in args.corpora.split(","):
        if name == "vaswani":
            docs, topics = vaswani(args)
            run_corpus("Vaswani", docs, topics, args.queries, args)
        elif name == "physics":
            docs, topics = physics(args)
            run_corpus(f"synthetic physics ({args.physics_docs:,} documents)", docs, topics, args.physics_queries, args)
        else:
            raise SystemExit(f"unknown corpus {name!r} (vaswani, physics)")
        del docs, topics
        gc.collect()


if __name__ == "__main__":
    main()
