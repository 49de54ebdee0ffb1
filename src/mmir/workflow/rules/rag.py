"""Rules of ``pipeline/rules/rag.smk``: RAG QA with an LLM judge (MM-BRIGHT section 5, Table 7) per (dataset, domain,
setting), then the table."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.data.domains import has_query_images
from mmir.workflow import units as U
from mmir.workflow.rules.common import (
    Job,
    Rule,
    W,
    captioned,
    image_text_captions,
    prepared_dir,
    sample_notes,
    stage_cap_notes,
    tracking_output,
    without,
)
from mmir.workflow.units import PreparedUnit


def rag_unit(config: dict, w: W) -> dict:
    for u in U.rag_units(config):
        if (u["dataset"], u["domain"], u["slug"]) == (w["dataset"], w["domain"], w["slug"]):
            return u
    raise ConfigError("rag.settings", f"no RAG unit {w['dataset']}/{w['domain']}/{w['slug']}")


def _rag(job: Job):
    from mmir.workflow import steps

    w, p = job.wildcards, job.params
    return steps.rag(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), p["setting"], p["rag"], p["generator"],
                     p["judge"], p["cache"], paths.RAG.format(**w), job.input.get("run"), job.input.get("captions"))


def _rag_inputs(config: dict, w: W) -> dict:
    u = rag_unit(config, w)
    files = {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
             "qrels": paths.prepared(w["dataset"], w["domain"], "qrels.task1.txt"),
             "images": paths.prepared(w["dataset"], w["domain"], "images.parquet")}
    if u["setting"].startswith("topk:"):
        files["run"] = paths.RUN.format(task=config["rag"]["task"], dataset=w["dataset"], domain=w["domain"],
                                        system=u["setting"][5:])
    if has_query_images(config["datasets"][w["dataset"]], w["domain"]):
        files["captions"] = image_text_captions(config, w)
    return files


def _rag_params(config: dict, w: W) -> dict:
    rag = config["rag"]
    return {"setting": rag_unit(config, w)["setting"], "rag": without(rag, "datasets", "settings"),
            "generator": config["generators"][rag["generator"]], "judge": config["generators"][rag["judge"]],
            "cache": config["paths"]["generation_cache"]}


def _rag_report(job: Job):
    from mmir.workflow import steps

    o = job.output
    return steps.rag_report(job.params["config"], list(job.input["summaries"]), o["md"], o["csv"], o["tracking"],
                            list(job.input["judgments"]))


def _rag_report_inputs(config: dict, w: W) -> dict:
    us = U.rag_units(config)
    return {"summaries": [f"{paths.RAG.format(**u)}/summary.json" for u in us],
            "judgments": [f"{paths.RAG.format(**u)}/judgments.parquet" for u in us]}


def _rag_report_params(config: dict, w: W) -> dict:
    rag = config["rag"]
    gens = {g: config["generators"][g] for g in (rag["generator"], rag["judge"])}
    return {"config": {"rag": rag, "generators": gens, "mlflow": config["mlflow"], "significance": config["significance"]},
            "samples": sample_notes(config, U.rag_units(config)) + stage_cap_notes(config, "rag", "queries with a reference answer")}


RULES = (
    Rule(name="rag", output={"answers": f"{paths.RAG}/answers.parquet", "judgments": f"{paths.RAG}/judgments.parquet",
                             "summary": f"{paths.RAG}/summary.json"},
         run=_rag, input=_rag_inputs, params=_rag_params, retry_from="{summary}"),
    Rule(name="rag_report", output={"md": paths.RAG_TABLE_MD, "csv": paths.RAG_TABLE_CSV, "tracking": tracking_output("rag")},
         run=captioned(_rag_report), input=_rag_report_inputs, params=_rag_report_params),
)
