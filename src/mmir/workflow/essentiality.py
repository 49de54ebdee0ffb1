"""Image essentiality and image types as pipeline steps (MM-BRIGHT §3.3-3.4, Figures 3, 4, 6, Appendix Tables
16-23). The Snakemake rules (``pipeline/rules/essentiality.smk``) and ``python -m mmir run`` call these.

* :func:`label_step` -- per (dataset, domain): labels of the queries' images, from the classifier (an LLM/VLM through
  the generation cache: one essentiality call per query, one type call per image) or from the user's labels file
  (``essentiality.labels``). Output: ``labels.parquet`` (one row per query image) and ``labels.json`` (counts per
  class, ``llm_calls`` / ``llm_failures``, the model, the prompts and their hashes).
* :func:`report_step` -- the per-domain distributions and the task's primary measure of every system by class, with
  the Essential − Redundant gap (``results/tables/essentiality.{md,csv}``, ``results/plots/essentiality.{png,csv}``),
  and the MLflow runs (a parent, a child per labelled domain, one per dataset with the pooled scores).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mmir.config.models import EssentialityReportParams, fill, parse
from mmir.config.models.essentiality import EssentialityStepConfig
from mmir.core.io import write_json, write_parquet
from mmir.workflow.units import PreparedUnit

log = logging.getLogger("mmir.workflow.essentiality")


def label_step(unit: PreparedUnit, cfg: Mapping[str, Any], out_labels: str | Path,
               out_stats: str | Path, *, captions: str | Path | None = None, generator: Mapping[str, Any] | Any = None,
               generation_cache: str | Path | None = None, labels_file: str | Path | None = None) -> dict:
    """Label one domain's queries (see the module docstring); writes ``out_labels`` and ``out_stats`` atomically.

    Args:
        unit: the prepared domain (``topics_mm.parquet``, ``query_images.parquet``).
        cfg: the ``essentiality`` config slice (``prompt``, ``type_prompt``, ``max_queries`` (0 = all), ``images``,
            ``text_chars``, ``temperature``, ``max_tokens``, ``seed``, ``image_text``).
        captions: the image-text parquet of the captioner ``evaluation.image_text`` (classifier route).
        generator: the classifier's generator config (or a ready backend).
        generation_cache: the SQLite generation cache.
        labels_file: the user's labels file (file route; then no model is called).

    Returns:
        The stats written to ``out_stats``.

    Raises:
        DataError: a bad labels file (file, row, field).
        LLMStageError: every classifier call failed (nothing is written).
    """
    from mmir.benchmarks.mmbright.essentiality import class_counts, labels_from_file, read_labels_file

    cfg = parse(EssentialityStepConfig, dict(cfg), "essentiality")
    t0 = time.perf_counter()
    dataset, domain, prepared_dir = unit.dataset, unit.domain, unit.path
    prep = Path(prepared_dir)
    topics = pd.read_parquet(prep / "topics_mm.parquet", columns=["qid", "query", "image_paths"])
    with_images = int(sum(len(p) > 0 for p in topics["image_paths"]))
    base = {"dataset": dataset, "domain": domain, "topics": len(topics), "topics_with_images": with_images,
            "max_queries": cfg.max_queries}
    if labels_file:
        frame, counts = labels_from_file(read_labels_file(labels_file), topics, dataset, domain, labels_file)
        stats = base | counts | {"source": "file", "labels_file": str(labels_file), "model": None, "llm_calls": 0,
                                 "llm_failures": 0}
    else:
        stats, frame = _classify(topics, prep, cfg, captions, generator, generation_cache, base)
    stats |= {"counts": class_counts(frame), "seconds": round(time.perf_counter() - t0, 2)}
    write_parquet(out_labels, frame)
    write_json(out_stats, stats)
    c = stats["counts"]
    log.info("read %s (%d topics, %d with images)%s; wrote %s: %d queries, %d images labelled (%s source); "
             "essentiality %s; image types %s; %d LLM calls, %d failed (left unlabelled); %.0fs",
             prep, len(topics), with_images, f" and {labels_file}" if labels_file else f" and {captions}", out_labels,
             stats["queries"], stats["images"], stats["source"],
             ", ".join(f"{k} {v}" for k, v in c["essentiality"].items()),
             ", ".join(f"{k} {v}" for k, v in c["image_type"].items() if v), stats["llm_calls"], stats["llm_failures"],
             stats["seconds"])
    skipped = with_images - stats["queries"]
    if skipped:
        log.info("skipped %d queries with images (max_queries %d, or not in the labels file)", skipped, cfg.max_queries)
    if with_images < len(topics):
        log.info("skipped %d queries without a usable image", len(topics) - with_images)
    return stats


def _classify(topics: pd.DataFrame, prep: Path, cfg: EssentialityStepConfig, captions, generator, generation_cache,
              base: dict) -> tuple[dict, pd.DataFrame]:
    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
    from mmir.benchmarks.mmbright.essentiality import classify, select_queries
    from mmir.llm.backends import Backend, make_backend
    from mmir.llm.cache import GenerationCache
    from mmir.llm.client import LLMClient
    from mmir.llm.policy import check_stage

    todo = select_queries(topics, cfg.max_queries)
    cols = ["path", "alt", "bytes"] if cfg.images else ["path", "alt"]
    images = pd.read_parquet(prep / "query_images.parquet", columns=cols)
    caps = pd.read_parquet(captions) if captions else pd.DataFrame(columns=["path", "text"])
    ess_tpl, type_tpl = MMBRIGHT_PROMPTS.get(cfg.prompt), MMBRIGHT_PROMPTS.get(cfg.type_prompt)
    backend = generator if isinstance(generator, Backend) else make_backend(dict(generator))
    with GenerationCache(generation_cache) as cache:
        before = dict(cache.stats)
        client = LLMClient(backend, cache)
        frame, counts = classify(todo, images, dict(zip(caps["path"], caps["text"])), client, ess_tpl, type_tpl, cfg)
        after = dict(cache.stats)
    llm = check_stage("essentiality", f"{base['dataset']}/{base['domain']}", client.audit)
    stats = base | counts | llm | {f"cache_{k}": after[k] - before[k] for k in after} | backend.usage.as_metrics() | {
        "source": "llm", "model": backend.model_id, "image_text": cfg.image_text, "images_sent": cfg.images,
        "prompts": {t.id: t.sha256 for t in (ess_tpl, type_tpl)}}
    return stats, frame


def _note_lines(cfg: EssentialityStepConfig, stats: Sequence[dict], skipped: Sequence[str]) -> list[str]:
    """What the table says about its labels: where they come from, what the model saw, which queries."""
    lines = []
    if cfg.labels:
        lines.append(f"Labels: from the labels file `{cfg.labels}` (supplied by the user).")
    else:
        models = sorted({s["model"] for s in stats if s.get("model")})
        who = f"`{cfg.classifier}` ({', '.join(models) or 'no call made'})"
        lines.append(f"Labels: from {who} on the images themselves plus their OCR text (`{cfg.image_text}`) and alt "
                     "text." if cfg.images else
                     f"Labels: from {who} on the OCR text (`{cfg.image_text}`) + alt text of the query images and the "
                     "query text, **not from the images** (a text-only model; MM-BRIGHT used GPT-4o on the images).")
        lines.append(f"Prompts: `{cfg.prompt}`, `{cfg.type_prompt}` (src/mmir/benchmarks/mmbright/prompts); "
                     f"temperature {cfg.temperature}, max_tokens {cfg.max_tokens}, seed {cfg.seed}.")
    lines.append("Queries labelled per domain: " + (f"the first {cfg.max_queries} with images" if cfg.max_queries
                                                    else "all with images") + " (" + ", ".join(
        f"{s['domain']} {s['queries']} of {s['topics_with_images']}" for s in stats) + ").")
    lines.append("A query's image type is the type of its first typed image (the image Task 2's `image_mode: first` "
                 "encodes). Scores: mean per-query value over the class's queries; `All` pools every domain's queries; "
                 "unlabelled queries are left out, never given a default label. n = queries in the class.")
    for s in skipped:
        lines.append(f"Skipped: {s}.")
    return lines


def report_step(config: Mapping[str, Any], label_files: Sequence[str | Path], stats_files: Sequence[str | Path],
                perquery: Mapping[str, Sequence[str | Path]], out_md, out_csv, out_png, out_plot_csv, out_tracking) -> dict:
    """The essentiality table, plot and MLflow runs.

    Args:
        config: the report's slice: ``essentiality`` (validated section), ``generator`` (the classifier's config or
            None), ``task``, ``measure``, ``units`` (``[{dataset, domain}]`` parallel to ``label_files``), ``systems``
            (per dataset, the systems whose per-query files are in ``perquery``), ``skipped`` (notes),
            ``untrained`` (systems to label so), ``mlflow``.
        label_files, stats_files: the label step's outputs of each unit.
        perquery: ``{"<dataset>/<domain>/<system>": per-query file}`` of the task's score step.

    Returns:
        ``{"parent", "children"}`` MLflow run ids (also written to ``out_tracking``).
    """
    from mmir.evaluation.significance import read_perquery
    from mmir.reporting.essentiality import ALL, EssentialityFiles, distribution, query_classes, scores_by_class, write_essentiality
    from mmir.tracking import log_units

    r = parse(EssentialityReportParams, dict(config), "params")
    ess, measure, task = r.essentiality, r.measure, r.task
    labels, stats, units = {}, [], []
    for u, lf, sf in zip(r.units, label_files, stats_files):
        labels[(u["dataset"], u["domain"])] = pd.read_parquet(lf)
        stats.append(json.loads(Path(sf).read_text(encoding="utf-8")))
    n_perquery = 0
    for (ds, dom), lab in labels.items():
        classes = query_classes(lab)
        for system in r.systems[ds]:
            f = perquery[f"{ds}/{dom}/{system}"]
            units.append({"dataset": ds, "domain": dom, "system": system, "classes": classes,
                          "perquery": read_perquery(f, measure)})
            n_perquery += 1
    dist = distribution(labels)
    scores = scores_by_class(units)
    failures = {(s["dataset"], s["domain"]): s for s in stats}
    notes = _note_lines(ess, stats, r.skipped)
    untrained = {s: f"{s} (untrained)" for s in r.untrained}
    write_essentiality(dist, scores, failures, measure, task, notes, EssentialityFiles(out_md, out_csv, out_png, out_plot_csv),
                       labels=untrained)
    key = measure.replace("@", "_at_")
    runs = []
    for s, lf, sf in zip(stats, label_files, stats_files):
        ds, dom = s["dataset"], s["domain"]
        m = {k: s[k] for k in ("queries", "images", "llm_calls", "llm_failures", "essentiality_failed", "image_type_failed",
                               "seconds") if isinstance(s.get(k), (int, float))}
        m |= {f"essentiality.{c}": v for c, v in s["counts"]["essentiality"].items()}
        m |= {f"image_type.{c}": v for c, v in s["counts"]["image_type"].items()}
        sub = scores[(scores["dataset"] == ds) & (scores["domain"] == dom)]
        m |= {f"{sy}.{f}.{c}.{key}": v for sy, f, c, v in zip(sub["system"], sub["facet"], sub["class"], sub["value"])}
        runs.append({"name": f"essentiality/{ds}/{dom}", "tags": {"rule": "essentiality", "dataset": ds, "domain": dom,
                                                                 "source": s["source"], "model": str(s.get("model") or "")},
                     "metrics": _safe_keys(m), "artifacts": [str(lf), str(sf)]})
    for ds in dict.fromkeys(u["dataset"] for u in r.units):
        sub = scores[(scores["dataset"] == ds) & (scores["domain"] == ALL)]
        m = {f"{sy}.{f}.{c}.{key}": v for sy, f, c, v in zip(sub["system"], sub["facet"], sub["class"], sub["value"])}
        m |= {f"{sy}.{f}.{c}.queries": n for sy, f, c, n in zip(sub["system"], sub["facet"], sub["class"], sub["queries"])}
        runs.append({"name": f"essentiality/{ds}/{ALL}", "tags": {"rule": "essentiality_report", "dataset": ds},
                     "metrics": _safe_keys(m), "artifacts": [str(out_md), str(out_csv), str(out_png)]})
    params = {"essentiality": fill(ess), "generator": r.generator or {}, "task": task, "measure": measure}
    ids = log_units(dict(config), "essentiality", params, runs)
    write_json(out_tracking, ids)
    log.info("read %d label files and %d per-query files; wrote %s, %s, %s, %s (%d score cells); skipped %d domains "
             "(%s); logged MLflow parent %s with %d children", len(label_files), n_perquery, out_md, out_csv, out_png,
             out_plot_csv, len(scores), len(r.skipped), "; ".join(r.skipped) or "none", ids["parent"],
             len(ids["children"]))
    return ids


def _safe_keys(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Metric names MLflow accepts ([A-Za-z0-9_./ -]): other characters (``−``, ``/`` kept) become ``_``."""
    import re

    return {re.sub(r"[^A-Za-z0-9_./ -]", "_", k): float(v) for k, v in metrics.items() if v is not None and v == v}
