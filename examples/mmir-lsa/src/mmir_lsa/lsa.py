"""Latent semantic analysis (Deerwester et al., "Indexing by latent semantic analysis", JASIS 1990): TF-IDF vectors of
the corpus projected on their top ``n_components`` singular vectors (scikit-learn's ``TfidfVectorizer`` and
``TruncatedSVD``), fitted on the documents mmir gives ``fit``; a query is projected the same way.

The objects follow mmir's plug-in protocols (a dense encoder: ``encode_queries`` / ``encode_documents``; a reranker:
``score``), both with the optional ``fit(documents)`` hook, and return float32 as mmir requires.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer


class LSA:
    """TF-IDF (``sublinear_tf``, ``stop_words``, ``min_df``, ``max_df``) + TruncatedSVD (``n_components``, at most one
    less than the vocabulary and the corpus size; randomized, seeded by ``seed``: the same corpus gives the same space)."""

    def __init__(self, n_components: int = 100, sublinear_tf: bool = True, stop_words: str | None = "english",
                 min_df: int | float = 1, max_df: int | float = 1.0, seed: int = 0):
        self.n_components, self.seed = int(n_components), int(seed)
        self.tfidf = TfidfVectorizer(sublinear_tf=sublinear_tf, stop_words=stop_words, min_df=min_df, max_df=max_df)
        self.svd: TruncatedSVD | None = None

    def fit(self, documents: list[str]) -> None:
        """Learn the vocabulary, IDF weights and the SVD from the corpus texts."""
        x = self.tfidf.fit_transform(documents)
        k = max(1, min(self.n_components, x.shape[0] - 1, x.shape[1] - 1))
        self.svd = TruncatedSVD(n_components=k, random_state=self.seed).fit(x)

    def transform(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), k)`` LSA vectors (not normalised: mmir normalises).

        Raises:
            RuntimeError: before :meth:`fit`.
        """
        if self.svd is None:
            raise RuntimeError("LSA: call fit(documents) first (mmir does, with the domain's corpus)")
        return self.svd.transform(self.tfidf.transform(texts)).astype(np.float32)


class LSAEncoder(LSA):
    """A dense encoder (mmir's ``DensePlugin``): queries and documents in one LSA space."""

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.transform(texts)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.transform(texts)


class LSAReranker(LSA):
    """A reranker (mmir's ``RerankerPlugin``): the cosine of the query's and each candidate's LSA vectors."""

    def score(self, query: str, candidates: list[str]) -> np.ndarray:
        v = self.transform([query, *candidates]).astype(np.float64)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return (v[1:] @ v[0]).astype(np.float32)
