"""Rules of ``pipeline/rules/generation.smk``: the Task 1 query ablations (MM-BRIGHT section 5): caption-augmented
(augment) and LLM-reformulated (reformulate) queries, BRIGHT's reasoning queries (reason_queries), the grid tables
and their MLflow records."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.tasks import ABLATION_BASE
from mmir.workflow import units as U
from mmir.workflow.rules.common import (
    Job,
    Rule,
    W,
    captioned,
    sample_notes,
    tracked_derived,
    tracked_reranked,
    tracked_slice,
    tracking_output,
    untrained,
    without,
)


def _augment(job: Job):
    from mmir.workflow import steps

    return steps.augment(job.input["topics"], job.input["captions"], job.output["queries"])


def _augment_inputs(config: dict, w: W) -> dict:
    return {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
            "captions": paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=w["source"])}


def _reformulate(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.reformulate(job.input["topics"], job.input["captions"], p["reformulator"], p["generator"],
                             p["cache"], job.output["queries"], job.output["stats"])


def _reformulate_inputs(config: dict, w: W) -> dict:
    ref = config["reformulators"][w["source"]]
    return {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
            "captions": paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=ref["image_text"])}


def _reformulate_params(config: dict, w: W) -> dict:
    ref = config["reformulators"][w["source"]]
    return {"reformulator": ref, "generator": config["generators"][ref["generator"]],
            "cache": config["paths"]["generation_cache"]}


def _reason_queries(job: Job):
    from mmir.workflow import steps

    w = job.wildcards
    return steps.reason_queries(w["dataset"], job.params["dataset"], w["domain"], w["source"], job.output["queries"])


def _reason_queries_inputs(config: dict, w: W) -> dict:
    """The fetched marker of a hub copy, or the variant's parquet files of a local ``root``."""
    from mmir.core.paths import project_path
    from mmir.data.domains import fetched
    from mmir.data.parquet import domain_files

    ds = config["datasets"][w["dataset"]]
    if fetched(ds):
        return {"raw": [paths.FETCHED.format(dataset=w["dataset"], domain=w["domain"])]}
    return {"raw": [str(f) for f in domain_files(project_path(ds["root"]), f"{w['source']}_reason", w["domain"])]}


def _reason_queries_params(config: dict, w: W) -> dict:
    return {"dataset": without(config["datasets"][w["dataset"]], "domains")}


def ablation_metric_files(config: dict, grid: str) -> list[str]:
    return [paths.METRICS.format(**u) for u in U.ablation_units(config, grid)]


def _ablation_report(job: Job):
    from mmir.workflow import steps

    o, p = job.output, job.params
    return steps.ablation_report(job.wildcards["grid"], list(job.input["metrics"]), p["measure"], p["derived"], o["md"],
                                 o["csv"], o["plot"], o["plot_data"], list(job.input.get("perquery", [])) or None,
                                 p.get("reranked"), p.get("significance"), p.get("untrained", []))


def _ablation_report_inputs(config: dict, w: W) -> dict:
    """The grid's metric files; with reranked ablation systems also every per-query file (their tests)."""
    out = {"metrics": ablation_metric_files(config, w["grid"])}
    if U.ablation_reranked(config, w["grid"]):
        out["perquery"] = [paths.PERQUERY.format(**u) for u in U.ablation_units(config, w["grid"])]
    return out


def _ablation_report_params(config: dict, w: W) -> dict:
    derived = {n: d for n, d in U.ablation_systems(config).items() if d["grid"] == w["grid"]}
    out = {"measure": config["evaluation"]["primary_measure"], "derived": derived,
           "samples": sample_notes(config, U.ablation_units(config, w["grid"]))}
    reranked = U.ablation_reranked(config, w["grid"])
    if reranked:  # only then, so a grid without reranked rows keeps its params (and its table is not rebuilt)
        out |= {"reranked": {s: r["base"] for s, r in reranked.items()}, "significance": config["significance"],
                "untrained": [s for s in reranked if untrained(config, s)]}
    return out


def _track_ablation(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.track(p["config"], ABLATION_BASE, p["units"], job.output["tracking"],
                       run_name=f"{job.wildcards['grid']}_ablation", derived=p["derived"], reranked=p.get("reranked"))


def _track_ablation_inputs(config: dict, w: W) -> dict:
    return {"metrics": ablation_metric_files(config, w["grid"]), "table": paths.ABLATION_MD.format(grid=w["grid"])}


def _track_ablation_params(config: dict, w: W) -> dict:
    units = U.ablation_units(config, w["grid"])
    reranked = tracked_reranked(config, units)
    return {"config": tracked_slice(config, units), "units": units, "derived": tracked_derived(config, units),
            **({"reranked": reranked} if reranked else {})}


RULES = (
    Rule(name="augment", output={"queries": paths.QUERIES.replace("{variant}", "cap-{source}")}, run=_augment,
         input=_augment_inputs),
    Rule(name="reformulate", output={"queries": paths.QUERIES.replace("{variant}", "ref-{source}"),
                                     "stats": paths.QUERIES_STATS.replace("{variant}", "ref-{source}")},
         run=_reformulate, input=_reformulate_inputs, params=_reformulate_params, retry_from="{stats}"),
    Rule(name="reason_queries", output={"queries": paths.QUERIES.replace("{variant}", "reason-{source}")},
         run=_reason_queries, input=_reason_queries_inputs, params=_reason_queries_params),
    Rule(name="ablation_report", output={"md": paths.ABLATION_MD, "csv": paths.ABLATION_CSV, "plot": paths.ABLATION_PLOT,
                                         "plot_data": paths.ABLATION_PLOT_DATA},
         run=captioned(_ablation_report), input=_ablation_report_inputs, params=_ablation_report_params),
    Rule(name="track_ablation", output={"tracking": tracking_output("{grid}_ablation")}, run=_track_ablation,
         input=_track_ablation_inputs, params=_track_ablation_params),
)
