"""Config checks of the RAG QA stage."""

from __future__ import annotations

from mmir.config import check_references
from mmir.config.models import Params
from mmir.core.errors import ConfigError


def check(params: Params, file: str | None = None) -> None:
    """Cross-references of the ``rag`` section: generator, judge, task, datasets, ``topk:<system>`` settings.

    Raises:
        ConfigError: naming the key (``rag.settings.<i>`` for an unknown system).
    """
    if params.rag is None:
        return
    check_references(params, "rag", file, generator="generators", judge="generators")
    for i, s in enumerate(params.rag.settings):
        if s.startswith("topk:") and s[5:] not in params.systems:
            raise ConfigError(f"rag.settings.{i}", f"system {s[5:]!r} is not a key of systems", file)
