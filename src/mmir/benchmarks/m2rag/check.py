"""Config checks of the M2RAG stage."""

from __future__ import annotations

from mmir.config import check_references
from mmir.core.errors import ConfigError


def check(config: dict, file: str | None = None) -> None:
    """Cross-references of the ``m2rag`` section: generator, judge, image text, sources, separate encoder.

    Raises:
        ConfigError: naming the key.
    """
    m = config.get("m2rag")
    if not m:
        return
    check_references(config, "m2rag", file, generator="generators", judge="generators")
    if m["image_text"] is not None and m["image_text"] not in config["captioners"]:
        raise ConfigError("m2rag.image_text", f"{m['image_text']!r} is not a key of captioners", file)
    for i, s in enumerate(m["sources"]):
        if s not in config["systems"]:
            raise ConfigError(f"m2rag.sources.{i}", f"{s!r} is not a key of systems", file)
    if "separate" in m["strategies"]:
        enc = m["separate_encoder"]
        if enc is None or enc not in config["systems"] or config["systems"][enc]["kind"] != "dense":
            raise ConfigError("m2rag.separate_encoder", f"the separate strategy needs a dense system of systems, got {enc!r}", file)
