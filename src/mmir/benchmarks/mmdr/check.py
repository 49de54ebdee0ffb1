"""Config checks of the MMDeepResearch-Bench stage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mmir.config import check_references
from mmir.core.errors import ConfigError


def check(config: dict, file: str | None = None) -> None:
    """Cross-key checks of the ``mmdr`` section (the schema checks types and fills defaults).

    Raises:
        ConfigError: an unknown generator/judge/system/dataset, a task other than task1-4, an evaluator
            setting :meth:`MMDRConfig.from_mapping` rejects, or trace schemes without ``mmir``.
    """
    m = config.get("mmdr")
    if not m:
        return
    check_references(config, "mmdr", file, generator="generators", judge="generators", system="systems")
    evaluator_config(m, file)


def evaluator_config(m: Mapping[str, Any], file: str | None = None):
    """The :class:`~mmir.benchmarks.mmdr.config.MMDRConfig` of ``mmdr.evaluator``.

    Raises:
        ConfigError: a bad evaluator key (named ``mmdr.evaluator.<key>``), or ``trace.schemes`` without
            ``mmir`` (the baseline cites ``mmir://`` URIs, which would then all be ignored).
    """
    from mmir.benchmarks.mmdr.config import MMDRConfig

    try:
        cfg = MMDRConfig.from_mapping(m.get("evaluator") or {}, prefix="mmdr.evaluator")
    except ConfigError as e:
        raise ConfigError(e.key, str(e).split(": ", 1)[-1].split("': ", 1)[-1], file) from e
    if "mmir" not in cfg.trace.schemes:
        raise ConfigError("mmdr.evaluator.trace.schemes",
                          f"must include 'mmir' (reports cite mmir:// URIs), got {list(cfg.trace.schemes)}", file)
    return cfg
