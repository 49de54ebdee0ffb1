"""One function per pipeline step, taking explicit input/output paths and config slices.

Snakemake rule scripts (workflow/scripts/) and the DVC-facing CLI (mmir.cli) are thin wrappers around these,
so the logic is importable and tested without either tool. Every step logs what it read, wrote and skipped,
with counts.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from mmir import paths
from mmir.io import write_json

log = logging.getLogger("mmir.steps")


def fetch(dataset: str, ds: dict, domain: str, out_marker: str | Path) -> dict:
    """Download one hub domain into ``data/raw/<dataset>/`` and write the marker JSON (commit, files)."""
    from mmir.data.hub import fetch_domain

    dest = Path(paths.RAW.format(dataset=dataset))
    info = fetch_domain(ds["repo_id"], ds["revision"], domain, ["documents", "examples", "examples_multimodal",
                                                               "document_images", "examples_images"], dest)
    log.info("fetched %s@%s domain %s: wrote %d files under %s", ds["repo_id"], info["commit"], domain, len(info["files"]), dest)
    write_json(out_marker, {"repo_id": ds["repo_id"], "revision": ds["revision"], **info})
    return info


def prepare(dataset: str, ds: dict, domain: str, out_dir: str | Path, fetched_marker: str | Path | None = None) -> dict:
    """Normalise and check one domain (:mod:`mmir.data.prepare`); writes its artifacts to ``out_dir``."""
    from mmir.data.prepare import prepare_domain, write_prepared

    meta = {"dataset": dataset, "domain": domain, "source": ds["source"]}
    raw_root = None
    if ds["source"] == "hf":
        marker = json.loads(Path(fetched_marker).read_text(encoding="utf-8"))
        meta |= {"repo_id": marker["repo_id"], "revision": marker["commit"]}
        raw_root = paths.RAW.format(dataset=dataset)
    p = prepare_domain(dataset, ds, domain, raw_root)
    report = write_prepared(p, out_dir, meta)
    log.info("read %s", ", ".join(report["sources"]))
    log.info("wrote %s: %d documents, %d topics (%d with qrels), %d qrels, %d excluded pairs",
             out_dir, report["documents"], report["topics"], report["topics_with_qrels"], report["qrels_task1"], report["excluded_pairs"])
    for kind, n in report["problems"].items():
        if n:
            log.warning("%s: %d (kept going, per integrity policy); e.g. %s", kind, n, report["examples"].get(kind, [""])[0])
    return report


def retrieve(task: str, prepared_dir: str | Path, system_name: str, system: dict, evaluation: dict,
             cache_root: str | Path, out_run: str | Path, out_stats: str | Path) -> dict:
    """Run one system on one prepared domain; writes the TREC run and a stats JSON."""
    from mmir.retrieval.runs import write_run
    from mmir.retrieval.search import retrieve as do_retrieve

    if task != "task1":
        raise ValueError(f"task {task!r} is not implemented yet")
    t0 = time.perf_counter()
    run, stats = do_retrieve(prepared_dir, system, evaluation, cache_root)
    n = write_run(out_run, run, tag=system_name)
    stats |= {"seconds": round(time.perf_counter() - t0, 3), "system": system_name}
    write_json(out_stats, stats)
    log.info("wrote %s: %d lines for %d queries (top %d) in %.1fs", out_run, n, len(run), evaluation["top_k"], stats["seconds"])
    return stats


def score(run_file: str | Path, qrels_file: str | Path, measures: list[str], out_json: str | Path,
          out_perquery: str | Path, meta: dict) -> dict:
    """Evaluate a run (:func:`mmir.evaluation.scoring.score_run`)."""
    from mmir.evaluation.scoring import score_run

    s = score_run(run_file, qrels_file, measures, out_json, out_perquery, meta)
    log.info("read %s and %s; wrote %s: %d judged queries (%d with no results, scored 0; %d run queries "
             "without qrels skipped); nDCG@10 = %s", run_file, qrels_file, out_json, s["queries"],
             s["queries_without_results"], s["run_queries_without_qrels"], s["measures"].get("nDCG@10"))
    return s


def report(task: str, metric_files: list[str], measure: str, protocol: str, out_md, out_csv, out_metrics) -> None:
    """Write the task table (:mod:`mmir.reporting.tables`)."""
    from mmir.reporting.tables import collect, write_task_table

    long = collect(metric_files)
    write_task_table(long, task, measure, protocol, out_md, out_csv, out_metrics)
    log.info("read %d metric files; wrote %s, %s, %s", len(metric_files), out_md, out_csv, out_metrics)


def track(config: dict, task: str, units: list[dict], out_json: str | Path) -> dict:
    """Log this invocation to MLflow (:func:`mmir.tracking.log_invocation`); writes the run ids."""
    from mmir.config import config_slice
    from mmir.tracking import log_invocation, redact, tracking_uri

    entries = []
    for u in units:
        fmt = dict(task=task, dataset=u["dataset"], domain=u["domain"], system=u["system"])
        prep = json.loads(Path(paths.prepared(u["dataset"], u["domain"], "prepare.json")).read_text(encoding="utf-8"))
        system = config["systems"][u["system"]]
        entries.append({
            **u,
            "metrics_json": paths.METRICS.format(**fmt),
            "perquery": paths.PERQUERY.format(**fmt),
            "run_file": paths.RUN.format(**fmt),
            "params": config_slice(config, dataset=u["dataset"], system=u["system"]) | {"measures": config["measures"]},
            "tags": {"dataset_revision": str(prep.get("revision", "local")),
                     "model_revision": str(system.get("revision") or system.get("model", system.get("backend", "")))},
            "extra_metrics": {k: v for k, v in json.loads(Path(paths.RUN_STATS.format(**fmt)).read_text()).items()
                              if isinstance(v, (int, float)) and not isinstance(v, bool)},
        })
    ids = log_invocation(config, task, entries)
    write_json(out_json, {"tracking_uri": redact(tracking_uri(config)), **ids})
    log.info("logged parent run %s with %d child runs to %s", ids["parent"], len(ids["children"]), redact(tracking_uri(config)))
    return ids
