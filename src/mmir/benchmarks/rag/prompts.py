"""Versioned prompt files of the RAG stage (``src/mmir/benchmarks/rag/prompts/<name>.txt``)."""

from __future__ import annotations

from pathlib import Path

from mmir.llm.cache import PromptTemplate

DIR = Path(__file__).parent / "prompts"


def load(name: str) -> PromptTemplate:
    """The template ``<name>.txt``. Raises FileNotFoundError naming the file when it does not exist."""
    path = DIR / f"{name}.txt"
    return PromptTemplate(name, path.read_text(encoding="utf-8"), path)
