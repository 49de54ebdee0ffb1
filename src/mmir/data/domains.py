"""Which domains a dataset has (``domains: all``), and which carry Task 2–4 data or query images.

Local copies list ``documents/*.parquet``, a TREC collection is one domain, hub datasets are listed from the
repository (:data:`MM_BRIGHT_DOMAINS` offline).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mmir.config.models import Dataset, parse_dataset
from mmir.core.errors import ConfigError
from mmir.core.paths import resolve_path

# The 29 MM-BRIGHT domains exactly as the hub spells its splits (revision 97702ca9…, the MTEB port's
# descriptive statistics; ../shared/data/mm-bright-stats/domains.tsv).
MM_BRIGHT_DOMAINS = [
    "academia", "apple", "askubuntu", "aviation", "bioacoustics", "bioinformatics", "biology", "bitcoin",
    "chemistry", "christianity", "crypto", "earthscience", "economics", "gaming", "gis", "islam", "law", "math",
    "medicalsciences", "philosophy", "physics", "pm", "psychology", "quant", "quantumcomputing", "robotics",
    "salesforce", "sustainability", "travel",
]

_SHARD = re.compile(r"^(.*)-\d{5}-of-\d{5}$")


def strip_shard(filename: str) -> str:
    """``biology-00000-of-00001.parquet`` -> ``biology``; ``calculus-1.parquet`` -> ``calculus-1``."""
    stem = filename[: -len(".parquet")]
    m = _SHARD.match(stem)
    return m.group(1) if m else stem


def fetched(ds: Dataset | Mapping) -> bool:
    """Whether a dataset's files are fetched from the hub into ``data/raw/<dataset>/`` (the fetch rule): ``hf``, and
    ``bright`` or ``beir`` without a local ``root``."""
    ds = parse_dataset(ds)
    return ds.source == "hf" or (ds.source in ("bright", "beir") and ds.root is None)


def dataset_domains(name: str, ds: Dataset | Mapping) -> list[str]:
    """The domain names of a validated dataset entry ``datasets.<name>``; resolves ``all``.

    Raises:
        ConfigError: ``datasets.<name>.root`` of a local dataset has no ``documents/`` folder.
    """
    ds = parse_dataset(ds, f"datasets.{name}")
    if ds.domains != "all":
        return list(ds.domains)
    if ds.source in ("trec", "beir", "ir_datasets"):
        return [name]
    if ds.source == "bright":
        from mmir.data.bright import BRIGHT_TASKS, LONG_TASKS

        return list(LONG_TASKS if ds.long_context else BRIGHT_TASKS)
    if ds.source == "local":
        docs = resolve_path(ds.root) / "documents"
        if not docs.is_dir():
            raise ConfigError(f"datasets.{name}.root", f"no documents/ directory under {docs.parent}")
        return sorted({strip_shard(p.name) for p in docs.glob("*.parquet")})
    from mmir.data.hub import list_hub_domains

    return list_hub_domains(ds.repo_id, ds.revision) or list(MM_BRIGHT_DOMAINS)


def check_dataset(name: str, ds: Dataset | Mapping, file: str | None = None) -> None:
    """Check a dataset entry before any job: a ``local``/``trec`` root exists, an ``ir_datasets`` id is registered, and
    each listed domain is in the data.

    Raises:
        ConfigError: naming ``datasets.<name>.root``, ``.dataset_id``, ``.register_module`` or ``.domains.<i>``.
    """
    ds = parse_dataset(ds, f"datasets.{name}", file)
    if ds.source in ("local", "trec") or (ds.source in ("beir", "bright") and ds.root is not None):
        root = resolve_path(ds.root)
        if not root.is_dir():
            raise ConfigError(f"datasets.{name}.root", f"{root} does not exist or is not a directory", file)
        if ds.source == "local" and not (root / "documents").is_dir():
            raise ConfigError(f"datasets.{name}.root", f"no documents/ directory under {root} (the MM-BRIGHT layout "
                              "is <root>/<config>/<domain>.parquet)", file)
    if ds.source == "ir_datasets":
        _check_irds_id(name, ds, file)
    if ds.domains == "all" or ds.source in ("trec", "beir", "ir_datasets"):
        return
    if ds.source == "bright":
        from mmir.data.bright import BRIGHT_TASKS, LONG_TASKS

        tasks = LONG_TASKS if ds.long_context else BRIGHT_TASKS
        for i, dom in enumerate(ds.domains):
            if dom not in tasks:
                raise ConfigError(f"datasets.{name}.domains.{i}", f"{dom!r} is not a BRIGHT task"
                                  f"{' with long documents' if ds.long_context else ''} (tasks: {', '.join(tasks)})", file)
        return
    if ds.source == "local":
        where = str(resolve_path(ds.root))
        available = dataset_domains(name, ds.model_copy(update={"domains": "all"}))
    else:
        from mmir.data.hub import list_hub_domains

        listed = list_hub_domains(ds.repo_id, ds.revision)
        where = f"{ds.repo_id}@{ds.revision}" + ("" if listed else " (hub unreachable: the published list)")
        available = listed or list(MM_BRIGHT_DOMAINS)
    for i, dom in enumerate(ds.domains):
        if dom not in available:
            raise ConfigError(f"datasets.{name}.domains.{i}",
                              f"{dom!r} is not a domain of {where} (has: {', '.join(available) or 'none'})", file)


def _check_irds_id(name: str, ds, file: str | None) -> None:
    from mmir.data.irds import unknown_id

    try:
        why = unknown_id(ds)
    except ImportError as exc:
        raise ConfigError(f"datasets.{name}.register_module", f"cannot import {ds.register_module!r}: {exc}", file) from exc
    if why:
        raise ConfigError(f"datasets.{name}.dataset_id", f"{ds.dataset_id!r} is {why}", file)


def has_multimodal(ds: Dataset | Mapping, domain: str) -> bool:
    """Whether a domain has Task 2–4 data: hub MM-BRIGHT yes, TREC no, local when examples_multimodal exists."""
    ds = parse_dataset(ds)
    if ds.source == "hf":
        return True
    if ds.source in ("trec", "ir_datasets", "bright"):
        return False
    if ds.source == "beir":
        from mmir.data.beir import has_images

        return has_images(ds)
    from mmir.data.parquet import domain_files

    return bool(domain_files(resolve_path(ds.root), "examples_multimodal", domain))


def has_query_images(ds: Dataset | Mapping, domain: str) -> bool:
    """Whether a domain's queries can have images (hub MM-BRIGHT; local copies with examples_images)."""
    ds = parse_dataset(ds)
    if ds.source != "local":
        return ds.source == "hf"
    from mmir.data.parquet import domain_files

    return bool(domain_files(resolve_path(ds.root), "examples_images", domain))
