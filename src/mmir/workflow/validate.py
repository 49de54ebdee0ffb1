"""The one config check before any job: the schema (defaults filled), then the LLM layer's, the embedding
API systems' (base URL, key variable) and every benchmark's own cross-key checks. Snakemake
(``workflow/rules/common.smk``) and the CLI both call this."""

from __future__ import annotations

import os

from mmir import config as cfg
from mmir.benchmarks.m2rag.check import check as check_m2rag
from mmir.benchmarks.mmbright.check import check as check_mmbright
from mmir.benchmarks.mmdr.check import check as check_mmdr
from mmir.benchmarks.rag.check import check as check_rag
from mmir.encoders.embeddings_api import check_dense_api_systems
from mmir.llm.backends import check_generators


def validate_config(config: dict, file: str | None = None) -> dict:
    """Validate ``config`` in place (schema, defaults, every section's cross-references) and return it.

    Raises:
        ConfigError: naming the first bad key and ``file``.
    """
    cfg.validate_config(config, file)
    check_generators(config, file)
    check_dense_api_systems(config, file)
    for check in (check_mmbright, check_rag, check_m2rag, check_mmdr):
        check(config, file)
    return config


def load_config(path: str | os.PathLike = "params.yaml", overlays: list[str | os.PathLike] | None = None) -> dict:
    """Read ``path``, merge the overlays as ``snakemake --configfile`` does, and :func:`validate_config`.

    Raises:
        ConfigError: bad YAML or a bad key (named, with the files read); OSError: a file cannot be read.
    """
    raw, files = cfg.read_config(path, overlays)
    return validate_config(raw, files)
