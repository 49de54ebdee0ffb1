"""Retrievers (BM25, dense), exact top-k (also over a vector store), optional FAISS search (``ann``), TREC run
files."""
