"""Plug-in rerankers (``rerankers.<name>: {backend: plugin, factory, options}``): a Python object whose
``score(query, candidates)`` gives one float32 score per candidate text (:class:`mmir.encoders.plugins.RerankerPlugin`).
Each query's call is one batch: its scores are checked (shape ``(n,)``, float32, finite) before they order anything,
and a bad one stops the job naming the reranker, the factory and the query."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mmir.config.models import PluginReranker
from mmir.encoders.plugins import PluginCaller
from mmir.encoders.plugins.checks import scores_problem
from mmir.retrieval.rerank.candidates import TaskCandidates
from mmir.retrieval.rerank.order import order_by_scores
from mmir.retrieval.rerank.stage import QueryReranker


class PluginRerankScorer:
    """The plug-in of a ``backend: plugin`` reranker; ``where`` names it in errors (``rerankers.<name>``), ``documents``
    gives the domain's corpus texts for a plug-in with ``fit``. ``pairs`` counts the (query, candidate) pairs scored.

    Raises:
        PluginError: as :class:`~mmir.encoders.plugins.PluginCaller`.
    """

    def __init__(self, cfg: PluginReranker, where: str = "reranker", documents: Callable[[], Sequence[str]] | None = None):
        self.caller = PluginCaller(cfg, "reranker", where, documents)
        self.pairs = 0

    @property
    def identity(self):
        return self.caller.identity

    def score(self, query: str, texts: Sequence[str], batch: str | None = None) -> np.ndarray:
        """float32 ``(len(texts),)`` scores of ``query`` against each text (``batch`` names the call in errors).

        Raises:
            PluginError: the plug-in raised or returned a bad value.
        """
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.float32)
        out = self.caller.call("score", (query, texts), len(texts), "candidates", lambda o: scores_problem(o, len(texts)), batch)
        self.pairs += len(texts)
        return out

    def query_reranker(self, cands: TaskCandidates) -> QueryReranker:
        """A :data:`~mmir.retrieval.rerank.stage.QueryReranker` ordering by the plug-in's scores (ties in first-stage
        order); a query's call is named ``query <qid>`` in errors."""
        def rerank(qid: str, ids: list[str]) -> list[int]:
            texts = [c.text for c in cands.candidates(ids)]
            return order_by_scores(self.score(cands.query(qid).text, texts, batch=f"query {qid}").tolist())

        return rerank
