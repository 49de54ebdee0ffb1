"""What the object a plug-in's factory returns must provide, per kind (``backend: plugin``; docs: Your own system).

Every output is checked batch by batch (:mod:`mmir.encoders.plugins.checks`): numpy arrays of dtype float32 exactly
(no cast: a float64 or float16 array is an error, so a plug-in's precision is never silently changed), the shape and
count stated, every value finite, ``d`` the same in every batch. mmir L2-normalises vectors after the check
(multi-vector: each token vector), so similarities are cosines; an all-zero vector stays zero.

Optional hooks, used when present:

* ``fit(documents: list[str]) -> None`` (every kind): called once per process before the first encode or score call,
  with the prepared domain's corpus texts (``corpus.parquet`` ``text``, in corpus order): a plug-in that learns from
  the corpus (an LSA) fits per domain. It must be deterministic: every encode job (each kind and shard) fits anew.
  The count and sha256 of those texts are part of the embedding-cache key.
* ``encode_image_sets(sets: list[list[PIL.Image.Image]], role) -> (n, d)`` (``mm``): a query's images as one input,
  for ``image_mode: all``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

Role = Literal["query", "document"]


@runtime_checkable
class DensePlugin(Protocol):
    """``kind: dense``: one vector per text. Images reach it as image text (captions), as for every text system."""

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), d)``."""

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), d)``, the same ``d`` as the queries'."""


@runtime_checkable
class MMPlugin(Protocol):
    """``kind: mm``: texts and images into one space; ``role`` lets queries and documents differ."""

    def encode_texts(self, texts: list[str], role: Role) -> np.ndarray:
        """float32 ``(len(texts), d)``."""

    def encode_images(self, images: list, role: Role) -> np.ndarray:
        """float32 ``(len(images), d)`` of decoded RGB ``PIL.Image.Image`` (a query image that does not decode
        arrives as the blank image, as for every encoder; a corpus image that does not decode stops the job)."""


@runtime_checkable
class MultiVectorPlugin(Protocol):
    """``kind: multivector``: one vector per token of each text, scored by MaxSim (images as image text)."""

    def encode_queries(self, texts: list[str]) -> Sequence[np.ndarray]:
        """One float32 ``(tokens_i, d)`` array per text, ``tokens_i >= 1``."""

    def encode_documents(self, texts: list[str]) -> Sequence[np.ndarray]:
        """One float32 ``(tokens_i, d)`` array per text, ``tokens_i >= 1``."""


@runtime_checkable
class RerankerPlugin(Protocol):
    """A reranker (``rerankers.<name>: {backend: plugin}``): a score per candidate of one query, higher = more
    relevant; ties keep the first-stage order. Candidates are texts (images as image text)."""

    def score(self, query: str, candidates: list[str]) -> np.ndarray:
        """float32 ``(len(candidates),)``."""


@runtime_checkable
class Fittable(Protocol):
    """The optional corpus hook of every kind."""

    def fit(self, documents: list[str]) -> None:
        """Learn from the domain's corpus texts before any encode or score call."""


#: the protocol and its required methods, by kind
PROTOCOLS: dict[str, tuple[type, tuple[str, ...]]] = {
    "dense": (DensePlugin, ("encode_queries", "encode_documents")),
    "mm": (MMPlugin, ("encode_texts", "encode_images")),
    "multivector": (MultiVectorPlugin, ("encode_queries", "encode_documents")),
    "reranker": (RerankerPlugin, ("score",)),
}
