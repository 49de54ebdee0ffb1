"""Retrievers built once from a system's config: ``index(...)`` their items, then ``search(queries, k, exclude)``.

:class:`BM25Retriever` and :class:`VectorRetriever` (exact chunked inner product) return ``(scores, indices)``
``(q, k)``, padded with ``-1``, score descending, ties by item index. :func:`to_run` turns them into a run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from mmir.config.models import BM25System, EvaluationConfig, default_of, parse_system
from mmir.retrieval.runs import Run
from mmir.retrieval.topk import topk_inner_product


def tokenizer_settings(system: BM25System) -> dict:
    """The tokenizer keys of a BM25 system, as :class:`mmir.retrieval.bm25.BM25` takes them."""
    return {k: getattr(system, k) for k in BM25System.TOKENIZER_KEYS}


class BM25Retriever:
    """BM25 over item texts (:class:`mmir.retrieval.bm25.BM25`, the system's backend/method/k1/b and tokenizer settings)."""

    def __init__(self, system: BM25System | dict):
        self.system: BM25System = parse_system(system)
        self.index_ = None

    def index(self, texts: Sequence[str]) -> None:
        from mmir.retrieval.bm25 import BM25

        s = self.system
        self.index_ = BM25(list(texts), backend=s.backend, method=s.method, k1=s.k1, b=s.b, **tokenizer_settings(s))

    def search(self, queries: Sequence[str], k: int, exclude: Sequence[set[int]]) -> tuple[np.ndarray, np.ndarray]:
        """``(scores float64 (q, kk), indices int64 (q, kk))``, ``kk = min(k, n)``; BM25 scores as bm25s gives them
        (:meth:`mmir.retrieval.bm25.BM25.topk`, a block of queries at a time)."""
        with tqdm(total=len(queries), desc="bm25", leave=False) as bar:
            return self.index_.topk(list(queries), k, exclude or None, progress=bar.update)


class VectorRetriever:
    """Exact inner-product search over a vector matrix; scores are cosines when rows and queries are unit vectors.

    Args:
        chunk_size: corpus rows scored per step (bounds memory, see :func:`topk_inner_product`).
        approximate: ``None`` (exact, the default) or a FAISS index type (``hnsw``, ``ivf``): labelled so in stats.
    """

    def __init__(self, chunk_size: int = default_of(EvaluationConfig, "chunk_size"), approximate: str | None = None):
        self.chunk_size, self.approximate = chunk_size, approximate
        self.matrix = None

    def index(self, matrix) -> None:
        self.matrix = matrix

    def search(self, queries: np.ndarray, k: int, exclude: Sequence[set[int]] | None) -> tuple[np.ndarray, np.ndarray]:
        """``(scores float32 (q, kk), indices int64 (q, kk))`` raw inner products.

        Raises:
            ValueError: query and item vectors of different dimensions (names both).
        """
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.matrix.shape[1]:
            raise ValueError(f"dimension mismatch: query vectors {q.shape}, item vectors {tuple(self.matrix.shape)}")
        if self.approximate:
            from mmir.retrieval.ann import faiss_topk

            scores, idx, _ = faiss_topk(q, self.matrix, k, kind=self.approximate, exclude=exclude)
            return scores, idx
        return topk_inner_product(q, self.matrix, k, chunk_size=self.chunk_size, exclude=exclude)


def to_run(qids: Sequence[str], item_ids: Sequence[str], scores: np.ndarray, indices: np.ndarray, scale: float = 1.0) -> Run:
    """``{qid: [(item_id, score * scale), ...]}`` in rank order; padding (index ``-1``) dropped. ``scale`` 100 makes
    cosines the paper's scores (cosine x 100)."""
    run: Run = {}
    for qid, srow, irow in zip(qids, scores, indices):
        run[qid] = [(item_ids[j], float(s) * scale) for s, j in zip(srow, irow) if j >= 0]
    return run
