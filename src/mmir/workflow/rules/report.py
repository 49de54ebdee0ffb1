"""Rules of ``pipeline/rules/report.smk``: report (the paper-style table of a task), track (its MLflow record),
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
    int8_notes,
    sample_notes,
    tracked_derived,
    tracked_reranked,
    tracked_slice,
    tracking_output,
    untrained,
)


def task_metric_files(config: dict, task: str) -> list[str]:
    return [paths.METRICS.format(task=task, **u) for u in U.task_units(config, task)]


def table_notes(config: dict, task: str) -> list[str]:
    """What a task table says about its inputs: the sample, the image text of text systems, the image modes (how ties
    were scored is said per dataset, :mod:`mmir.reporting.cells`)."""
    ev = config["evaluation"]
    notes = sample_notes(config, U.task_units(config, task)) + unscorable_notes(config, task)
    if task_spec(task).multimodal:
        notes.append(f"Text systems (bm25, dense) see images as their `{ev['image_text']}` image text"
                     + (" plus the dataset's alt text for corpus images." if ev["alt_text"] else
                        " only (no alt text: the hub's document_images has none)."))
    notes += image_mode_notes(config, U.task_units(config, task)) + int8_notes(config, U.task_units(config, task))
    return notes


def unscorable_notes(config: dict, task: str) -> list[str]:
    """The sentence naming the domains of ``task`` left out for having no scorable query (nothing was run on them)."""
    left_out = U.unscorable(config)
    doms = dict.fromkeys((u["dataset"], u["domain"]) for u in U.task_units(config, task, scored=False)
                         if (u["dataset"], u["domain"]) in left_out)
    if not doms:
        return []
    return ["Left out, no scorable query (no job ran on them; a dataset's Avg. is over its other domains): "
            + "; ".join(f"{d}/{dom} ({left_out[(d, dom)]})" for d, dom in doms) + "."]


def _report(job: Job):
    from mmir.reporting.experiment_metrics import write_experiment_metrics
    from mmir.reporting.forest import write_forest
    from mmir.workflow import steps

    p, o = job.params, job.output
    out = steps.TableFiles(o["md"], o["csv"], o["metrics"], o["significance"])
    reranked = p.get("reranked") or {}
    stats = {s: [f for f in job.input.get("rerank_stats", []) if f"/{s}/" in f] for s in reranked}
    from mmir.reporting.dropped import qrels_drop_notes

    notes = p["notes"] + qrels_drop_notes(job.input.get("prepared", [])) + image_text_cut_notes(job.input.get("run_stats", []))
    result = steps.report(job.wildcards["task"], list(job.input["metrics"]), p["measure"], p["protocol"], out, p["untrained"],
                          notes, list(job.input["perquery"]), p["significance"], reranked, stats, p["approximate"],
                          p["task4_protocol"], p["baselines"], p.get("no_unit"))
    write_forest(o["significance"], o["csv"], o["forest"])
    write_experiment_metrics(job.wildcards["task"], o["metrics"], o["significance"], o["summary"], o["summary_forest"])
    if p.get("mteb_references"):  # after the tables, their bold and their tests: reference rows take part in none
        mteb_reference_rows(job.wildcards["task"], p["measure"], p["mteb_references"], o["md"], o["csv"])
    return result


def image_text_cut_notes(run_stats: list[str]) -> list[str]:
    """One caption sentence per system whose encoder cut image text (issue 31 items 8, 13), from the retrieve stats of
    the table's runs (``results/runs/<task>/<dataset>/<system>/<domain>.stats.json``)."""
    import json
    from pathlib import Path

    from mmir.reporting.cuts import image_text_cut_notes as notes

    by_system: dict[str, list[dict]] = {}
    for f in run_stats:
        by_system.setdefault(Path(f).parent.name, []).append(json.loads(Path(f).read_text(encoding="utf-8")))
    return notes(by_system)


def mteb_reference_rows(task: str, measure: str, references: list[dict], md: str, csv: str) -> int:
    """Append the rows of published MTEB result files (``mteb.references``) to a written task table."""
    import logging

    from mmir.reporting.mteb_reference import add_reference_rows, reference_rows

    rows = reference_rows(references, task, measure)
    added = add_reference_rows(md, csv, rows)
    logging.getLogger("mmir.workflow").info("read %d MTEB result values of %s from %d references; added %d reference rows "
                                             "to %s and %s", len(rows), task, len(references), added, md, csv)
    return added


def _report_inputs(config: dict, w: W) -> dict:
    reranked = U.rerank_systems(config)
    refs = _mteb_references(config)
    if refs:
        from mmir.reporting.mteb_reference import result_files
    return {"metrics": task_metric_files(config, w["task"]),
            # the judgements prepare dropped under a warn policy (a caption sentence)
            "prepared": sorted({paths.prepared(u["dataset"], u["domain"], "prepare.json") for u in U.task_units(config, w["task"])}),
            **({"mteb_references": [str(f) for r in refs for f in result_files(r["path"])]} if refs else {}),
            "perquery": [paths.PERQUERY.format(task=w["task"], **u) for u in U.task_units(config, w["task"])],
            # the image text each system's encoder cut (a caption sentence): tasks whose queries or items carry image text
            **({"run_stats": [paths.RUN_STATS.format(task=w["task"], **u) for u in U.task_units(config, w["task"])]}
               if task_spec(w["task"]).multimodal else {}),
            **({"rerank_stats": [paths.RUN_STATS.format(task=w["task"], **u) for u in U.task_units(config, w["task"])
                                 if u["system"] in reranked]} if reranked else {})}


def _mteb_references(config: dict) -> list[dict]:
    """``mteb.references`` with their paths resolved (:func:`mmir.core.paths.project_file`)."""
    return [{"path": paths.project_file(r["path"]), "dataset": r["dataset"]} for r in (config.get("mteb") or {}).get("references") or []]


def _report_params(config: dict, w: W) -> dict:
    systems = {u["system"] for u in U.task_units(config, w["task"])}
    reranked = U.rerank_systems(config)
    ev = config["evaluation"]
    refs = _mteb_references(config)
    no_unit = U.no_unit_reason(config, w["task"])
    return {"measure": ev["primary_measure"], "protocol": ev["protocol"], "task4_protocol": ev["task4_protocol"],
            **({"no_unit": no_unit} if no_unit else {}),
            **({"mteb_references": refs} if refs else {}),
            "untrained": sorted(s for s in systems if untrained(config, s)),
            "approximate": sorted(s for s in systems if approximate(config, s)),
            "notes": table_notes(config, w["task"]), "significance": config["significance"],
            "baselines": U.table_baselines(config, w["task"]),
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
            "tables": [paths.TABLE_METRICS.format(task=t) for t in U.table_tasks(config)],
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
                         {s: paths.PERQUERY.format(system=s, **u) for s in u["systems"]}, p["measure"], u["baseline"],
                         u["first_stage"], essentiality=paths.ESSENTIALITY_LABELS.format(**u) if u["labels"] else None)
             for u in p["query_pages"]]
    return report_step({k: p[k] for k in REPORT_KEYS}, list(job.input["files"]), list(job.input["prepared"]), o["html"],
                       o["lineage"], o["latex"], tex, o["tracking"], pages, o["queries"], paths.THUMBNAIL_CACHE,
                       external_runs=list(job.input.get("external_runs", [])))


def _report_html_tex(config: dict) -> dict[str, str]:
    from mmir.workflow.targets import tex_outputs

    return tex_outputs(config)


def query_page_units(config: dict) -> list[dict]:
    """One entry per query page: ``{task, dataset, domain, systems (table order), first_stage ({reranked: first stage}),
    qrels (the prepared file scored against), labels (the essentiality stage labelled the domain), baseline (the
    table's, :func:`mmir.workflow.units.table_baselines`)}``, for every
    table task of the config."""
    from mmir.data.prepare import qrels_file

    reranked = U.rerank_systems(config)
    labelled = {(u["dataset"], u["domain"]) for u in U.essentiality_units(config)}
    out: dict[tuple[str, str, str], dict] = {}
    for t in config["tasks"]:
        baselines = U.table_baselines(config, t)
        for u in U.task_units(config, t):
            e = out.setdefault((t, u["dataset"], u["domain"]), {
                "task": t, "dataset": u["dataset"], "domain": u["domain"], "systems": [], "first_stage": {},
                "qrels": qrels_file(t, config["evaluation"]["task4_protocol"]), "labels": (u["dataset"], u["domain"]) in labelled,
                "baseline": baselines[u["dataset"]]})
            e["systems"].append(u["system"])
            if u["system"] in reranked:
                e["first_stage"][u["system"]] = reranked[u["system"]]["base"]
    return list(out.values())


def _report_html_inputs(config: dict, w: W) -> dict:
    """Every table, figure and MLflow record of the families the config runs, the prepare reports (lineage), the retrieve
    stats of external runs (``kind: run``: their files and sha256; lineage), and what the query pages read: every task
    unit's run and per-query values, the prepared topics, qrels, corpus, images and pairs of its domain, the
    essentiality labels of a labelled domain."""
    from mmir.workflow.targets import family_targets, report_files

    units = query_page_units(config)
    prepared = []
    for u in units:
        spec = task_spec(u["task"])
        names = [spec.queries, u["qrels"], "corpus.parquet", "images.parquet", "query_images.parquet",
                 *(["pairs.parquet"] if spec.ranks == "pairs" else [])]
        prepared += [paths.prepared(u["dataset"], u["domain"], n) for n in names]
    external = [paths.RUN_STATS.format(task=t, **u) for t in config["tasks"] for u in U.task_units(config, t)
                if config["systems"].get(u["system"], {}).get("kind") == "run"]
    return {"files": report_files(config), "prepared": family_targets(config, "prepare"),
            "runs": [paths.RUN.format(system=s, **u) for u in units for s in u["systems"]],
            "perquery": [paths.PERQUERY.format(system=s, **u) for u in units for s in u["systems"]],
            "pages_prepared": list(dict.fromkeys(prepared)),
            "labels": list(dict.fromkeys(paths.ESSENTIALITY_LABELS.format(**u) for u in units if u["labels"])),
            **({"external_runs": external} if external else {})}


#: The config the report reads: what the lineage names (data, models, generators, prompts of the stages) and MLflow.
REPORT_KEYS = ("datasets", "systems", "generators", "captioners", "reformulators", "ablations", "rag", "m2rag", "mmdr",
               "mlflow", "audit", "rerankers")


def _report_html_params(config: dict, w: W) -> dict:
    return {**{k: config.get(k) for k in REPORT_KEYS}, "query_pages": query_page_units(config),
            "measure": config["evaluation"]["primary_measure"]}


RULES = (
    Rule(name="report", output={"md": paths.TABLE_MD, "csv": paths.TABLE_CSV, "metrics": paths.TABLE_METRICS,
                                "significance": paths.TABLE_SIGNIFICANCE, "forest": paths.TABLE_FOREST,
                                "summary": paths.EXPERIMENT_METRICS, "summary_forest": paths.EXPERIMENT_FOREST},
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
