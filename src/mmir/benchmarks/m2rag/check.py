"""Config checks of the M2RAG stage."""

from __future__ import annotations

from mmir.config import check_references
from mmir.config.models import Params
from mmir.core.errors import ConfigError


def check(params: Params, file: str | None = None) -> None:
    """Cross-references of the ``m2rag`` section: generator, judge, image text, sources, separate encoder.

    Raises:
        ConfigError: naming the key.
    """
    m = params.m2rag
    if m is None:
        return
    check_references(params, "m2rag", file, generator="generators", judge="generators")
    if m.image_text is not None and m.image_text not in params.captioners:
        raise ConfigError("m2rag.image_text", f"{m.image_text!r} is not a key of captioners", file)
    for i, s in enumerate(m.sources):
        if s not in params.systems:
            raise ConfigError(f"m2rag.sources.{i}", f"{s!r} is not a key of systems", file)
    if "separate" in m.strategies:
        enc = m.separate_encoder
        if enc is None or enc not in params.systems or params.systems[enc].kind != "dense":
            raise ConfigError("m2rag.separate_encoder", f"the separate strategy needs a dense system of systems, got {enc!r}", file)
