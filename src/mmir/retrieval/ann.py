"""Optional FAISS search over the same vectors as :func:`mmir.retrieval.topk.topk_inner_product` (never the default).

Kinds (inner product): ``flat`` (exact; ties in any order), ``hnsw`` and ``ivf`` (approximate). FAISS holds
the vectors in RAM as float32 (``4 * n * d`` bytes); :meth:`FaissIndex.run_stats` says whether results are
approximate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mmir.encoders.sharded import ShardedMatrix, check_dimension
from mmir.retrieval.topk import empty_topk

KINDS = ("flat", "hnsw", "ivf")


def _rows(corpus, start: int, stop: int) -> np.ndarray:
    if isinstance(corpus, ShardedMatrix):
        return corpus.read_rows(start, stop, dtype=np.float32)
    return np.ascontiguousarray(corpus[start:stop], dtype=np.float32)


@dataclass(frozen=True)
class FaissParams:
    """Build settings of a :class:`FaissIndex`.

    Attributes:
        m, ef_construction, ef_search: HNSW graph degree and search breadth.
        nlist, nprobe, train_size, seed: IVF lists (None = ``~4 * sqrt(n)``), lists visited, k-means sample, seed.
        chunk_size: rows added per step (bounds the float32 copy); threads: FAISS OpenMP threads (None = its default).
    """

    m: int = 32
    ef_construction: int = 80
    ef_search: int = 256
    nlist: int | None = None
    nprobe: int = 32
    train_size: int = 100_000
    seed: int = 0
    chunk_size: int = 65536
    threads: int | None = None


class FaissIndex:
    """A FAISS inner-product index over ``(n, d)`` vectors (array, memmap or ShardedMatrix).

    Args:
        kind: ``flat`` (exact), ``hnsw`` or ``ivf`` (approximate).
        params: :class:`FaissParams` (None = its defaults).
    """

    def __init__(self, corpus, kind: str = "flat", params: FaissParams | None = None):
        import faiss

        p = params or FaissParams()
        m, ef_construction, ef_search, nlist, nprobe, train_size, seed, chunk_size, threads = (
            p.m, p.ef_construction, p.ef_search, p.nlist, p.nprobe, p.train_size, p.seed, p.chunk_size, p.threads)

        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if threads is not None:
            faiss.omp_set_num_threads(threads)
        n, d = corpus.shape
        self.kind, self.n, self.d = kind, n, d
        self.approximate = kind != "flat"
        self._sharded = corpus if isinstance(corpus, ShardedMatrix) else None
        if kind == "flat":
            index = faiss.IndexFlatIP(d)
            self.params = {}
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
            index.hnsw.efSearch = ef_search
            self.params = {"M": m, "efConstruction": ef_construction, "efSearch": ef_search}
        else:
            nlist = nlist or max(1, min(n, int(4 * np.sqrt(max(n, 1)))))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(seed)
            sample = np.sort(rng.choice(n, size=min(n, max(train_size, nlist)), replace=False))
            train = self._gather(corpus, sample)
            index.cp.seed = seed
            index.train(train)
            del train
            index.nprobe = nprobe
            self.params = {"nlist": nlist, "nprobe": nprobe, "train_size": int(len(sample))}
        for s in range(0, n, chunk_size):
            index.add(_rows(corpus, s, min(s + chunk_size, n)))
        self.index = index

    @staticmethod
    def _gather(corpus, rows: np.ndarray) -> np.ndarray:
        if isinstance(corpus, ShardedMatrix):
            return corpus.take(rows).astype(np.float32)
        return np.ascontiguousarray(corpus[rows], dtype=np.float32)

    @property
    def label(self) -> str:
        """``exact:faiss-flat`` or ``approximate:faiss-<kind>(<params>)``: what a run's stats should record."""
        params = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{'approximate' if self.approximate else 'exact'}:faiss-{self.kind}" + (f"({params})" if params else "")

    def run_stats(self) -> dict:
        """``{"search", "approximate", "faiss_kind", **params}`` for a run's stats file."""
        return {"search": self.label, "approximate": self.approximate, "faiss_kind": self.kind, **self.params}

    def search(self, queries: np.ndarray, k: int,
               exclude: Sequence[set[int] | frozenset[int] | Sequence[int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows by inner product, the shapes of :func:`~mmir.retrieval.topk.topk_inner_product`.

        Returns:
            ``(scores float32 (q, kk), indices int64 (q, kk))``, ``kk = min(k, n)``, padded with ``-1`` / ``-inf``.

        Raises:
            ValueError (DimensionMismatchError for a ShardedMatrix corpus): ``d`` differs; ``len(exclude) != q``.
        """
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self._sharded is not None:
            check_dimension(queries.shape, self._sharded)
        if queries.ndim != 2 or queries.shape[1] != self.d:
            raise ValueError(f"dimension mismatch: queries {queries.shape}, index has d={self.d}")
        q = queries.shape[0]
        out_s, out_i = empty_topk(q, self.n, k, exclude)
        kk = out_s.shape[1]
        extra = max((len(e) for e in exclude), default=0) if exclude is not None else 0
        ks = min(self.n, kk + extra)
        if q == 0 or kk == 0:
            return out_s, out_i
        s, i = self.index.search(queries, ks)
        for r in range(q):
            keep = i[r] >= 0
            if exclude is not None and len(exclude[r]):
                keep &= ~np.isin(i[r], np.fromiter((int(x) for x in exclude[r]), dtype=np.int64))
            si, ii = s[r][keep][:kk], i[r][keep][:kk]
            out_s[r, : len(si)] = si
            out_i[r, : len(ii)] = ii
        return out_s, out_i


def faiss_topk(queries: np.ndarray, corpus, k: int, kind: str = "flat", exclude=None,
               **params) -> tuple[np.ndarray, np.ndarray, dict]:
    """Build a :class:`FaissIndex` of ``kind`` over ``corpus`` (``params``: fields of :class:`FaissParams`) and search
    it once.

    Returns ``(scores, indices, run_stats)``; ``run_stats["approximate"]`` is True for hnsw/ivf."""
    index = FaissIndex(corpus, kind, FaissParams(**params))
    scores, idx = index.search(queries, k, exclude)
    return scores, idx, index.run_stats()
