"""LSA as an mmir plug-in: :class:`LSAEncoder` (a dense encoder) and :class:`LSAReranker` (a reranker)."""

from mmir_lsa.lsa import LSA, LSAEncoder, LSAReranker

__all__ = ["LSA", "LSAEncoder", "LSAReranker"]
