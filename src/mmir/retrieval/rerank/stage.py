"""Rerank a whole first-stage run: each query's top ``depth`` reordered by a reranker, the rest after it unchanged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from mmir.retrieval.rerank.candidates import TaskCandidates
from mmir.retrieval.rerank.order import apply_order, head, order_by_scores
from mmir.retrieval.runs import Run

log = logging.getLogger(__name__)

#: ``(qid, candidate ids in first-stage order) -> their reranked order (positions into the ids)``
QueryReranker = Callable[[str, list[str]], Sequence[int]]


def rerank_run(run: Run, depth: int, rerank_query: QueryReranker) -> Run:
    """A new run (``run`` is not modified): for each query, :func:`~mmir.retrieval.rerank.order.apply_order` of its top
    ``depth`` by ``rerank_query``; strict scores ``n .. 1``. Queries in sorted order."""
    out: Run = {}
    for qid in sorted(run):
        ranking = run[qid]
        ids = head(ranking, depth)
        out[qid] = apply_order(ranking, list(rerank_query(qid, ids)) if ids else [])
    return out


def cross_encoder_reranker(scorer, cands: TaskCandidates) -> QueryReranker:
    """A :data:`QueryReranker` from a cross-encoder's scores (ties in first-stage order)."""
    def rerank(qid: str, ids: list[str]) -> list[int]:
        texts = [c.text for c in cands.candidates(ids)]
        return order_by_scores(scorer.score(cands.query(qid).text, texts).tolist())

    return rerank


def llm_reranker(reranker, cands: TaskCandidates) -> QueryReranker:
    """A :data:`QueryReranker` from an :class:`~mmir.retrieval.rerank.llm.LLMReranker`."""
    def rerank(qid: str, ids: list[str]) -> list[int]:
        return reranker.rerank(cands.query(qid), cands.candidates(ids))

    return rerank
