"""Rules of ``pipeline/rules/m2rag.smk``: M2RAG (shared/specs/m2rag.md) knowledge bases per (dataset, domain, source),
answers and the eight metrics per strategy, and the table."""

from __future__ import annotations

from pathlib import Path

from mmir.core import paths
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W, captioned, prepared_dir, sample_notes, stage_cap_notes, tracking_output, without
from mmir.workflow.units import PreparedUnit

M2RAG_UNIT_KEYS = ("datasets", "sources", "strategies")  # keys that choose units, read by no job
M2RAG_ANSWER_ONLY = ("generator", "answer_max_tokens", "context_tokens", "recall_threshold", "separate_encoder",
                     "separate_threshold", "released_parse")


def _m2rag_kb(job: Job):
    from mmir.workflow import m2rag

    w, i, p, o = job.wildcards, job.input, job.params, job.output
    if "devset" in i:
        dev = p["m2rag"]["devset"]
        return m2rag.load_dev_set_step(i["devset"], dev["image_root"], p["m2rag"], o["kb"], o["counts"],
                                       levels=dev["levels"])
    return m2rag.build_knowledge_bases_step(PreparedUnit(w["dataset"], w["domain"], prepared_dir(w)), w["source"], i["run"],
                                            p["m2rag"], p["judge"], p["cache"], Path(o["kb"]).parent, i.get("captions"),
                                            i.get("anchors"))


def _m2rag_kb_inputs(config: dict, w: W) -> dict:
    from mmir.workflow.m2rag import kb_inputs

    return kb_inputs(config, w["dataset"], w["domain"], w["source"])


def _m2rag_kb_params(config: dict, w: W) -> dict:
    m = config["m2rag"]
    return {"m2rag": without(m, *M2RAG_UNIT_KEYS, *M2RAG_ANSWER_ONLY), "judge": config["generators"][m["judge"]],
            "cache": config["paths"]["generation_cache"]}


def _m2rag_answer(job: Job):
    from mmir.workflow import m2rag

    w, p = job.wildcards, job.params
    unit = m2rag.AnswerUnit(w["dataset"], w["domain"], w["source"], w["strategy"])
    return m2rag.answer_step(unit, job.input["kb"], p["m2rag"], p["generator"], p["judge"], p["cache"],
                             paths.M2RAG.format(**w), job.input.get("images"), p["encoder"])


def _m2rag_answer_inputs(config: dict, w: W) -> dict:
    files = {"kb": f"{paths.M2RAG_KB.format(**w)}/kb.jsonl"}
    if w["source"] != "devset":
        files["images"] = paths.prepared(w["dataset"], w["domain"], "images.parquet")
    return files


def _m2rag_answer_params(config: dict, w: W) -> dict:
    m = config["m2rag"]
    enc = config["systems"].get(m["separate_encoder"] or "") if w["strategy"] == "separate" else None
    keep = without(m, *M2RAG_UNIT_KEYS, "devset")
    if w["strategy"] != "separate":
        keep = without(keep, "separate_encoder", "separate_threshold")
    return {"m2rag": keep, "generator": config["generators"][m["generator"]], "judge": config["generators"][m["judge"]],
            "encoder": enc, "cache": config["paths"]["generation_cache"]}


def _m2rag_report(job: Job):
    from mmir.workflow import m2rag

    o = job.output
    return m2rag.report_step(job.params["config"], list(job.input["summaries"]), o["md"], o["csv"], o["tracking"])


def _m2rag_report_inputs(config: dict, w: W) -> dict:
    return {"summaries": [f"{paths.M2RAG.format(**u)}/summary.json" for u in U.m2rag_units(config)]}


def _m2rag_report_params(config: dict, w: W) -> dict:
    m = config["m2rag"]
    gens = {g: config["generators"][g] for g in (m["generator"], m["judge"])}
    return {"config": {"m2rag": m, "generators": gens, "mlflow": config["mlflow"]},
            "samples": sample_notes(config, U.m2rag_units(config)) + stage_cap_notes(config, "m2rag", "topics")}


RULES = (
    Rule(name="m2rag_kb", output={"kb": f"{paths.M2RAG_KB}/kb.jsonl", "counts": f"{paths.M2RAG_KB}/kb.json"},
         run=_m2rag_kb, input=_m2rag_kb_inputs, params=_m2rag_kb_params, retry_from="{counts}"),
    Rule(name="m2rag_answer", output={"answers": f"{paths.M2RAG}/answers.jsonl",
                                      "evaluations": f"{paths.M2RAG}/evaluations.jsonl",
                                      "summary": f"{paths.M2RAG}/summary.json"},
         run=_m2rag_answer, input=_m2rag_answer_inputs, params=_m2rag_answer_params, retry_from="{summary}"),
    Rule(name="m2rag_report", output={"md": paths.M2RAG_TABLE_MD, "csv": paths.M2RAG_TABLE_CSV,
                                      "tracking": tracking_output("m2rag")},
         run=captioned(_m2rag_report), input=_m2rag_report_inputs, params=_m2rag_report_params),
)
