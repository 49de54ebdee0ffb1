"""The MMDR stage of the workflow: step functions called by the Snakemake scripts and the CLI.

Per (dataset, domain) with query images (:func:`units`):

* :func:`tasks_step` -- MMDR tasks from the prepared domain (:mod:`mmir.benchmarks.mmdr.build_tasks`)
  -> ``results/mmdr/<dataset>/<domain>/tasks/``;
* :func:`reports_step` -- the baseline's reports over a retrieval run (:mod:`mmir.benchmarks.mmdr.baseline`)
  -> ``.../reports/{<qid>.md, reports.jsonl, summary.json}``;
* :func:`score_step` -- every report scored end to end (:func:`mmir.benchmarks.mmdr.scorer.score_task`) by the
  configured judge, citations fetched from the prepared corpus (``mmir://`` URIs), every judge call
  audited -> ``.../run/`` in the published run layout (``reports/<qid>.md`` + golden files + MOSAIC
  summaries, ``results/mmdr.jsonl``, ``audit.jsonl``, ``summary/`` = the domain's leaderboard export,
  ``summary.json``).

Then :func:`report_step` combines the domains: the leaderboard export (spec §8) of all tasks in
``results/tables/mmdr/`` (task scores, leaderboard, manifest with the judge, prompt hashes, code commit
and fallback counts per module), ``results/tables/mmdr.{md,csv}`` and the MLflow runs.

Everything the model or the judge did is counted and logged; nothing is dropped silently.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.check import evaluator_config
from mmir.benchmarks.mmdr.judge_audit import cut_replies, example_copies
from mmir.benchmarks.mmdr.results import (
    NOTES,
    RESULTS_STEM,
    board,
    combine_results,
    model_label,
    read_audit,
    with_copies,
)
from mmir.config.models import MMDRConfig, Params, fill, parse, parse_slice, partial
from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.core.io import write_json, write_text
from mmir.llm.audit import summed
from mmir.llm.policy import check_stage
from mmir.reporting.mmdr import JudgeCalls, TaskIntervals, write_table
from mmir.workflow.units import PreparedUnit, typed

log = logging.getLogger("mmir.workflow.mmdr")









def run_file(config: dict | Params, dataset: str, domain: str) -> str:
    """The retrieval run the baseline reads: ``mmdr.task`` / ``mmdr.system`` of the domain."""
    m = typed(config).mmdr
    return paths.RUN.format(task=m.task, dataset=dataset, domain=domain, system=m.system)


def captions_file(config: dict | Params, dataset: str, domain: str) -> str:
    """The image text of the domain (captioner ``evaluation.image_text``)."""
    return paths.CAPTIONS.format(dataset=dataset, domain=domain, captioner=typed(config).evaluation.image_text)


# -------------------------------------------------------------------------------------------------- steps
def tasks_step(dataset: str, domain: str, prepared_dir: str | Path, mmdr: Mapping[str, Any], out_dir: str | Path) -> dict:
    """Build the domain's MMDR tasks (:func:`mmir.benchmarks.mmdr.build_tasks.build_tasks`)."""
    from mmir.benchmarks.mmdr.build_tasks import build_tasks

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)  # this step's own folder: no stale images or tasks survive a config change
    return build_tasks(prepared_dir, dataset, domain, out, parse(partial(MMDRConfig), dict(mmdr), "mmdr").max_tasks)


def reports_step(unit: PreparedUnit, tasks_dir: str | Path, mmdr: Mapping[str, Any],
                 generator: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
                 run_path: str | Path | None, captions: str | Path | None) -> dict:
    """Write the baseline report of every task (:func:`mmir.benchmarks.mmdr.baseline.write_report`): ``<qid>.md``,
    ``reports.jsonl`` (one record per report) and ``summary.json`` (counts) in ``out_dir``."""
    from tqdm import tqdm

    from mmir.benchmarks.mmdr.baseline import load_template, write_report
    from mmir.benchmarks.mmdr.build_tasks import load_built_tasks
    from mmir.benchmarks.mmdr.local import LocalDomain, read_captions
    from mmir.llm.backends import make_backend
    from mmir.llm.cache import GenerationCache
    from mmir.llm.client import LLMClient
    from mmir.retrieval.runs import read_run

    dataset, domain, prepared_dir = unit.dataset, unit.domain, unit.path
    out = Path(out_dir)
    cfg = evaluator_config(mmdr)
    m = parse(partial(MMDRConfig), dict(mmdr), "mmdr")
    tasks = load_built_tasks(tasks_dir)
    dom = LocalDomain(dataset, prepared_dir, read_captions(captions))
    run = read_run(run_path) if run_path else None
    gen = make_backend(generator)
    tpl = load_template()
    records, reports = [], {}
    t0 = time.perf_counter()
    with GenerationCache(generation_cache) as cache:
        client = LLMClient(gen, cache)
        for bt in tqdm(tasks, desc=f"mmdr reports {dataset}/{domain}", unit="task"):
            report, rec = write_report(bt, dom, run, client, tpl, m, min_report_chars=cfg.min_report_chars,
                                       run_file=str(run_path) if run_path else None)
            reports[bt.task.qid] = report
            rec["report_path"] = str(out / f"{bt.task.qid}.md")
            records.append(rec)
            log.info("%s: %d chars; the model wrote %d citation markers (%d valid, invalid numbers %s, %d to figures); "
                     "post hoc added %d source and %d figure citations; %d/%d sources cited; status %s%s", bt.task.qid,
                     rec["report_chars"], rec["citation_markers"], rec["citations_valid"], rec["citations_invalid"] or "none",
                     rec["figures_cited_by_model"], rec["posthoc_sources"], rec["posthoc_figures"], rec["sources_cited"],
                     rec["sources_cited"] + rec["sources_uncited"], rec["status"], " (cached)" if rec["cached"] else "")
        cstats = dict(cache.stats)
    llm = check_stage("mmdr_reports", f"{dataset}/{domain}", client.audit)
    if out.exists():
        shutil.rmtree(out)  # only now: a stage whose calls all failed leaves the previous reports in place
    for qid, report in reports.items():
        write_text(out / f"{qid}.md", report)
    write_text(out / "reports.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    n = len(records)

    def avg(key: str) -> float | None:
        return sum(r[key] for r in records) / n if n else None

    summary = {
        "dataset": dataset, "domain": domain, "reports": n, "generator": gen.model_id, "generator_revision": gen.model_revision,
        "prompt": tpl.id, "prompt_sha256": tpl.sha256,
        "model_label": model_label(mmdr), "run_file": str(run_path) if run_path else None,
        "failed": sum(r["status"] != "ok" for r in records), "under_min_chars": sum(r["under_min_chars"] for r in records),
        "min_report_chars": cfg.min_report_chars, "model_wrote_references": sum(r["model_wrote_references"] for r in records),
        "with_invalid_citations": sum(bool(r["citations_invalid"]) for r in records),
        "without_valid_citation": sum(r["citations_valid"] == 0 for r in records),
        "mean_report_chars": avg("report_chars"), "mean_citations_valid": avg("citations_valid"),
        "mean_sources_cited": avg("sources_cited"), "figures_cited_by_model": sum(r["figures_cited_by_model"] for r in records),
        "urls_written_by_model": sum(r["urls_written_by_model"] for r in records),
        "posthoc_sources": sum(r["posthoc_sources"] for r in records), "posthoc_figures": sum(r["posthoc_figures"] for r in records),
        "mean_citation_markers_by_model": avg("citation_markers"),
        "seconds": round(time.perf_counter() - t0, 1), "cache": cstats, **llm, **gen.usage.as_metrics("gen_"),
    }
    write_json(out / "summary.json", summary)
    log.info("read %s (%d tasks), %s, %s; wrote %d reports to %s: %d failed generations, %d under %d characters, %d "
             "without a valid model citation, %d with invalid citation numbers, %d where the model wrote its own references "
             "(cut), %d source and %d figure citations added post hoc; cache %s; %.0fs", tasks_dir, len(tasks), run_path,
             captions, n, out, summary["failed"], summary["under_min_chars"], cfg.min_report_chars,
             summary["without_valid_citation"], summary["with_invalid_citations"], summary["model_wrote_references"],
             summary["posthoc_sources"], summary["posthoc_figures"], cstats, summary["seconds"])
    return summary


def make_judge(judge_cfg: Mapping[str, Any], mmdr: Mapping[str, Any], dom, cache):
    """The evaluator's :class:`~mmir.benchmarks.mmdr.judge.Judge`: the judge backend (wrapped in
    :class:`~mmir.benchmarks.mmdr.local.ImageTextBackend` when ``judge_images`` is ``text``) through the generation cache."""
    from mmir.benchmarks.mmdr.judge import Judge
    from mmir.benchmarks.mmdr.local import ImageTextBackend
    from mmir.llm.backends import make_backend

    m = parse(partial(MMDRConfig), dict(mmdr), "mmdr")
    backend = make_backend(judge_cfg)
    if m.judge_images == "text":
        srcs = list(m.judge_image_text)
        backend = ImageTextBackend(backend, lambda b: dom.describe_bytes(b, srcs), "+".join(srcs))
    return Judge(backend, cache=cache, max_tokens=m.judge_max_tokens, seed=m.seed, provider=judge_cfg["backend"])


def score_step(unit: PreparedUnit, tasks_dir: str | Path, reports_dir: str | Path,
               mmdr: Mapping[str, Any], judge_cfg: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
               captions: str | Path | None) -> dict:
    """Score every report of the domain (see the module docstring) and export the domain's leaderboard."""
    from tqdm import tqdm

    from mmir.benchmarks.mmdr.build_tasks import load_built_tasks
    from mmir.benchmarks.mmdr.export import code_commit, export_leaderboard, provenance
    from mmir.benchmarks.mmdr.fetch import default_fetcher
    from mmir.benchmarks.mmdr.local import LocalDomain, read_captions
    from mmir.benchmarks.mmdr.scorer import ScoreOutputs, score_task
    from mmir.llm.backends import UnsupportedInputError
    from mmir.llm.cache import GenerationCache

    dataset, domain, prepared_dir = unit.dataset, unit.domain, unit.path
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    cfg = evaluator_config(mmdr)
    tasks = load_built_tasks(tasks_dir)
    rep_dir = Path(reports_dir)
    rep_summary = json.loads((rep_dir / "summary.json").read_text(encoding="utf-8"))
    baseline = {}
    for line in (rep_dir / "reports.jsonl").read_text(encoding="utf-8").split("\n"):
        if line.strip():
            r = json.loads(line)
            baseline[r["qid"]] = r
    dom = LocalDomain(dataset, prepared_dir, read_captions(captions))
    fetcher = default_fetcher(online=False, resolve_local=dom.resolve, cfg=cfg.fetch)
    records, skipped = [], []
    t0 = time.perf_counter()
    with GenerationCache(generation_cache) as cache:
        judge = make_judge(judge_cfg, mmdr, dom, cache)
        for bt in tqdm(tasks, desc=f"mmdr score {dataset}/{domain}", unit="task"):
            qid = bt.task.qid
            src = rep_dir / f"{qid}.md"
            if not src.exists() or qid not in baseline:
                skipped.append(qid)
                log.warning("%s: no report in %s: skipped (counted)", qid, rep_dir)
                continue
            report = src.read_text(encoding="utf-8")
            dst = out / "reports" / f"{qid}.md"
            write_text(dst, report)
            b = baseline[qid]
            n_calls, t1 = len(judge.audit), time.perf_counter()
            try:
                ts = score_task(bt.task, report, judge, fetcher, cfg=cfg, outputs=ScoreOutputs(
                                golden_path=out / "reports" / f"{qid}.golden.json",
                                mm_work_dir=out / "reports" / "mm" / qid, report_path=str(dst),
                                extra={"report_model": rep_summary["model_label"], "generator_model": rep_summary["generator"],
                                       "dataset": dataset, "domain": domain, "topic_qid": bt.topic_qid,
                                       "baseline": {k: b[k] for k in ("status", "report_chars", "citation_markers", "citations_valid",
                                                                      "citations_invalid", "posthoc_sources", "posthoc_figures",
                                                                      "sources_cited", "sources_uncited", "figures_cited_by_model",
                                                                      "model_wrote_references", "under_min_chars")}}))
            except UnsupportedInputError as e:
                raise ConfigError("mmdr.judge_images", f"the judge backend cannot take this input ({e}); for a text-only "
                                  "judge set mmdr.judge_images: text (images reach it as their text)") from e
            records.append(ts.record)
            s = ts.record["scores"]
            calls = judge.audit.records[n_calls:]
            log.info("%s: %s; %d judge calls (%d parse failures, %d fallbacks, %d repeating the prompt's example, %d cached), "
                     "%.0fs", qid,
                     "report too short: not judged (FINAL 0, incomplete row)" if "GEN" not in s else
                     f"FINAL {s['FINAL_MMDR']:.3f} = GEN {s['GEN']:.3f}, EVI {s['EVI']:.3f}, MM {s['MM']:.3f}, VEF {s['VEF']:.0f}"
                     f"{' (MOSAIC gated)' if not ts.gate_open else ''}",
                     len(calls), sum(c.status == "rejected" for c in calls), sum(c.fallback_used for c in calls),
                     sum(example_copies(calls).values()), sum(c.cached for c in calls), time.perf_counter() - t1)
        cstats = dict(cache.stats)
        try:
            llm = check_stage("mmdr_score", f"{dataset}/{domain}", judge.audit)
        except Exception:
            shutil.rmtree(out, ignore_errors=True)  # no partial run folder is left behind
            raise
        results = out / "results" / f"{RESULTS_STEM}.jsonl"
        write_text(results, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records))
        judge.audit.write_jsonl(out / "audit.jsonl")
        prov = provenance(judge, commit=code_commit())
        prov["judge_example_copies"] = example_copies(judge.audit.records)
        prov["judge_replies_cut_at_max_tokens"] = cut_replies(judge.audit.records)
        exp = export_leaderboard(results, out / "summary", model=rep_summary["model_label"], expected_tasks=len(tasks),
                                 provenance_info=prov, extra_notes=NOTES)
    summary = {
        "dataset": dataset, "domain": domain, "tasks": len(tasks), "scored": len(records), "skipped_no_report": skipped,
        "complete": exp.manifest["records_complete"], "too_short": sum("GEN" not in r["scores"] for r in records),
        "mosaic_gated": sum(1 for r in records if "GEN" in r["scores"] and not (r.get("mm") or {}).get("activated")),
        "vef_pass": sum(1 for r in records if (r.get("scores") or {}).get("VEF", 0) > 0),
        "board": board(exp.rows), "leaderboard_csv": exp.leaderboard.name, "judge": prov["judge"],
        "judge_calls": prov["judge_calls"], "judge_fallbacks": prov["judge_fallbacks"], "prompt_sha256": prov["prompt_sha256"],
        "judge_example_copies": prov["judge_example_copies"], "judge_replies_cut_at_max_tokens": prov["judge_replies_cut_at_max_tokens"],
        "image_text": getattr(judge.backend, "stats", None), "fetch": {"hits": fetcher.hits, "misses": fetcher.misses},
        "cache": cstats, "seconds": round(time.perf_counter() - t0, 1), "model_label": rep_summary["model_label"],
        **llm, **judge.backend.usage.as_metrics("judge_"),
    }
    write_json(out / "summary.json", summary)
    fb = {m: c for m, c in prov["judge_fallbacks"].items() if c}
    copies = {m: c for m, c in summary["judge_example_copies"].items() if c}
    log.info("read %s (%d tasks), %s (%d reports), %s; wrote %s: %d records (%d complete, %d too short, %d MOSAIC gated, "
             "%d VEF pass), audit of %d judge calls (fallbacks per module: %s; parsed replies repeating the prompt's "
             "example values: %s), leaderboard %s; skipped %d tasks without a report; cache %s; %.0fs", tasks_dir,
             len(tasks), rep_dir, len(baseline), prepared_dir, out, len(records), summary["complete"], summary["too_short"],
             summary["mosaic_gated"], summary["vef_pass"], len(judge.audit), fb or "none", copies or "none",
             exp.leaderboard.name, len(skipped), cstats, summary["seconds"])
    return summary
























def report_step(config: dict, run_dirs: Sequence[str | Path], reports_dirs: Sequence[str | Path], out_md: str | Path,
                out_csv: str | Path, out_dir: str | Path, out_tracking: str | Path) -> dict:
    """Combine the scored domains: leaderboard export of all tasks into ``out_dir`` (spec §8), the readable
    table, and the MLflow runs (a parent ``mmdr`` and a child per domain plus one for all tasks)."""
    from mmir.benchmarks.mmdr.export import code_commit, export_leaderboard, provenance
    from mmir.tracking import log_units

    c = parse_slice(config)
    m = fill(c.mmdr)  # as the table and the MLflow params show it
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    sums = [json.loads((Path(d) / "summary.json").read_text(encoding="utf-8")) for d in run_dirs]
    recs = combine_results(run_dirs, out / "results" / f"{RESULTS_STEM}.jsonl")
    audit = read_audit(run_dirs)
    hashes: dict[str, str] = {}
    for s in sums:
        hashes |= s["prompt_sha256"]
    judge_ids = [s["judge"] for s in sums]
    prov = provenance(None, prompt_hashes=hashes, commit=code_commit())
    prov |= {"judge": judge_ids[0] if judge_ids and all(j == judge_ids[0] for j in judge_ids) else judge_ids,
             "judge_calls": audit.counts(), "judge_fallbacks": audit.fallback_counts(),
             "judge_example_copies": example_copies(audit.records),
             "judge_replies_cut_at_max_tokens": {m: sum(s_.get("judge_replies_cut_at_max_tokens", {}).get(m, 0) for s_ in sums)
                                                 for m in audit.counts()}}
    writers = [{k: json.loads((Path(r) / "summary.json").read_text(encoding="utf-8")).get(k)
                for k in ("generator", "generator_revision", "prompt", "prompt_sha256")} for r in reports_dirs]
    prov["report_writer"] = {"label": model_label(m), **(writers[0] if writers and all(w == writers[0] for w in writers)
                                                       else {"per_domain": writers})}
    label = model_label(m)
    n_tasks = sum(s["tasks"] for s in sums)
    exp = export_leaderboard(out / "results" / f"{RESULTS_STEM}.jsonl", out, model=label, expected_tasks=n_tasks,
                             provenance_info=prov, extra_notes=NOTES)
    rows = [(f"{s['dataset']}/{s['domain']}", s["board"]) for s in sums] + [("All", board(exp.rows))]
    per_domain_fb = {}
    for s, d in zip(sums, run_dirs):
        a = read_audit([d])
        per_domain_fb[f"{s['dataset']}/{s['domain']}"] = with_copies(a.counts(), example_copies(a.records))
    per_domain_fb["All"] = with_copies(audit.counts(), prov["judge_example_copies"])
    baselines = {f"{s['dataset']}/{s['domain']}": json.loads((Path(r) / "summary.json").read_text(encoding="utf-8"))
                 for r, s in zip(reports_dirs, sums)}
    judge = prov["judge"] if isinstance(prov["judge"], dict) else (judge_ids[0] if judge_ids else {})
    llm = {name: summed(s, baselines[name]) for name, s in zip((n for n, _ in rows), sums)}
    llm["All"] = summed(*llm.values())
    from mmir.evaluation.significance import Settings
    from mmir.reporting.mmdr import task_intervals

    settings = c.significance or Settings()
    intervals = task_intervals(exp.rows, settings)
    write_table(rows, JudgeCalls(per_domain_fb, cut=prov["judge_replies_cut_at_max_tokens"], llm=llm), baselines, m, judge or {},
                out_md, out_csv, TaskIntervals(intervals, settings))

    params = {"mmdr": m, "generator": fill(c.generators[c.mmdr.generator]), "judge": fill(c.generators[c.mmdr.judge])}
    units_ = []
    for (name, b), s, d in zip(rows, sums, run_dirs):
        fb = {f"fallbacks_{k}": v for k, v in s["judge_fallbacks"].items()}
        fb |= {f"example_copies_{k}": v for k, v in s["judge_example_copies"].items()}
        units_.append({"name": f"mmdr/{name}", "tags": {"rule": "mmdr_score", "dataset": s["dataset"], "domain": s["domain"]},
                       "metrics": {**_metric_names(b), **_interval_names(intervals.get(name, {})), **fb,
                                   "judge_calls": sum(c["calls"] for c in s["judge_calls"].values()),
                                   "seconds": s["seconds"], "too_short": s["too_short"], "mosaic_gated": s["mosaic_gated"]},
                       "artifacts": [str(Path(d) / "results" / f"{RESULTS_STEM}.jsonl"), str(Path(d) / "audit.jsonl"),
                                     str(Path(d) / "summary.json")],
                       "artifact_dirs": {"reports": str(Path(d) / "reports"), "summary": str(Path(d) / "summary")}})
    fb_all = {f"fallbacks_{k}": v for k, v in prov["judge_fallbacks"].items()}
    fb_all |= {f"example_copies_{k}": v for k, v in prov["judge_example_copies"].items()}
    units_.append({"name": "mmdr/All", "tags": {"rule": "mmdr_report", "dataset": "all", "domain": "all"},
                   "metrics": {**_metric_names(rows[-1][1]), **_interval_names(intervals.get("All", {})), **fb_all},
                   "artifacts": [str(exp.leaderboard), str(exp.tasks), str(exp.manifest_path), str(out_md), str(out_csv)]})
    ids = log_units(config, "mmdr", params, units_)
    write_json(out_tracking, ids)
    log.info("read %d scored domains (%d records); wrote %s, %s (%s, complete %d/%d), %s, %s; MLflow parent %s with %d "
             "children; fallbacks per module: %s", len(run_dirs), len(recs), out, exp.leaderboard.name, "submission-ready" if
             exp.submission_ready else "partial", exp.manifest["records_complete"], n_tasks, out_md, out_csv, ids["parent"],
             len(ids["children"]), {k: v for k, v in prov["judge_fallbacks"].items() if v} or "none")
    return {"rows": rows, "manifest": exp.manifest, "tracking": ids}


def _interval_names(iv: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    return {f"{c}_{k}": v[i] for c, v in iv.items() for i, k in enumerate(("ci_low", "ci_high"))}


def _metric_names(b: Mapping[str, Any]) -> dict[str, Any]:
    return {k.rstrip("."): v for k, v in b.items() if v is not None}
