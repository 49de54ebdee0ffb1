"""Retrievers (BM25, dense), exact top-k, TREC run files."""
