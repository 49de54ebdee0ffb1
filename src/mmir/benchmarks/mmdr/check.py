"""Config checks of the MMDeepResearch-Bench stage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmir.config import check_references
from mmir.config.models import MMDREvaluatorConfig, parse
from mmir.core.errors import ConfigError


def check(config: dict, file: str | None = None) -> None:
    """Cross-key checks of the ``mmdr`` section (the models check types and fill defaults).

    Raises:
        ConfigError: an unknown generator/judge/system/dataset, a task other than task1-4, or trace schemes
            without ``mmir``.
    """
    m = config.get("mmdr")
    if not m:
        return
    check_references(config, "mmdr", file, generator="generators", judge="generators", system="systems")
    evaluator_config(m, file)


def evaluator_config(m: Mapping[str, Any], file: str | None = None) -> MMDREvaluatorConfig:
    """The evaluator settings of a filled ``mmdr`` section or params slice (its ``evaluator``).

    Raises:
        ConfigError: a bad evaluator key (named ``mmdr.evaluator.<key>``), or ``trace.schemes`` without ``mmir`` (the
            baseline cites ``mmir://`` URIs, which would then all be ignored).
    """
    cfg = parse(MMDREvaluatorConfig, m["evaluator"], "mmdr.evaluator", file)
    if "mmir" not in cfg.trace.schemes:
        raise ConfigError("mmdr.evaluator.trace.schemes",
                          f"must include 'mmir' (reports cite mmir:// URIs), got {list(cfg.trace.schemes)}", file)
    return cfg
