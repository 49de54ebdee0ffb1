"""params.yaml: read, merge overlays, expand system presets, validate through the typed models
(:mod:`mmir.config.models`), fill defaults.

Generic cross-references only; each benchmark checks its own section (``mmir.workflow.validate``). Errors name
the dotted key. Presets: ``src/mmir/config/presets.yaml`` (:func:`load_presets`, :func:`expand_presets`).
The JSON schema ``src/mmir/pipeline/schemas/params.schema.yaml`` is generated from the models (:mod:`mmir.config.schema`).
"""

from __future__ import annotations

import copy
import functools
import os
import string
from pathlib import Path

import yaml

from mmir.config.models import Params, fill, parse_params
from mmir.core.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "pipeline" / "schemas" / "params.schema.yaml"
PRESETS_PATH = Path(__file__).resolve().parent / "presets.yaml"


#: sections an overlay switches off with ``null``, and mappings whose ``null`` entries an overlay removes
OPTIONAL_SECTIONS = ("rag", "m2rag", "mmdr", "essentiality", "audit")
REMOVABLE_ENTRIES = ("datasets", "systems", "captioners", "generators", "reformulators", "rerankers")


def drop_nulls(config: dict) -> dict:
    """Apply an overlay's removals in place: ``rag: null`` (likewise ``m2rag``, ``mmdr``, ``essentiality``, ``audit``,
    ``ablations`` or one of its grids) switches the stage off, ``datasets: {vaswani: null}`` (likewise systems,
    captioners, generators, reformulators) removes that entry."""
    for key in OPTIONAL_SECTIONS:
        if key in config and config[key] is None:
            del config[key]
    if "ablations" in config:  # ablations: null, or ablations: {caption: null}: no system in that grid
        grids = config["ablations"] if config["ablations"] is not None else dict.fromkeys(("caption", "reformulation", "reasoning"))
        config["ablations"] = {g: ({"systems": []} if v is None else v) for g, v in grids.items()}
    for key in REMOVABLE_ENTRIES:
        if isinstance(config.get(key), dict):
            for name in [n for n, v in config[key].items() if v is None]:
                del config[key][name]
    return config


@functools.lru_cache(maxsize=1)
def _presets_file() -> dict:
    with open(PRESETS_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["presets"]


def load_presets() -> dict:
    """The preset catalogue: ``{name: {"system": {...}, "paper", "published", "status", ...}}`` (a deep copy)."""
    return copy.deepcopy(_presets_file())


def expand_presets(config: dict, file: str | None = None) -> dict:
    """Replace each ``systems.<name>`` naming a ``preset`` by the preset's keys overlaid with its own (in place, idempotent).

    Raises:
        ConfigError: ``systems.<name>.preset`` is not a string or not a preset (the message lists them).
    """
    systems = config.get("systems")
    if not isinstance(systems, dict):
        return config
    presets = _presets_file()
    for name, system in systems.items():
        if not isinstance(system, dict) or "preset" not in system:
            continue
        preset = system["preset"]
        if preset is None:  # already expanded and filled (validate_config is idempotent)
            continue
        if not isinstance(preset, str) or preset not in presets:
            raise ConfigError(f"systems.{name}.preset", f"unknown preset {preset!r}; known: {', '.join(sorted(presets))} "
                              f"(src/mmir/config/presets.yaml)", file)
        systems[name] = copy.deepcopy(presets[preset]["system"]) | system
    return config


RERANKER_PRESETS_PATH = Path(__file__).resolve().parent / "reranker_presets.yaml"


@functools.lru_cache(maxsize=1)
def _reranker_presets_file() -> dict:
    with open(RERANKER_PRESETS_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["presets"]


def load_reranker_presets() -> dict:
    """The reranker presets: ``{name: {"reranker": {...}, "status", "source"}}`` (a deep copy)."""
    return copy.deepcopy(_reranker_presets_file())


def expand_reranker_presets(config: dict, file: str | None = None) -> dict:
    """Replace each ``rerankers.<name>`` naming a ``preset`` by the preset's keys overlaid with its own (in place,
    idempotent: the ``preset`` key is kept, and a filled one is already expanded).

    Raises:
        ConfigError: ``rerankers.<name>.preset`` is not a preset (the message lists them).
    """
    rerankers = config.get("rerankers")
    if not isinstance(rerankers, dict):
        return config
    presets = _reranker_presets_file()
    for name, r in rerankers.items():
        if not isinstance(r, dict) or r.get("preset") is None or "kind" in r:
            continue
        if r["preset"] not in presets:
            raise ConfigError(f"rerankers.{name}.preset", f"unknown preset {r['preset']!r}; known: {', '.join(sorted(presets))} "
                              "(src/mmir/config/reranker_presets.yaml)", file)
        rerankers[name] = copy.deepcopy(presets[r["preset"]]["reranker"]) | r
    return config


def _check_templates(params: Params, file: str | None) -> None:
    for name, s in params.systems.items():
        if s.kind != "dense" or s.backend == "plugin":  # a plug-in has no templates
            continue
        for key in ("query_template", "doc_template"):
            template = getattr(s, key)
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
            except ValueError as exc:  # unbalanced braces
                raise ConfigError(f"systems.{name}.{key}", f"{template!r}: {exc}", file) from exc
            bad = sorted(set(fields) - {"text", "domain"})
            if bad or fields.count("text") != 1:
                raise ConfigError(f"systems.{name}.{key}", f"{template!r}: a template holds {{text}} exactly once and "
                                  f"may hold {{domain}}" + (f" (unknown: {bad})" if bad else ""), file)


def check_params(params: Params, file: str | None = None) -> None:
    """Cross-key checks the models cannot express one field at a time.

    Raises:
        ConfigError: naming the key (``evaluation.primary_measure``, ``systems.<name>.random_init``, ...).
    """
    ev = params.evaluation
    if ev.primary_measure not in params.measures:
        raise ConfigError("evaluation.primary_measure", f"{ev.primary_measure!r} is not listed in measures", file)
    mm_tasks = [t for t in params.tasks if t != "task1"]
    text_systems = [n for n, s in params.systems.items()
                    if s.kind in ("bm25", "dense") or (s.kind == "multivector" and s.backend in ("colbert", "plugin"))]
    if mm_tasks and text_systems and ev.image_text not in params.captioners:
        raise ConfigError("evaluation.image_text", f"{ev.image_text!r} is not a key of captioners (text systems "
                          f"{', '.join(text_systems)} need image text on {', '.join(mm_tasks)})", file)
    _check_templates(params, file)
    for name, s in params.systems.items():
        if s.kind == "mm" and getattr(s, "random_init", False) and not s.encoder.startswith("open_clip:"):
            raise ConfigError(f"systems.{name}.random_init", "random weights are supported for open_clip:<arch> encoders", file)
    for name, ds in params.datasets.items():
        if ds.source in ("trec", "beir", "ir_datasets") and ds.domains != "all" and len(ds.domains) != 1:
            raise ConfigError(f"datasets.{name}.domains", f"a {ds.source} dataset has exactly one domain", file)
    reasoning = params.ablations.reasoning
    if reasoning.systems:
        bright = {n: ds for n, ds in params.datasets.items() if ds.source == "bright"}
        if not bright:
            raise ConfigError("ablations.reasoning", "the reasoning grid runs on bright datasets; there is none", file)
        for i, v in enumerate(reasoning.variants):
            for n, ds in bright.items():
                if v not in ds.reasoning:
                    raise ConfigError(f"ablations.reasoning.variants.{i}", f"{v!r} is not fetched by datasets.{n}.reasoning "
                                      f"({ds.reasoning}); add it there", file)


def validate_config(config: dict, file: str | None = None) -> dict:
    """Drop an overlay's nulls, expand system presets, validate ``config`` through :class:`~mmir.config.models.Params`
    and write every default into it.

    Returns the same dict (validated, complete, JSON-like). Raises :class:`ConfigError` naming the first bad key.
    """
    if not isinstance(config, dict):
        raise ConfigError("<root>", "params must be a mapping", file)
    drop_nulls(config)
    expand_presets(config, file)
    expand_reranker_presets(config, file)
    params = parse_params(config, file)
    check_params(params, file)
    filled = fill(params)
    config.clear()
    config.update({k: v for k, v in filled.items() if not (k in OPTIONAL_SECTIONS and v is None)})
    return config


def check_references(params: Params, section: str, file: str | None, **pools: str) -> None:
    """Cross-references of a stage section: each ``key=pool`` value a key of ``params.<pool>``; ``task``/``datasets``
    known.

    Raises:
        ConfigError: naming ``<section>.<key>`` (``<section>.datasets.<i>`` for a dataset).
    """
    sec = getattr(params, section)
    for key, pool in pools.items():
        if getattr(sec, key) not in getattr(params, pool):
            raise ConfigError(f"{section}.{key}", f"{getattr(sec, key)!r} is not a key of {pool}", file)
    task = getattr(sec, "task", None)
    if task is not None and task not in params.tasks:
        raise ConfigError(f"{section}.task", f"{task!r} is not in tasks", file)
    for i, d in enumerate(getattr(sec, "datasets", None) or []):
        if d not in params.datasets:
            raise ConfigError(f"{section}.datasets.{i}", f"{d!r} is not a key of datasets", file)


def _read_yaml(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        try:
            return yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            raise ConfigError("<root>", f"not valid YAML: {exc}", str(path)) from exc


def merge_overlay(base: dict, overlay: dict) -> dict:
    """``overlay`` merged into ``base`` key by key, recursively: mappings merge, any other value replaces (a mapping
    over a ``null`` too: ``rag: null`` then ``rag: {k: 3}`` is ``{k: 3}``). A key new to ``base`` comes after its keys,
    so params.yaml's systems and datasets keep their place and an overlay's new ones follow in the overlay's order.
    ``base`` is updated and returned."""
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_overlay(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def merge_config_files(files: list[str | os.PathLike], overrides: dict | None = None) -> dict:
    """The raw config of ``files`` merged in order (:func:`merge_overlay`), then ``overrides`` (``snakemake --config
    key=value``). Snakemake (``pipeline/rules/common.smk``, from its own list of config files) and ``python -m mmir``
    (:func:`read_config`) both build their config with it, so they see one config, key order included.

    Raises:
        ConfigError: bad YAML (named, with the file); OSError: a file cannot be read.
    """
    raw: dict = {}
    for f in files:
        merge_overlay(raw, _read_yaml(Path(f)))
    return merge_overlay(raw, dict(overrides or {}))


def read_config(path: str | os.PathLike = "params.yaml", overlays: list[str | os.PathLike] | None = None) -> tuple[dict, str]:
    """Read ``path`` and merge each overlay into it (:func:`merge_config_files`; not validated).

    Returns:
        ``(raw config, "<file> + <overlay> ...")``.

    Raises:
        ConfigError: bad YAML (named, with the file); OSError: a file cannot be read.
    """
    files = [Path(path), *(Path(o) for o in overlays or [])]
    return merge_config_files(files), " + ".join(map(str, files))
