"""Rules of ``workflow/rules/report.smk``: report (the paper-style table of a task), track (its MLflow record),
reproduction (expected scores against this run's tables) and report_html (every table on one page, LaTeX)."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.tasks import task as task_spec
from mmir.workflow import units as U
from mmir.workflow.rules.common import (
    Job,
    Rule,
    W,
    approximate,
    image_mode_notes,
    sample_notes,
    tracked_derived,
    tracked_reranked,
    tracked_slice,
    tracking_output,
    untrained,
)


def task_metric_files(config: dict, task: str) -> list[str]:
    return [paths.METRICS.format(task=task, **u) for u in U.task_units(config, task)]


def protocol_label(config: dict, task: str) -> str:
    """How a task table names its protocol (a task with a label protocol, Task 4, adds it)."""
    ev = config["evaluation"]
    return ev["protocol"] + (f", task4 labels: {ev['task4_protocol']}" if task_spec(task).qrels_official else "")


def table_notes(config: dict, task: str) -> list[str]:
    """What a task table says about its inputs: the image text of text systems, how ties were scored."""
    ev = config["evaluation"]
    notes = sample_notes(config, U.task_units(config, task))
    if task_spec(task).multimodal:
        notes.append(f"Text systems (bm25, dense) see images as their `{ev['image_text']}` image text"
                     + (" plus the dataset's alt text for corpus images." if ev["alt_text"] else
                        " only (no alt text: the hub's document_images has none)."))
    notes += image_mode_notes(config, U.task_units(config, task))
    notes.append("Ties are scored in the run's own order (the order the run file lists)." if ev["tie_order"] == "run" else
                 "Ties are re-sorted by trec_eval (document id), as the released scripts.")
    return notes


def _report(job: Job):
    from mmir.reporting.forest import write_forest
    from mmir.workflow import steps

    p, o = job.params, job.output
    out = steps.TableFiles(o["md"], o["csv"], o["metrics"], o["significance"])
    reranked = p.get("reranked") or {}
    stats = {s: [f for f in job.input.get("rerank_stats", []) if f"/{s}/" in f] for s in reranked}
    result = steps.report(job.wildcards["task"], list(job.input["metrics"]), p["measure"], p["protocol"], out, p["untrained"],
                          p["notes"], list(job.input["perquery"]), p["significance"], reranked, stats, p["approximate"])
    write_forest(o["significance"], o["csv"], o["forest"])
    return result


def _report_inputs(config: dict, w: W) -> dict:
    reranked = U.rerank_systems(config)
    return {"metrics": task_metric_files(config, w["task"]),
            "perquery": [paths.PERQUERY.format(task=w["task"], **u) for u in U.task_units(config, w["task"])],
            **({"rerank_stats": [paths.RUN_STATS.format(task=w["task"], **u) for u in U.task_units(config, w["task"])
                                 if u["system"] in reranked]} if reranked else {})}


def _report_params(config: dict, w: W) -> dict:
    systems = {u["system"] for u in U.task_units(config, w["task"])}
    reranked = U.rerank_systems(config)
    return {"measure": config["evaluation"]["primary_measure"], "protocol": protocol_label(config, w["task"]),
            "untrained": sorted(s for s in systems if untrained(config, s)),
            "approximate": sorted(s for s in systems if approximate(config, s)),
            "notes": table_notes(config, w["task"]), "significance": config["significance"],
            **({"reranked": {s: reranked[s]["base"] for s in sorted(systems) if s in reranked}} if systems & set(reranked) else {})}


def _track(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.track(p["config"], job.wildcards["task"], p["units"], job.output["tracking"], derived=p["derived"],
                       significance=job.input["significance"], reranked=p.get("reranked"))


def _track_inputs(config: dict, w: W) -> dict:
    return {"metrics": task_metric_files(config, w["task"]), "table": paths.TABLE_MD.format(task=w["task"]),
            "significance": paths.TABLE_SIGNIFICANCE.format(task=w["task"])}


def _track_params(config: dict, w: W) -> dict:
    units = U.task_units(config, w["task"])
    reranked = tracked_reranked(config, units)
    return {"config": tracked_slice(config, units), "units": units, "derived": tracked_derived(config, units),
            **({"reranked": reranked} if reranked else {})}


def _reproduction(job: Job):
    from mmir.workflow.reproduction import reproduction_step

    i, o = job.input, job.output
    ablations = dict(zip(job.params["grids"], i["ablations"]))
    return reproduction_step(job.params, list(i["expected"]), list(i["tables"]), ablations,
                             i["rag"][0] if i["rag"] else None, o["md"], o["csv"], o["tracking"],
                             i["audit"][0] if i.get("audit") else None)


def _reproduction_inputs(config: dict, w: W) -> dict:
    """The expected files, the task tables' metrics JSON, the ablation, RAG and audit CSVs the config makes."""
    from mmir.workflow.targets import grids

    return {"expected": [paths.project_file(f) for f in config["expected"]],
            "tables": [paths.TABLE_METRICS.format(task=t) for t in config["tasks"]],
            "ablations": [paths.ABLATION_CSV.format(grid=g) for g in grids(config)],
            "rag": [paths.RAG_TABLE_CSV] if U.rag_units(config) else [],
            "audit": [paths.AUDIT_CSV] if U.audit_units(config) else []}


def _reproduction_params(config: dict, w: W) -> dict:
    from mmir.workflow.targets import grids

    return {"expected": list(config["expected"]), "grids": grids(config),
            "presets": {n: s.get("preset") for n, s in config["systems"].items()},
            "datasets": {n: d.get("repo_id") if d["source"] == "hf" else None for n, d in config["datasets"].items()},
            "samples": {n: d.get("sample") for n, d in config["datasets"].items()},
            "measure": config["evaluation"]["primary_measure"], "mlflow": config["mlflow"]}


def _report_html(job: Job):
    from mmir.reporting.query_data import DomainFiles
    from mmir.workflow.report import report_step

    o, p = job.output, job.params
    tex = {k: v for k, v in o.items() if k.startswith("tex_")}
    pages = [DomainFiles(u["task"], u["dataset"], u["domain"], paths.PREPARED.format(**u), u["qrels"],
                         {s: paths.RUN.format(system=s, **u) for s in u["systems"]},
                         {s: paths.PERQUERY.format(system=s, **u) for s in u["systems"]}, p["measure"], p["baseline"],
                         u["first_stage"], essentiality=paths.ESSENTIALITY_LABELS.format(**u) if u["labels"] else None)
             for u in p["query_pages"]]
    return report_step({k: p[k] for k in REPORT_KEYS}, list(job.input["files"]), list(job.input["prepared"]), o["html"],
                       o["lineage"], o["latex"], tex, o["tracking"], pages, o["queries"], paths.THUMBNAIL_CACHE)


def _report_html_tex(config: dict) -> dict[str, str]:
    from mmir.workflow.targets import tex_outputs

    return tex_outputs(config)


def query_page_units(config: dict) -> list[dict]:
    """One entry per query page: ``{task, dataset, domain, systems (table order), first_stage ({reranked: first stage}),
    qrels (the prepared file scored against), labels (the essentiality stage labelled the domain)}``, for every
    table task of the config."""
    from mmir.data.prepare import qrels_file

    reranked = U.rerank_systems(config)
    labelled = {(u["dataset"], u["domain"]) for u in U.essentiality_units(config)}
    out: dict[tuple[str, str, str], dict] = {}
    for t in config["tasks"]:
        for u in U.task_units(config, t):
            e = out.setdefault((t, u["dataset"], u["domain"]), {
                "task": t, "dataset": u["dataset"], "domain": u["domain"], "systems": [], "first_stage": {},
                "qrels": qrels_file(t, config["evaluation"]["task4_protocol"]), "labels": (u["dataset"], u["domain"]) in labelled})
            e["systems"].append(u["system"])
            if u["system"] in reranked:
                e["first_stage"][u["system"]] = reranked[u["system"]]["base"]
    return list(out.values())


def _report_html_inputs(config: dict, w: W) -> dict:
    """Every table, figure and MLflow record of the families the config runs, the prepare reports (lineage), and what
    the query pages read: every task unit's run and per-query values, the prepared topics, qrels, corpus, images and
    pairs of its domain, the essentiality labels of a labelled domain."""
    from mmir.workflow.targets import family_targets, report_files

    units = query_page_units(config)
    prepared = []
    for u in units:
        spec = task_spec(u["task"])
        names = [spec.queries, u["qrels"], "corpus.parquet", "images.parquet", "query_images.parquet",
                 *(["pairs.parquet"] if spec.ranks == "pairs" else [])]
        prepared += [paths.prepared(u["dataset"], u["domain"], n) for n in names]
    return {"files": report_files(config), "prepared": family_targets(config, "prepare"),
            "runs": [paths.RUN.format(system=s, **u) for u in units for s in u["systems"]],
            "perquery": [paths.PERQUERY.format(system=s, **u) for u in units for s in u["systems"]],
            "pages_prepared": list(dict.fromkeys(prepared)),
            "labels": list(dict.fromkeys(paths.ESSENTIALITY_LABELS.format(**u) for u in units if u["labels"]))}


#: The config the report reads: what the lineage names (data, models, generators, prompts of the stages) and MLflow.
REPORT_KEYS = ("datasets", "systems", "generators", "captioners", "reformulators", "ablations", "rag", "m2rag", "mmdr",
               "mlflow", "audit")


def _report_html_params(config: dict, w: W) -> dict:
    return {**{k: config.get(k) for k in REPORT_KEYS}, "query_pages": query_page_units(config),
            "measure": config["evaluation"]["primary_measure"], "baseline": config["significance"]["baseline"]}


RULES = (
    Rule(name="report", output={"md": paths.TABLE_MD, "csv": paths.TABLE_CSV, "metrics": paths.TABLE_METRICS,
                                "significance": paths.TABLE_SIGNIFICANCE, "forest": paths.TABLE_FOREST},
         run=_report, input=_report_inputs, params=_report_params),
    Rule(name="reproduction", output={"md": paths.REPRODUCTION_MD, "csv": paths.REPRODUCTION_CSV,
                                      "tracking": tracking_output("reproduction")},
         run=_reproduction, input=_reproduction_inputs, params=_reproduction_params),
    Rule(name="report_html", output={"html": paths.REPORT_HTML, "lineage": paths.REPORT_LINEAGE, "latex": paths.REPORT_LATEX,
                                     "tracking": tracking_output("report"), "queries": paths.REPORT_QUERIES},
         run=_report_html, input=_report_html_inputs, params=_report_html_params, extra_output=_report_html_tex,
         directories=("queries",)),
    Rule(name="track", output={"tracking": paths.TRACKING}, run=_track, input=_track_inputs, params=_track_params),
)
