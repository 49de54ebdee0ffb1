"""mmir: reproducible pipeline for multimodal, reasoning-intensive retrieval and multimodal RAG."""

__version__ = "0.1.0"
