"""BM25 over a tokenised corpus: bm25s (fast, default) or rank_bm25 (reference).

Tokenisation is shared by both backends (bm25s.tokenize: lower-casing, ``\\w\\w+`` tokens, optional
stopwords and PyStemmer stemming), so a ranking difference can only come from the scoring.
BRIGHT/MM-BRIGHT use the Lucene variant with k1=0.9, b=0.4 (``method: lucene``).
rank_bm25's BM25Okapi uses the Robertson idf with an epsilon floor for terms in more than half the
documents; with no such term it equals bm25s ``method: robertson``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def make_tokenizer(stopwords: str | None = "en", stemmer: str | None = "english"):
    """A function ``list[str] -> list[list[str]]`` with the configured stopwords and stemmer."""
    import bm25s

    stem = None
    if stemmer:
        import Stemmer

        stem = Stemmer.Stemmer(stemmer).stemWords

    def tokenize(texts: Sequence[str]) -> list[list[str]]:
        return bm25s.tokenize(
            list(texts), stopwords=stopwords or [], stemmer=stem, return_ids=False, show_progress=False
        )

    return tokenize


class BM25:
    """A BM25 index over ``corpus`` (list of texts, index = corpus position).

    Args:
        backend: ``bm25s`` or ``rank_bm25``.
        method: bm25s variant (lucene, robertson, atire, bm25l, bm25+); rank_bm25 is always Okapi.
        k1, b: the usual BM25 parameters.
        stopwords, stemmer: see :func:`make_tokenizer`.
    """

    def __init__(self, corpus: Sequence[str], *, backend: str = "bm25s", method: str = "lucene",
                 k1: float = 0.9, b: float = 0.4, stopwords: str | None = "en", stemmer: str | None = "english"):
        self.tokenize = make_tokenizer(stopwords, stemmer)
        self.backend = backend
        self.n = len(corpus)
        tokens = self.tokenize(corpus)
        if backend == "bm25s":
            import bm25s

            self._index = bm25s.BM25(method=method, k1=k1, b=b)
            self._index.index(tokens, show_progress=False)
        elif backend == "rank_bm25":
            from rank_bm25 import BM25Okapi

            # rank_bm25 divides by zero on an empty document list; keep empty docs as a placeholder token
            self._index = BM25Okapi([t or ["\0"] for t in tokens], k1=k1, b=b)
        else:
            raise ValueError(f"unknown BM25 backend {backend!r}")

    def get_scores(self, query: str) -> np.ndarray:
        """Scores of every document for one query: float array of shape ``(n,)``."""
        return next(self.iter_scores([query]))

    def iter_scores(self, queries: Sequence[str]):
        """Yield the score vector (float, shape ``(n,)``) of each query in order; tokenises all at once."""
        for toks in self.tokenize(queries):
            yield np.asarray(self._index.get_scores(toks)) if toks else np.zeros(self.n, dtype=np.float32)
