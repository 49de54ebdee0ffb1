"""Optional approximate search for multi-vector systems (``index: voyager``; never the default): PyLate's
``pylate.indexes.Voyager`` (an HNSW graph over every token vector, cosine space) gives per query token its nearest
``k_token`` item tokens; their items are the candidates, re-scored by the exact MaxSim of
:func:`mmir.retrieval.maxsim.topk_maxsim` -- as PyLate's ``retrieve.ColBERT`` reranks Voyager's candidates. The
returned scores are exact MaxSim sums; which items are returned is approximate (an item no query token reached is
never scored), so :meth:`VoyagerIndex.run_stats` labels the run ``approximate``.

The index is built per token store and cached under ``<cache_root>/voyager/<key>/``; the key holds the store's encoder
key, its manifest's shard hashes and the build parameters (M, ef_construction): a change of any rebuilds it.
Voyager holds the vectors as float32 in RAM (``4 * tokens * d`` bytes plus the graph).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mmir.core.paths import project_path
from mmir.retrieval.maxsim import topk_maxsim
from mmir.retrieval.topk import empty_topk

log = logging.getLogger("mmir.retrieval.voyager")


@dataclass(frozen=True)
class VoyagerParams:
    """Voyager settings (PyLate's defaults): ``m`` graph degree, ``ef_construction`` build breadth, ``ef_search``
    search breadth, ``k_token`` nearest item tokens per query token (PyLate ``retrieve.ColBERT.default_k_token``)."""

    m: int = 64
    ef_construction: int = 200
    ef_search: int = 200
    k_token: int = 100


def index_key(store, params: VoyagerParams) -> str:
    """sha256 of what changes the index: the store's encoder key, dim, dtype and shard hashes, and M / ef_construction
    (``ef_search`` and ``k_token`` are search-time settings: they change the candidates, not the index)."""
    m = store.manifest
    shards = [(s["name"], s.get("sha256"), s.get("lengths_sha256"), s.get("ids_sha256")) for s in m["shards"]]
    payload = {"encoder_key": m["encoder_key"], "dim": m["dim"], "dtype": m["dtype"], "shards": shards,
               "m": params.m, "ef_construction": params.ef_construction}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class _ItemTokens(Sequence):
    """The store's items as a lazy sequence of float32 ``(length, d)`` matrices (what PyLate's ``add_documents``
    slices batch by batch), so the store is never copied whole into RAM."""

    def __init__(self, store):
        self.store, self.offsets = store, store.offsets

    def __len__(self) -> int:
        return len(self.store)

    def _one(self, i: int) -> np.ndarray:
        o = int(self.offsets[i])
        return self.store.tokens.read_rows(o, o + int(self.store.lengths[i]), dtype=np.float32)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        return self._one(i)


class VoyagerIndex:
    """PyLate's Voyager index over a :class:`mmir.encoders.token_store.TokenStore`, built once and cached.

    Args:
        store: the opened token store (item ``i`` is PyLate document id ``str(i)``).
        cache_root: the folder the index is cached under (``<cache_root>/voyager/<key>``).
        params: :class:`VoyagerParams` (None = PyLate's defaults).
    """

    def __init__(self, store, cache_root: str | Path, params: VoyagerParams | None = None, batch_size: int = 2000):
        from pylate.indexes import Voyager

        self.store, self.params = store, params or VoyagerParams()
        p = self.params
        self.key = index_key(store, p)
        folder = project_path(str(cache_root)) / "voyager"
        final = folder / self.key
        self.built = not (final / "index.voyager").exists()
        if self.built:  # build under a temporary name, then rename: a killed build is never read as complete
            tmp = folder / f"{self.key}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            idx = Voyager(index_folder=str(folder), index_name=tmp.name, override=True, embedding_size=store.dim, M=p.m,
                          ef_construction=p.ef_construction, ef_search=p.ef_search)
            idx.add_documents([str(i) for i in range(len(store))], _ItemTokens(store), batch_size=batch_size)
            (tmp / "params.json").write_text(json.dumps(asdict(p) | {"key": self.key}, indent=1), encoding="utf-8")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            log.info("built the Voyager index %s (%d items, %d tokens)", final, len(store), int(store.lengths.sum()))
        self.path = final
        self.index = Voyager(index_folder=str(folder), index_name=self.key, override=False, embedding_size=store.dim, M=p.m,
                             ef_construction=p.ef_construction, ef_search=p.ef_search)

    @property
    def label(self) -> str:
        """``approximate:voyager(M=..,ef_construction=..,ef_search=..,k_token=..)+exact MaxSim rerank``."""
        p = self.params
        return (f"approximate:voyager(M={p.m},ef_construction={p.ef_construction},ef_search={p.ef_search},"
                f"k_token={p.k_token})+exact MaxSim rerank")

    def candidates(self, queries: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per query the sorted int64 item indices any of its tokens reached (PyLate's ``Voyager.__call__``)."""
        if not len(queries):
            return []
        hits = self.index([np.asarray(x, dtype=np.float32) for x in queries], k=self.params.k_token)
        return [np.unique(np.fromiter((int(d) for tok in per_q for d in tok), dtype=np.int64)) for per_q in hits["documents_ids"]]

    def search(self, queries: Sequence[np.ndarray], k: int, exclude=None, *, chunk_tokens: int = 65_536,
               query_tokens: int = 1_024) -> tuple[np.ndarray, np.ndarray, dict]:
        """Top-``k`` items by exact MaxSim among each query's Voyager candidates.

        Returns:
            ``(scores float32 (q, kk), indices int64 (q, kk), stats)``, ``kk = min(k, n)``, padded with ``-1`` /
            ``-inf`` where a query has fewer than ``kk`` candidates; ties in item order as :func:`topk_maxsim`.
        """
        n = len(self.store)
        out_s, out_i = empty_topk(len(queries), n, k, exclude)
        cands = self.candidates(queries)
        offsets, lengths = self.store.offsets, self.store.lengths
        for r, (qv, c) in enumerate(zip(queries, cands)):
            if exclude is not None and len(exclude[r]):
                c = c[~np.isin(c, np.fromiter((int(x) for x in exclude[r]), dtype=np.int64))]
            if not len(c):
                continue
            sub = np.concatenate([self.store.tokens.read_rows(int(offsets[i]), int(offsets[i] + lengths[i]), dtype=np.float32)
                                  for i in c])
            s, i = topk_maxsim([qv], sub, lengths[c], k, chunk_tokens=chunk_tokens, query_tokens=query_tokens)
            keep = i[0] >= 0
            out_s[r, : keep.sum()] = s[0][keep]
            out_i[r, : keep.sum()] = c[i[0][keep]]
        sizes = [len(c) for c in cands]
        stats = {"search": self.label, "approximate": True, "index": "voyager", "voyager_key": self.key,
                 "voyager_built": self.built, "voyager_candidates_mean": round(float(np.mean(sizes)), 1) if sizes else 0.0,
                 **{f"voyager_{k_}": v for k_, v in asdict(self.params).items()}}
        return out_s, out_i, stats
