"""Rules of ``pipeline/rules/essentiality.smk``: image essentiality and types (MM-BRIGHT section 3.3-3.4): labels per
domain (classifier through the generation cache, or a labels file), then the distributions and scores by class."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.paths import project_path
from mmir.workflow import units as U
from mmir.workflow.rules.common import (
    Job,
    Rule,
    W,
    captioned,
    image_mode_notes,
    image_text_captions,
    prepared_dir,
    sample_notes,
    stage_cap_notes,
    tracking_output,
    untrained,
    without,
)
from mmir.workflow.units import PreparedUnit

#: keys of ``essentiality`` that choose units or the report's rows, read by no labelling job
ESSENTIALITY_UNIT_KEYS = ("datasets", "systems", "task")


def _essentiality(job: Job):
    from mmir.workflow.essentiality import label_step

    w, p, i = job.wildcards, job.params, job.input
    return label_step(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), p["essentiality"], job.output["labels"],
                      job.output["stats"], captions=i.get("captions"), generator=p["generator"],
                      generation_cache=p["cache"], labels_file=i.get("labels_file"))


def _essentiality_inputs(config: dict, w: W) -> dict:
    e = config["essentiality"]
    files = {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("topics_mm", "query_images")}
    if e["labels"]:
        files["labels_file"] = str(project_path(e["labels"]))
    else:
        files["captions"] = image_text_captions(config, w)
    return files


def _essentiality_params(config: dict, w: W) -> dict:
    e = config["essentiality"]
    if e["labels"]:  # the file route reads no model setting: changing one reruns nothing
        return {"essentiality": {"labels": e["labels"], "max_queries": e["max_queries"]}, "generator": None, "cache": None}
    keep = without(e, *ESSENTIALITY_UNIT_KEYS, "labels", "classifier")
    return {"essentiality": {**keep, "image_text": config["evaluation"]["image_text"]},
            "generator": config["generators"][e["classifier"]], "cache": config["paths"]["generation_cache"]}


def _essentiality_report(job: Job):
    from mmir.workflow.essentiality import report_step

    i, o, p = job.input, job.output, job.params
    keys = [k for u in p["config"]["units"] for k in (f"{u['dataset']}/{u['domain']}/{s}" for s in p["config"]["systems"][u["dataset"]])]
    return report_step(p["config"], list(i["labels"]), list(i["stats"]), dict(zip(keys, i["perquery"])), o["md"], o["csv"],
                       o["plot"], o["plot_data"], o["tracking"])


def _essentiality_report_inputs(config: dict, w: W) -> dict:
    us, task = U.essentiality_units(config), config["essentiality"]["task"]
    return {"labels": [paths.ESSENTIALITY_LABELS.format(**u) for u in us],
            "stats": [paths.ESSENTIALITY_STATS.format(**u) for u in us],
            "perquery": [paths.PERQUERY.format(task=task, system=s, **u) for u in us
                         for s in U.essentiality_systems(config, u["dataset"])]}


def _essentiality_report_params(config: dict, w: W) -> dict:
    e = config["essentiality"]
    us = U.essentiality_units(config)
    systems = {d: U.essentiality_systems(config, d) for d in dict.fromkeys(u["dataset"] for u in us)}
    chosen = {s for v in systems.values() for s in v}
    return {"config": {"essentiality": {**e, "image_text": config["evaluation"]["image_text"]}, "task": e["task"],
                       "generator": None if e["labels"] else config["generators"][e["classifier"]],
                       "measure": config["evaluation"]["primary_measure"], "units": us, "systems": systems,
                       "skipped": U.essentiality_skipped(config), "mlflow": config["mlflow"],
                       "untrained": sorted(s for s in chosen if untrained(config, s))},
            # under the title: the samples, and which query image mode produced each multimodal row
            "samples": sample_notes(config, us) + stage_cap_notes(config, "essentiality", "queries with images")
            + image_mode_notes(config, [{"system": s} for s in sorted(chosen)])}


RULES = (
    Rule(name="essentiality", output={"labels": paths.ESSENTIALITY_LABELS, "stats": paths.ESSENTIALITY_STATS},
         run=_essentiality, input=_essentiality_inputs, params=_essentiality_params, retry_from="{stats}"),
    Rule(name="essentiality_report", output={"md": paths.ESSENTIALITY_MD, "csv": paths.ESSENTIALITY_CSV,
                                             "plot": paths.ESSENTIALITY_PLOT, "plot_data": paths.ESSENTIALITY_PLOT_DATA,
                                             "tracking": tracking_output("essentiality")},
         run=captioned(_essentiality_report), input=_essentiality_report_inputs, params=_essentiality_report_params),
)
