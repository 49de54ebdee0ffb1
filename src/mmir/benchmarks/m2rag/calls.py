"""The M2RAG prompt files (``prompts/<name>_v<N>.txt``, :class:`string.Template` fields) and their image slot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmir.llm.prompts import PromptLibrary, PromptTemplate

#: The M2RAG prompt files.
M2RAG_PROMPTS = PromptLibrary(Path(__file__).parent / "prompts")

#: Where an image (or its description) goes in a prompt template.
IMAGE_SLOT = "[[IMAGE]]"


def prompt(name: str) -> PromptTemplate:
    """The M2RAG prompt ``name`` (e.g. ``"judge_fluency_v1"``).

    Raises:
        FileNotFoundError: no such prompt file (the message lists those available).
    """
    return M2RAG_PROMPTS.get(name)


def render_around_slot(template: PromptTemplate, **fields: Any) -> tuple[str, str]:
    """The template text before and after its :data:`IMAGE_SLOT`, each rendered with ``fields``.

    Raises:
        ValueError: the template has no slot, or ``fields`` misses or adds a placeholder.
    """
    return template.render_around(IMAGE_SLOT, **fields)


__all__ = ["IMAGE_SLOT", "M2RAG_PROMPTS", "prompt", "render_around_slot"]
