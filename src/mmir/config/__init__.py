"""params.yaml: read, merge overlays, expand system presets, validate against
workflow/schemas/params.schema.yaml, fill defaults.

Generic cross-references only; each benchmark checks its own section (``mmir.workflow.validate``). Errors name
the dotted key. Presets: ``src/mmir/config/presets.yaml`` (:func:`load_presets`, :func:`expand_presets`).
"""

from __future__ import annotations

import copy
import functools
import os
import string
from pathlib import Path

import jsonschema
import yaml

from mmir.core.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = PROJECT_ROOT / "workflow" / "schemas" / "params.schema.yaml"
PRESETS_PATH = Path(__file__).resolve().parent / "presets.yaml"



def _with_defaults(cls):
    """A validator class that also writes each schema ``default`` into the instance."""
    validate_props = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft202012Validator)


def load_schema() -> dict:
    """The params.yaml JSON schema as a dict."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


#: sections an overlay switches off with ``null``, and mappings whose ``null`` entries an overlay removes
OPTIONAL_SECTIONS = ("rag", "m2rag", "mmdr", "essentiality")
REMOVABLE_ENTRIES = ("datasets", "systems", "captioners", "generators", "reformulators")


def drop_nulls(config: dict) -> dict:
    """Apply an overlay's removals in place: ``rag: null`` (likewise ``m2rag``, ``mmdr``, ``essentiality``,
    ``ablations`` or one of its grids) switches the stage off, ``datasets: {vaswani: null}`` (likewise systems,
    captioners, generators, reformulators) removes that entry."""
    for key in OPTIONAL_SECTIONS:
        if key in config and config[key] is None:
            del config[key]
    if "ablations" in config:  # ablations: null, or ablations: {caption: null}: no system in that grid
        grids = config["ablations"] if config["ablations"] is not None else {"caption": None, "reformulation": None}
        config["ablations"] = {g: ({"systems": []} if v is None else v) for g, v in grids.items()}
    for key in REMOVABLE_ENTRIES:
        if isinstance(config.get(key), dict):
            for name in [n for n, v in config[key].items() if v is None]:
                del config[key][name]
    return config


def _key_of(error: jsonschema.ValidationError) -> str:
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = [r for r in error.validator_value if isinstance(error.instance, dict) and r not in error.instance]
        path += missing[:1]
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        path += extra[:1]
    return ".".join(path) or "<root>"


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # if/then and oneOf wrap the useful error; descend to the most specific one.
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


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
        if not isinstance(preset, str) or preset not in presets:
            raise ConfigError(f"systems.{name}.preset", f"unknown preset {preset!r}; known: {', '.join(sorted(presets))} "
                              f"(src/mmir/config/presets.yaml)", file)
        systems[name] = copy.deepcopy(presets[preset]["system"]) | system
    return config


def _check_templates(config: dict, file: str | None) -> None:
    for name, s in config["systems"].items():
        if s["kind"] != "dense":
            continue
        for key in ("query_template", "doc_template"):
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(s[key]) if f is not None]
            except ValueError as exc:  # unbalanced braces
                raise ConfigError(f"systems.{name}.{key}", f"{s[key]!r}: {exc}", file) from exc
            bad = sorted(set(fields) - {"text", "domain"})
            if bad or fields.count("text") != 1:
                raise ConfigError(f"systems.{name}.{key}", f"{s[key]!r}: a template holds {{text}} exactly once and "
                                  f"may hold {{domain}}" + (f" (unknown: {bad})" if bad else ""), file)


def validate_config(config: dict, file: str | None = None) -> dict:
    """Expand system presets, validate ``config`` in place against the schema and fill defaults.

    Returns the same dict (validated, complete). Raises :class:`ConfigError` naming the first bad key.
    """
    if not isinstance(config, dict):
        raise ConfigError("<root>", "params must be a mapping", file)
    drop_nulls(config)
    expand_presets(config, file)
    validator = _Validator(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.message)))
    if errors:
        err = _deepest(errors[0])
        message = err.message
        if err.validator == "not" and isinstance(err.schema, dict):
            # a forbidden key (api_key): say why, never echo its value (it may be a credential)
            message = err.schema.get("description") or "this key is not allowed here"
        elif err.validator == "const" and isinstance(err.schema, dict) and err.schema.get("description"):
            message = f"{err.schema['description']} (must be {err.validator_value!r})"
        raise ConfigError(_key_of(err), message, file)
    # Cross-key checks the schema cannot express.
    primary = config["evaluation"]["primary_measure"]
    if primary not in config["measures"]:
        raise ConfigError("evaluation.primary_measure", f"{primary!r} is not listed in measures", file)
    mm_tasks = [t for t in config["tasks"] if t != "task1"]
    text_systems = [n for n, s in config["systems"].items() if s["kind"] in ("bm25", "dense")]
    if mm_tasks and text_systems and config["evaluation"]["image_text"] not in config["captioners"]:
        raise ConfigError("evaluation.image_text", f"{config['evaluation']['image_text']!r} is not a key of captioners "
                          f"(text systems {', '.join(text_systems)} need image text on {', '.join(mm_tasks)})", file)
    _check_templates(config, file)
    for name, s in config["systems"].items():
        if s["kind"] == "mm" and s["random_init"] and not s["encoder"].startswith("open_clip:"):
            raise ConfigError(f"systems.{name}.random_init", "random weights are supported for open_clip:<arch> encoders", file)
    for name, ds in config["datasets"].items():
        if ds["source"] == "trec" and ds["domains"] != "all" and len(ds["domains"]) != 1:
            raise ConfigError(f"datasets.{name}.domains", "a trec dataset has exactly one domain", file)
    return config




def check_references(config: dict, section: str, file: str | None, **pools: str) -> None:
    """Cross-references of a stage section: each ``key=pool`` value a key of ``config[pool]``; ``task``/``datasets`` known.

    Raises:
        ConfigError: naming ``<section>.<key>`` (``<section>.datasets.<i>`` for a dataset).
    """
    sec = config[section]
    for key, pool in pools.items():
        if sec[key] not in config[pool]:
            raise ConfigError(f"{section}.{key}", f"{sec[key]!r} is not a key of {pool}", file)
    if "task" in sec and sec["task"] not in config["tasks"]:
        raise ConfigError(f"{section}.task", f"{sec['task']!r} is not in tasks", file)
    for i, d in enumerate(sec.get("datasets") or []):
        if d not in config["datasets"]:
            raise ConfigError(f"{section}.datasets.{i}", f"{d!r} is not a key of datasets", file)


















def _read_yaml(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        try:
            return yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            raise ConfigError("<root>", f"not valid YAML: {exc}", str(path)) from exc


def merge_overlay(base: dict, overlay: dict) -> dict:
    """``overlay`` merged into ``base`` key by key, recursively (Snakemake's ``--configfile`` rule): mappings
    merge, any other value replaces. ``base`` is updated and returned."""
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_overlay(base[key], value)
        else:
            base[key] = value
    return base


def read_config(path: str | os.PathLike = "params.yaml", overlays: list[str | os.PathLike] | None = None) -> tuple[dict, str]:
    """Read ``path`` and merge each overlay as ``snakemake --configfile`` does (not validated).

    Returns:
        ``(raw config, "<file> + <overlay> ...")``.

    Raises:
        ConfigError: bad YAML (named, with the file); OSError: a file cannot be read.
    """
    files = [Path(path), *(Path(o) for o in overlays or [])]
    raw: dict = {}
    for f in files:
        merge_overlay(raw, _read_yaml(f))
    return raw, " + ".join(map(str, files))


















