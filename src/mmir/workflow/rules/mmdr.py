"""Rules of ``pipeline/rules/mmdr.smk``: MMDeepResearch-Bench (shared/specs/mmdr-bench.md) per (dataset, domain) the
tasks, the baseline's cited reports over a retrieval run and the scored run; then the export, table and MLflow."""

from __future__ import annotations

from mmir.core import paths
from mmir.data.domains import has_query_images
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W, captioned, image_text_captions, prepared_dir, sample_notes, tracking_output
from mmir.workflow.units import PreparedUnit

MMDR_WRITER_KEYS = ("task", "system", "k", "generator", "image_text", "images", "evidence_chars", "report_max_tokens",
                    "posthoc_citations", "posthoc_min_overlap", "report_temperature", "seed", "evaluator")
MMDR_JUDGE_KEYS = ("judge", "judge_max_tokens", "judge_images", "judge_image_text", "seed", "evaluator")


def _mmdr_tasks(job: Job):
    from mmir.workflow import mmdr

    w = job.wildcards
    return mmdr.tasks_step(w["dataset"], w["domain"], prepared_dir(w), job.params["mmdr"], job.output["tasks"])


def _mmdr_tasks_inputs(config: dict, w: W) -> dict:
    return {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("topics", "query_images")}


def _mmdr_tasks_params(config: dict, w: W) -> dict:
    return {"mmdr": {"max_tasks": config["mmdr"]["max_tasks"]}}


def _mmdr_domain_inputs(config: dict, w: W) -> dict[str, str]:
    files = {"tasks": paths.MMDR_TASKS.format(**w),
             **{n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("corpus", "images", "query_images")}}
    if has_query_images(config["datasets"][w["dataset"]], w["domain"]):
        files["captions"] = image_text_captions(config, w)
    return files


def _mmdr_reports(job: Job):
    from mmir.workflow import mmdr

    w, p = job.wildcards, job.params
    return mmdr.reports_step(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), job.input["tasks"], p["mmdr"], p["generator"],
                             p["cache"], job.output["reports"], job.input["run"], job.input.get("captions"))


def _mmdr_reports_inputs(config: dict, w: W) -> dict:
    m = config["mmdr"]
    return {**_mmdr_domain_inputs(config, w),
            "run": paths.RUN.format(task=m["task"], dataset=w["dataset"], domain=w["domain"], system=m["system"])}


def _mmdr_reports_params(config: dict, w: W) -> dict:
    m = config["mmdr"]
    return {"mmdr": {k: m[k] for k in MMDR_WRITER_KEYS}, "generator": config["generators"][m["generator"]],
            "cache": config["paths"]["generation_cache"]}


def _mmdr_score(job: Job):
    from mmir.workflow import mmdr

    w, p = job.wildcards, job.params
    return mmdr.score_step(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), job.input["tasks"], job.input["reports"],
                           p["mmdr"], p["judge"], p["cache"], job.output["run"], job.input.get("captions"))


def _mmdr_score_inputs(config: dict, w: W) -> dict:
    return {**_mmdr_domain_inputs(config, w), "reports": paths.MMDR_REPORTS.format(**w)}


def _mmdr_score_params(config: dict, w: W) -> dict:
    m = config["mmdr"]
    return {"mmdr": {k: m[k] for k in MMDR_JUDGE_KEYS}, "judge": config["generators"][m["judge"]],
            "cache": config["paths"]["generation_cache"]}


def _mmdr_report(job: Job):
    from mmir.workflow import mmdr

    o = job.output
    return mmdr.report_step(job.params["config"], list(job.input["runs"]), list(job.input["reports"]), o["md"],
                            o["csv"], o["export"], o["tracking"])


def _mmdr_report_inputs(config: dict, w: W) -> dict:
    us = U.mmdr_units(config)
    return {"runs": [paths.MMDR_RUN.format(**u) for u in us], "reports": [paths.MMDR_REPORTS.format(**u) for u in us]}


def _mmdr_report_params(config: dict, w: W) -> dict:
    m = config["mmdr"]
    gens = {g: config["generators"][g] for g in (m["generator"], m["judge"])}
    return {"config": {"mmdr": m, "generators": gens, "mlflow": config["mlflow"], "significance": config["significance"]},
            "samples": sample_notes(config, U.mmdr_units(config))}


RULES = (
    Rule(name="mmdr_tasks", output={"tasks": paths.MMDR_TASKS}, run=_mmdr_tasks, input=_mmdr_tasks_inputs,
         params=_mmdr_tasks_params, directories=("tasks",)),
    Rule(name="mmdr_reports", output={"reports": paths.MMDR_REPORTS}, run=_mmdr_reports, input=_mmdr_reports_inputs,
         params=_mmdr_reports_params, directories=("reports",), retry_from="{reports}/summary.json"),
    Rule(name="mmdr_score", output={"run": paths.MMDR_RUN}, run=_mmdr_score, input=_mmdr_score_inputs,
         params=_mmdr_score_params, directories=("run",), retry_from="{run}/summary.json"),
    Rule(name="mmdr_report", output={"export": paths.MMDR_EXPORT, "md": paths.MMDR_TABLE_MD, "csv": paths.MMDR_TABLE_CSV,
                                     "tracking": tracking_output("mmdr")},
         run=captioned(_mmdr_report), input=_mmdr_report_inputs, params=_mmdr_report_params, directories=("export",)),
)
