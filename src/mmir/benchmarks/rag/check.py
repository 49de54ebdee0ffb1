"""Config checks of the RAG QA stage."""

from __future__ import annotations

from mmir.config import check_references
from mmir.core.errors import ConfigError


def check(config: dict, file: str | None = None) -> None:
    """Cross-references of the ``rag`` section: generator, judge, task, datasets, ``topk:<system>`` settings.

    Raises:
        ConfigError: naming the key (``rag.settings.<i>`` for an unknown system).
    """
    rag = config.get("rag")
    if not rag:
        return
    check_references(config, "rag", file, generator="generators", judge="generators")
    for i, s in enumerate(rag["settings"]):
        if s.startswith("topk:") and s[5:] not in config["systems"]:
            raise ConfigError(f"rag.settings.{i}", f"system {s[5:]!r} is not a key of systems", file)
