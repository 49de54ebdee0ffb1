"""params.yaml: load, validate against workflow/schemas/params.schema.yaml, fill defaults.

Validation happens once, before any job starts (Snakefile and CLI alike); an error names the offending key
as a dotted path. Every default lives in the schema, so the validated dict is complete and rules never
guess.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from mmir.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = PROJECT_ROOT / "workflow" / "schemas" / "params.schema.yaml"

# The 29 MM-BRIGHT domains as hub splits (README of the released code; used when `domains: all` cannot
# list the repository, e.g. for a dry run).
MM_BRIGHT_DOMAINS = [
    "academia", "apple", "aviation", "bioacoustics", "bioinformatics", "biology", "bitcoin", "chemistry",
    "christianity", "crypto", "earth_science", "economics", "gaming", "gis", "islam", "law", "math",
    "medical_sciences", "philosophy", "physics", "pm", "psychology", "quant", "quantum_computing",
    "robotics", "salesforce", "sustainability", "travel", "ubuntu",
]


def _with_defaults(cls):
    """A validator class that also writes each schema ``default`` into the instance."""
    validate_props = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft202012Validator)


def load_schema() -> dict:
    """The params.yaml JSON schema as a dict."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


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


def validate_config(config: dict, file: str | None = None) -> dict:
    """Validate ``config`` in place against the schema and fill defaults.

    Returns the same dict (validated, complete). Raises :class:`ConfigError` naming the first bad key.
    """
    if not isinstance(config, dict):
        raise ConfigError("<root>", "params must be a mapping", file)
    validator = _Validator(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.message)))
    if errors:
        err = _deepest(errors[0])
        raise ConfigError(_key_of(err), err.message, file)
    # Cross-key checks the schema cannot express.
    primary = config["evaluation"]["primary_measure"]
    if primary not in config["measures"]:
        raise ConfigError("evaluation.primary_measure", f"{primary!r} is not listed in measures", file)
    mm_tasks = [t for t in config["tasks"] if t != "task1"]
    text_systems = [n for n, s in config["systems"].items() if s["kind"] in ("bm25", "dense")]
    if mm_tasks and text_systems and config["evaluation"]["image_text"] not in config["captioners"]:
        raise ConfigError("evaluation.image_text", f"{config['evaluation']['image_text']!r} is not a key of captioners "
                          f"(text systems {', '.join(text_systems)} need image text on {', '.join(mm_tasks)})", file)
    for name, s in config["systems"].items():
        if s["kind"] == "mm" and s["random_init"] and not s["encoder"].startswith("open_clip:"):
            raise ConfigError(f"systems.{name}.random_init", "random weights are supported for open_clip:<arch> encoders", file)
    _check_generative(config, file)
    _check_rag(config, file)
    _check_m2rag(config, file)
    _check_mmdr(config, file)
    for name, ds in config["datasets"].items():
        if ds["source"] == "trec" and ds["domains"] != "all" and len(ds["domains"]) != 1:
            raise ConfigError(f"datasets.{name}.domains", "a trec dataset has exactly one domain", file)
    return config


def _check_generative(config: dict, file: str | None) -> None:
    """Cross-references of captioners, generators, reformulators and ablations."""
    gens, caps, refs = config["generators"], config["captioners"], config["reformulators"]
    from mmir.generation.backends import check_backend_config

    for name, g in gens.items():
        try:
            check_backend_config(g)
        except ConfigError as exc:  # name the full key path, not the backend's own
            raise ConfigError(f"generators.{name}.{exc.key}", str(exc).split(": ", 1)[-1], file) from exc
    for name, c in caps.items():
        if c["kind"] == "vlm" and c["generator"] not in gens:
            raise ConfigError(f"captioners.{name}.generator", f"{c['generator']!r} is not a key of generators", file)
    for name, r in refs.items():
        if r["generator"] not in gens:
            raise ConfigError(f"reformulators.{name}.generator", f"{r['generator']!r} is not a key of generators", file)
        if r["image_text"] not in caps:
            raise ConfigError(f"reformulators.{name}.image_text", f"{r['image_text']!r} is not a key of captioners", file)
    for grid, key, pool in (("caption", "captioners", caps), ("reformulation", "reformulators", refs)):
        ab = config["ablations"][grid]
        for i, s in enumerate(ab["systems"]):
            if s not in config["systems"] or config["systems"][s]["kind"] == "mm":
                raise ConfigError(f"ablations.{grid}.systems.{i}", f"{s!r} is not a bm25/dense system of systems", file)
        for i, v in enumerate(ab[key]):
            if v not in pool:
                raise ConfigError(f"ablations.{grid}.{key}.{i}", f"{v!r} is not a key of {key}", file)


def check_references(config: dict, section: str, file: str | None, **pools: str) -> None:
    """Cross-references of a stage section: for each ``key=pool``, ``config[section][key]`` must be a key of
    ``config[pool]``; the section's ``task`` must be in ``tasks`` and each of its ``datasets`` a dataset.

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


def _check_rag(config: dict, file: str | None) -> None:
    rag = config.get("rag")
    if not rag:
        return
    check_references(config, "rag", file, generator="generators", judge="generators")
    for i, s in enumerate(rag["settings"]):
        if s.startswith("topk:") and s[5:] not in config["systems"]:
            raise ConfigError(f"rag.settings.{i}", f"system {s[5:]!r} is not a key of systems", file)


def _check_m2rag(config: dict, file: str | None) -> None:
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


M2RAG_DEVSET = ("m2rag-bench", "dev", "devset")  # (dataset, domain, source) of the dev-set knowledge bases


def m2rag_units(config: dict) -> list[dict]:
    """``{dataset, domain, source, strategy}`` of the M2RAG stage: each multimodal domain of the chosen
    datasets whose ``task`` run exists for the source system, times the strategies; plus the dev set when
    ``m2rag.devset`` is set (see :data:`M2RAG_DEVSET`)."""
    m = config.get("m2rag")
    if not m:
        return []
    wanted = m["datasets"] or list(config["datasets"])
    kbs = []
    for d, dom in units(config):
        if d not in wanted or not has_multimodal(config["datasets"][d], dom):
            continue
        for s in m["sources"]:
            if any(u["domain"] == dom and u["system"] == s for u in task_units(config, m["task"]) if u["dataset"] == d):
                kbs.append((d, dom, s))
    if m["devset"]:
        kbs.append(M2RAG_DEVSET)
    return [{"dataset": d, "domain": dom, "source": s, "strategy": st} for d, dom, s in kbs for st in m["strategies"]]


def _check_mmdr(config: dict, file: str | None) -> None:
    from mmir.mmdr.pipeline import check_config

    check_config(config, file)


def rag_units(config: dict) -> list[dict]:
    """``{dataset, domain, setting, slug}`` of the RAG stage (slug = setting with ':' as '-', for paths)."""
    rag = config.get("rag")
    if not rag:
        return []
    wanted = rag["datasets"] or list(config["datasets"])
    return [{"dataset": d, "domain": dom, "setting": s, "slug": s.replace(":", "-")}
            for d, dom in units(config) if d in wanted for s in rag["settings"]]


def ablation_systems(config: dict) -> dict[str, dict]:
    """Derived Task 1 systems of the ablation grids: ``{"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr",
    "grid": "caption", "source": "ocr"}, "bm25+ref:qwen": {..., "variant": "ref-qwen", ...}}``."""
    out = {}
    ab = config["ablations"]
    for s in ab["caption"]["systems"]:
        for c in ab["caption"]["captioners"]:
            out[f"{s}+cap:{c}"] = {"base": s, "variant": f"cap-{c}", "grid": "caption", "source": c}
    for s in ab["reformulation"]["systems"]:
        for r in ab["reformulation"]["reformulators"]:
            out[f"{s}+ref:{r}"] = {"base": s, "variant": f"ref-{r}", "grid": "reformulation", "source": r}
    return out


def has_query_images(ds: dict, domain: str) -> bool:
    """Whether a domain's queries can have images (hub MM-BRIGHT; local copies with examples_images)."""
    if ds["source"] != "local":
        return ds["source"] == "hf"
    from mmir.data.parquet import domain_files

    return bool(domain_files(resolve_path(ds["root"]), "examples_images", domain))


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


def load_config(path: str | os.PathLike = "params.yaml", overlays: list[str | os.PathLike] | None = None) -> dict:
    """Read ``path``, merge each overlay file into it as ``snakemake --configfile`` does, and validate.

    Raises:
        ConfigError: bad YAML or a bad key (named, with the files read); OSError: a file cannot be read.
    """
    files = [Path(path), *(Path(o) for o in overlays or [])]
    raw: dict = {}
    for f in files:
        merge_overlay(raw, _read_yaml(f))
    return validate_config(raw, " + ".join(map(str, files)))


def resolve_path(p: str, base: str | os.PathLike | None = None) -> Path:
    """Expand ``~`` and ``$VARS`` and make ``p`` absolute against ``base`` (default: the working directory)."""
    q = Path(os.path.expandvars(os.path.expanduser(p)))
    return q if q.is_absolute() else (Path(base) if base else Path.cwd()) / q


def dataset_domains(name: str, ds: dict) -> list[str]:
    """The domain names of a validated dataset entry; resolves ``all``.

    local: every ``documents/<domain>.parquet`` (or ``<domain>-*.parquet`` shard) under root.
    trec: one domain named after the dataset. hf: listed from the hub repository, and the 29 published
    MM-BRIGHT domains when the hub cannot be reached (so dry runs work offline).
    """
    if ds["domains"] != "all":
        return list(ds["domains"])
    if ds["source"] == "trec":
        return [name]
    if ds["source"] == "local":
        docs = resolve_path(ds["root"]) / "documents"
        if not docs.is_dir():
            raise ConfigError(f"datasets.{name}.root", f"no documents/ directory under {docs.parent}")
        names = {_strip_shard(p.name) for p in docs.glob("*.parquet")}
        return sorted(names)
    from mmir.data.hub import list_hub_domains

    return list_hub_domains(ds["repo_id"], ds["revision"]) or list(MM_BRIGHT_DOMAINS)


def _strip_shard(filename: str) -> str:
    """``biology-00000-of-00001.parquet`` -> ``biology``; ``calculus-1.parquet`` -> ``calculus-1``."""
    import re

    stem = filename[: -len(".parquet")]
    m = re.match(r"^(.*)-\d{5}-of-\d{5}$", stem)
    return m.group(1) if m else stem


def units(config: dict) -> list[tuple[str, str]]:
    """Every (dataset, domain) pair of the config, in config order."""
    return [(name, dom) for name, ds in config["datasets"].items() for dom in dataset_domains(name, ds)]


def has_multimodal(ds: dict, domain: str) -> bool:
    """Whether a domain has Task 2–4 data: hub MM-BRIGHT yes, TREC no, local when examples_multimodal exists."""
    if ds["source"] == "hf":
        return True
    if ds["source"] == "trec":
        return False
    from mmir.data.parquet import domain_files

    return bool(domain_files(resolve_path(ds["root"]), "examples_multimodal", domain))


def task_units(config: dict, task: str) -> list[dict]:
    """``{dataset, domain, system}`` of every unit a task runs on.

    Task 1 (text only, the paper's Table 3) runs the text systems (bm25, dense) on every domain; Tasks 2–4 run
    every system on the domains with multimodal data (text systems through image text). The ablation systems
    are :func:`ablation_units`.
    """
    out = []
    for name, dom in units(config):
        if task == "task1" or has_multimodal(config["datasets"][name], dom):
            out += [{"dataset": name, "domain": dom, "system": s} for s, sys_ in config["systems"].items()
                    if (task != "task1" or sys_["kind"] != "mm") and (sys_.get("tasks") is None or task in sys_["tasks"])]
    return out


ABLATION_TASK = "ablation"  # path segment of the derived systems' runs and metrics (Task 1 queries, qrels)


def ablation_units(config: dict, grid: str) -> list[dict]:
    """Units of an ablation grid, on the domains whose queries have images: ``{task, dataset, domain, system}``
    for each base system (``task1``) and each derived system (``ablation``: Task 1 qrels, own paths)."""
    derived = {n: d for n, d in ablation_systems(config).items() if d["grid"] == grid}
    bases = list(dict.fromkeys(d["base"] for d in derived.values()))
    out = []
    for name, dom in units(config):
        if derived and has_query_images(config["datasets"][name], dom):
            out += [{"task": "task1", "dataset": name, "domain": dom, "system": s} for s in bases]
            out += [{"task": ABLATION_TASK, "dataset": name, "domain": dom, "system": s} for s in derived]
    return out


def config_slice(config: dict, *, dataset: str | None = None, system: str | None = None) -> dict[str, Any]:
    """The part of the config a (dataset, system) step reads: used as rule params and MLflow params."""
    out: dict[str, Any] = {"evaluation": config["evaluation"]}
    if dataset is not None:
        out["dataset"] = {"name": dataset, **config["datasets"][dataset]}
    if system is not None:
        out["system"] = {"name": system, **config["systems"][system]}
    return out
