"""Task 1 retrieval: a system (BM25 or dense) over one prepared domain, written as a TREC run.

Protocols (MM-BRIGHT §4.1 and its released code):
- ``official``: each query's ``negative_ids`` are removed from its ranking before the top-k cut, as the
  released code does (``get_scores`` pops its ``excluded_ids``).
- ``strict``: nothing is removed, so the hard negatives compete with the gold documents.

Dense scores are cosine × 100 (L2-normalised vectors, inner product × 100), as the paper's code.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mmir.data.prepare import read_excluded
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.retrieval.runs import Run, top_k

log = logging.getLogger(__name__)


def exclusions(prepared_dir: str | Path, protocol: str) -> dict[str, set[str]]:
    """Doc ids to drop per query under ``protocol`` (official: negative_ids; strict: none)."""
    if protocol == "strict":
        return {}
    return read_excluded(Path(prepared_dir) / "excluded.tsv")


def rank_scores(score_fn, qids, doc_ids, excluded, k, desc) -> Run:
    """Top-k of every query; ``score_fn(i)`` gives query i's score vector over ``doc_ids``."""
    from tqdm.auto import tqdm

    pos = {d: i for i, d in enumerate(doc_ids)}
    run: Run = {}
    for i, qid in enumerate(tqdm(qids, desc=desc, leave=False)):
        excl = [pos[d] for d in excluded.get(qid, ()) if d in pos]
        idx, sc = top_k(score_fn(i), k, excl)
        run[qid] = [(doc_ids[j], float(s)) for j, s in zip(idx, sc)]
    return run


def bm25_run(corpus: pd.DataFrame, topics: pd.DataFrame, system: dict, excluded: dict, k: int) -> Run:
    """Rank ``corpus`` for every topic with BM25 (see :mod:`mmir.retrieval.bm25`)."""
    from mmir.retrieval.bm25 import BM25

    t0 = time.perf_counter()
    index = BM25(corpus["text"].tolist(), backend=system["backend"], method=system["method"],
                 k1=system["k1"], b=system["b"], stopwords=system["stopwords"], stemmer=system["stemmer"])
    log.info("indexed %d documents with %s (%s, k1=%s, b=%s) in %.1fs", len(corpus), system["backend"],
             system["method"], system["k1"], system["b"], time.perf_counter() - t0)
    scores = index.iter_scores(topics["query"].tolist())  # consumed in query order by rank_scores
    return rank_scores(lambda i: next(scores), topics["qid"].tolist(), corpus["doc_id"].tolist(),
                     excluded, k, "bm25")


def encode_cached(encoder, texts: list[str], kind: str, cache_root: str | Path, batch_size: int = 64) -> tuple[np.ndarray, dict]:
    """Vectors for ``texts`` (kind ``query`` or ``document``) through the content-addressed cache.

    Returns ``(matrix float32 (n, dim), stats)`` with stats hits/misses/model_calls.
    """
    spec = encoder.cache_spec()
    fn = encoder.encode_queries if kind == "query" else encoder.encode_documents
    with EmbeddingCache(cache_root, spec) as cache:
        keys = [content_key(encoder_key(spec), kind, t) for t in texts]
        return cache.encode(texts, keys, fn, batch_size=batch_size, progress=f"encode {kind}s")


def cache_batch_size(encoder, system: dict) -> int:
    """Texts per encoder call through the cache: the encoder's ``cache_batch_size`` (an API encoder takes
    several requests' worth, to send them concurrently), else the system's ``batch_size``."""
    return getattr(encoder, "cache_batch_size", None) or system.get("batch_size", 32)


def encoder_usage(encoder) -> dict:
    """An API encoder's request counters (``usage``: requests, retries, failures, ...) prefixed ``api_``;
    ``{}`` for a local model."""
    usage = getattr(encoder, "usage", None)
    return {f"api_{k}": v for k, v in usage.items()} if isinstance(usage, dict) else {}


def dense_run(corpus: pd.DataFrame, topics: pd.DataFrame, system: dict, excluded: dict, k: int,
              cache_root: str | Path, encoder=None) -> tuple[Run, dict]:
    """Rank with a dense encoder: exact cosine × 100 over the whole corpus. Returns (run, encode stats)."""
    from mmir.encoders.text import make_text_encoder

    encoder = encoder or make_text_encoder(system)
    bs = cache_batch_size(encoder, system)
    docs, dstats = encode_cached(encoder, corpus["text"].tolist(), "document", cache_root, bs)
    qs, qstats = encode_cached(encoder, topics["query"].tolist(), "query", cache_root, bs)
    stats = {f"doc_{k_}": v for k_, v in dstats.items()} | {f"query_{k_}": v for k_, v in qstats.items()}
    stats |= encoder_usage(encoder)
    log.info("encoded: documents %s, queries %s", dstats, qstats)
    run = {}
    if len(qs) and len(docs):
        scores = (qs @ docs.T) * 100.0  # (q, n) float32; Task 1 corpora fit in memory
        run = rank_scores(lambda i: scores[i], topics["qid"].tolist(), corpus["doc_id"].tolist(),
                        excluded, k, "dense")
    return run, stats


def retrieve(prepared_dir: str | Path, system: dict, evaluation: dict, cache_root: str | Path,
             queries: str | Path | None = None) -> tuple[Run, dict]:
    """Run one validated system over a prepared domain. Returns ``(run, stats)``.

    ``queries``: a ``qid, query`` parquet replacing the topics' text (caption-augmented or reformulated).

    Raises ValueError for an unknown system kind, DataError when ``queries`` misses a topic.
    """
    prepared_dir = Path(prepared_dir)
    corpus = pd.read_parquet(prepared_dir / "corpus.parquet")
    topics = pd.read_parquet(prepared_dir / "topics.parquet")
    if queries is not None:
        from mmir.core.errors import DataError

        text = dict(pd.read_parquet(queries, columns=["qid", "query"]).itertuples(index=False))
        missing = [q for q in topics["qid"] if q not in text]
        if missing:
            raise DataError(queries, f"{len(missing)} topics have no query, e.g. {missing[0]!r}", field="qid")
        topics = topics.assign(query=[text[q] for q in topics["qid"]])
    excluded = exclusions(prepared_dir, evaluation["protocol"])
    k = evaluation["top_k"]
    log.info("read %s: %d documents, %d topics, %d queries with excluded ids (protocol %s)",
             prepared_dir, len(corpus), len(topics), len(excluded), evaluation["protocol"])
    if system["kind"] == "bm25":
        run, stats = bm25_run(corpus, topics, system, excluded, k), {}
    elif system["kind"] == "dense":
        run, stats = dense_run(corpus, topics, system, excluded, k, cache_root)
    elif system["kind"] == "mm":  # a multimodal encoder on text-only Task 1: its text tower
        from mmir.retrieval.mm_search import TextTower, make_mm_encoder

        run, stats = dense_run(corpus, topics, system, excluded, k, cache_root, TextTower(make_mm_encoder(system)))
    else:
        raise ValueError(f"unknown system kind {system['kind']!r}")
    stats |= {"topics": len(topics), "documents": len(corpus), "excluded_queries": len(excluded),
              "run_lines": sum(len(v) for v in run.values())}
    return run, stats
