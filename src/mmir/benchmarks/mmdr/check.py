"""Config checks of the MMDeepResearch-Bench stage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmir.config import check_references
from mmir.config.models import MMDREvaluatorConfig, Params, parse
from mmir.core.errors import ConfigError


def check(params: Params, file: str | None = None) -> None:
    """Cross-key checks of the ``mmdr`` section (the models check types and fill defaults).

    Raises:
        ConfigError: an unknown generator/judge/system/dataset, a task other than task1-4, or trace schemes
            without ``mmir``.
    """
    if params.mmdr is None:
        return
    check_references(params, "mmdr", file, generator="generators", judge="generators", system="systems")
    check_evaluator(params.mmdr.evaluator, file)


def evaluator_config(m: Mapping[str, Any], file: str | None = None) -> MMDREvaluatorConfig:
    """The evaluator settings of a filled ``mmdr`` section or params slice (its ``evaluator``).

    Raises:
        ConfigError: a bad evaluator key (named ``mmdr.evaluator.<key>``), or ``trace.schemes`` without ``mmir`` (the
            baseline cites ``mmir://`` URIs, which would then all be ignored).
    """
    return check_evaluator(parse(MMDREvaluatorConfig, m["evaluator"], "mmdr.evaluator", file), file)


def check_evaluator(cfg: MMDREvaluatorConfig, file: str | None = None) -> MMDREvaluatorConfig:
    """``cfg``, once its ``trace.schemes`` include ``mmir`` (the baseline cites ``mmir://`` URIs, which would
    otherwise all be ignored).

    Raises:
        ConfigError: naming ``mmdr.evaluator.trace.schemes``.
    """
    if "mmir" not in cfg.trace.schemes:
        raise ConfigError("mmdr.evaluator.trace.schemes",
                          f"must include 'mmir' (reports cite mmir:// URIs), got {list(cfg.trace.schemes)}", file)
    return cfg
