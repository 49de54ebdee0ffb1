"""Rules of ``pipeline/rules/audit.smk``: the quality audit of MM-BRIGHT §3 -- an LLM judge rates each query with its
positive documents per domain, then the per-domain table with intervals."""

from __future__ import annotations

from mmir.core import paths
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W, captioned, prepared_dir, sample_notes, stage_cap_notes, tracking_output, without
from mmir.workflow.units import PreparedUnit


def _audit(job: Job):
    from mmir.workflow.audit import rate_step

    w, p, o = job.wildcards, job.params, job.output
    return rate_step(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), p["audit"], o["ratings"], o["calls"],
                     o["stats"], generator=p["generator"], generation_cache=p["cache"])


def _audit_inputs(config: dict, w: W) -> dict:
    return {n: paths.prepared(w["dataset"], w["domain"], f) for n, f in
            (("topics", "topics.parquet"), ("corpus", "corpus.parquet"), ("qrels", "qrels.task1.txt"))}


def _audit_params(config: dict, w: W) -> dict:
    a = config["audit"]
    return {"audit": without(a, "datasets", "enabled"), "generator": config["generators"][a["judge"]],
            "cache": config["paths"]["generation_cache"]}


def _audit_report(job: Job):
    from mmir.workflow.audit import report_step

    i, o = job.input, job.output
    return report_step(job.params["config"], list(i["ratings"]), list(i["stats"]), o["md"], o["csv"], o["tracking"])


def _audit_report_inputs(config: dict, w: W) -> dict:
    us = U.audit_units(config)
    return {"ratings": [paths.AUDIT_RATINGS.format(**u) for u in us], "stats": [paths.AUDIT_STATS.format(**u) for u in us]}


def _audit_report_params(config: dict, w: W) -> dict:
    a, us = config["audit"], U.audit_units(config)
    return {"config": {"audit": a, "generator": config["generators"][a["judge"]],
                       "confidence": config["significance"]["confidence"], "units": us, "mlflow": config["mlflow"]},
            "samples": sample_notes(config, us) + stage_cap_notes(config, "audit", "queries with a positive document")}


RULES = (
    Rule(name="audit", output={"ratings": paths.AUDIT_RATINGS, "calls": paths.AUDIT_CALLS, "stats": paths.AUDIT_STATS},
         run=_audit, input=_audit_inputs, params=_audit_params, retry_from="{stats}"),
    Rule(name="audit_report", output={"md": paths.AUDIT_MD, "csv": paths.AUDIT_CSV, "tracking": tracking_output("audit")},
         run=captioned(_audit_report), input=_audit_report_inputs, params=_audit_report_params),
)
