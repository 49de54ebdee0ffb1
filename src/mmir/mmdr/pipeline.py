"""The MMDR stage of the workflow: step functions called by the Snakemake scripts and the CLI.

Per (dataset, domain) with query images (:func:`units`):

* :func:`tasks_step` -- MMDR tasks from the prepared domain (:mod:`mmir.mmdr.build_tasks`)
  -> ``results/mmdr/<dataset>/<domain>/tasks/``;
* :func:`reports_step` -- the baseline's reports over a retrieval run (:mod:`mmir.mmdr.baseline`)
  -> ``.../reports/{<qid>.md, reports.jsonl, summary.json}``;
* :func:`score_step` -- every report scored end to end (:func:`mmir.mmdr.scorer.score_task`) by the
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

from mmir import paths
from mmir.errors import ConfigError
from mmir.io import write_json, write_text

log = logging.getLogger("mmir.mmdr.pipeline")

RESULTS_STEM = "mmdr"
#: Columns of the readable table (leaderboard columns plus the three module scores of the task rows).
TABLE_COLUMNS = ["Overall", "FLAE", "Read.", "Insh.", "Stru.", "TRACE", "Vef.", "Con.", "Cov.", "Fid.", "MOSAIC", "Sem.", "Acc.", "VQA"]
NOTES = [
    "Offline run: reports cite the prepared corpus as mmir://<dataset>/<id>; the evaluator fetches them locally (no web).",
    "Tasks: the first max_tasks queries (topic order) with >= 1 image; visual ground truth = the images' alt text.",
    "A text-only judge sees images as their text (captioner text and/or alt text, see judge_image_text).",
]


# ------------------------------------------------------------------------------------------------- config
def units(config: dict) -> list[dict]:
    """``{dataset, domain}`` of the MMDR stage: every domain of ``mmdr.datasets`` (null = all datasets) whose
    queries can have images."""
    from mmir.config import has_query_images, units as all_units

    m = config.get("mmdr")
    if not m:
        return []
    wanted = m["datasets"] or list(config["datasets"])
    return [{"dataset": d, "domain": dom} for d, dom in all_units(config)
            if d in wanted and has_query_images(config["datasets"][d], dom)]


def check_config(config: dict, file: str | None = None) -> None:
    """Cross-key checks of the ``mmdr`` section (the schema checks types and fills defaults).

    Raises:
        ConfigError: an unknown generator/judge/system/dataset, a task other than task1-4, an evaluator
            setting :meth:`MMDRConfig.from_mapping` rejects, or trace schemes without ``mmir``.
    """
    m = config.get("mmdr")
    if not m:
        return
    from mmir.config import check_references

    check_references(config, "mmdr", file, generator="generators", judge="generators", system="systems")
    evaluator_config(m, file)


def evaluator_config(m: Mapping[str, Any], file: str | None = None):
    """The :class:`~mmir.mmdr.config.MMDRConfig` of ``mmdr.evaluator``.

    Raises:
        ConfigError: a bad evaluator key (named ``mmdr.evaluator.<key>``), or ``trace.schemes`` without
            ``mmir`` (the baseline cites ``mmir://`` URIs, which would then all be ignored).
    """
    from mmir.mmdr.config import MMDRConfig

    try:
        cfg = MMDRConfig.from_mapping(m.get("evaluator") or {}, prefix="mmdr.evaluator")
    except ConfigError as e:
        raise ConfigError(e.key, str(e).split(": ", 1)[-1].split("': ", 1)[-1], file) from e
    if "mmir" not in cfg.trace.schemes:
        raise ConfigError("mmdr.evaluator.trace.schemes", f"must include 'mmir' (reports cite mmir:// URIs), got {list(cfg.trace.schemes)}", file)
    return cfg


def run_file(config: dict, dataset: str, domain: str) -> str:
    """The retrieval run the baseline reads: ``mmdr.task`` / ``mmdr.system`` of the domain."""
    m = config["mmdr"]
    return paths.RUN.format(task=m["task"], dataset=dataset, domain=domain, system=m["system"])


def captions_file(config: dict, dataset: str, domain: str) -> str:
    """The image text of the domain (captioner ``evaluation.image_text``)."""
    return paths.CAPTIONS.format(dataset=dataset, domain=domain, captioner=config["evaluation"]["image_text"])


def model_label(m: Mapping[str, Any]) -> str:
    """Display name of the report writer: ``mmdr-baseline(<generator>, <task>/<system> top-<k>)``."""
    return f"mmdr-baseline({m['generator']}, {m['task']}/{m['system']} top-{m['k']})"


# -------------------------------------------------------------------------------------------------- steps
def tasks_step(dataset: str, domain: str, prepared_dir: str | Path, mmdr: Mapping[str, Any], out_dir: str | Path) -> dict:
    """Build the domain's MMDR tasks (:func:`mmir.mmdr.build_tasks.build_tasks`)."""
    from mmir.mmdr.build_tasks import build_tasks

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)  # this step's own folder: no stale images or tasks survive a config change
    return build_tasks(prepared_dir, dataset, domain, out, mmdr["max_tasks"])


def reports_step(dataset: str, domain: str, prepared_dir: str | Path, tasks_dir: str | Path, mmdr: Mapping[str, Any],
                 generator: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
                 run_path: str | Path | None, captions: str | Path | None) -> dict:
    """Write the baseline report of every task (:func:`mmir.mmdr.baseline.write_report`): ``<qid>.md``,
    ``reports.jsonl`` (one record per report) and ``summary.json`` (counts) in ``out_dir``."""
    from tqdm import tqdm

    from mmir.generation.backends import make_backend
    from mmir.generation.cache import GenerationCache
    from mmir.mmdr.baseline import load_template, write_report
    from mmir.mmdr.build_tasks import load_built_tasks
    from mmir.mmdr.local import LocalDomain, read_captions
    from mmir.retrieval.runs import read_run

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    cfg = evaluator_config(mmdr)
    tasks = load_built_tasks(tasks_dir)
    dom = LocalDomain(dataset, prepared_dir, read_captions(captions))
    run = read_run(run_path) if run_path else None
    gen = make_backend(generator)
    tpl = load_template()
    records = []
    t0 = time.perf_counter()
    with GenerationCache(generation_cache) as cache:
        for bt in tqdm(tasks, desc=f"mmdr reports {dataset}/{domain}", unit="task"):
            report, rec = write_report(
                bt, dom, run, gen, cache, tpl, k=mmdr["k"], image_text=mmdr["image_text"], evidence_chars=mmdr["evidence_chars"],
                images=mmdr["images"], max_tokens=mmdr["report_max_tokens"], temperature=mmdr["report_temperature"],
                seed=mmdr["seed"], min_report_chars=cfg.min_report_chars, posthoc=mmdr["posthoc_citations"],
                min_overlap=mmdr["posthoc_min_overlap"], run_file=str(run_path) if run_path else None)
            write_text(out / f"{bt.task.qid}.md", report)
            rec["report_path"] = str(out / f"{bt.task.qid}.md")
            records.append(rec)
            log.info("%s: %d chars; the model wrote %d citation markers (%d valid, invalid numbers %s, %d to figures); "
                     "post hoc added %d source and %d figure citations; %d/%d sources cited; status %s%s", bt.task.qid,
                     rec["report_chars"], rec["citation_markers"], rec["citations_valid"], rec["citations_invalid"] or "none",
                     rec["figures_cited_by_model"], rec["posthoc_sources"], rec["posthoc_figures"], rec["sources_cited"],
                     rec["sources_cited"] + rec["sources_uncited"], rec["status"], " (cached)" if rec["cached"] else "")
        cstats = dict(cache.stats)
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
        "seconds": round(time.perf_counter() - t0, 1), "cache": cstats, **gen.usage.as_metrics("gen_"),
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
    """The evaluator's :class:`~mmir.mmdr.judge.Judge`: the judge backend (wrapped in
    :class:`~mmir.mmdr.local.ImageTextBackend` when ``judge_images`` is ``text``) through the generation cache."""
    from mmir.generation.backends import make_backend
    from mmir.mmdr.judge import Judge
    from mmir.mmdr.local import ImageTextBackend

    backend = make_backend(judge_cfg)
    if mmdr["judge_images"] == "text":
        srcs = list(mmdr["judge_image_text"])
        backend = ImageTextBackend(backend, lambda b: dom.describe_bytes(b, srcs), "+".join(srcs))
    return Judge(backend, cache=cache, max_tokens=mmdr["judge_max_tokens"], seed=mmdr["seed"], provider=judge_cfg["backend"])


def score_step(dataset: str, domain: str, prepared_dir: str | Path, tasks_dir: str | Path, reports_dir: str | Path,
               mmdr: Mapping[str, Any], judge_cfg: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
               captions: str | Path | None) -> dict:
    """Score every report of the domain (see the module docstring) and export the domain's leaderboard."""
    from tqdm import tqdm

    from mmir.generation.backends import UnsupportedInputError
    from mmir.generation.cache import GenerationCache
    from mmir.mmdr.build_tasks import load_built_tasks
    from mmir.mmdr.export import code_commit, export_leaderboard, provenance
    from mmir.mmdr.fetch import default_fetcher
    from mmir.mmdr.local import LocalDomain, read_captions
    from mmir.mmdr.scorer import score_task

    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    cfg = evaluator_config(mmdr)
    tasks = load_built_tasks(tasks_dir)
    rep_dir = Path(reports_dir)
    rep_summary = json.loads((rep_dir / "summary.json").read_text(encoding="utf-8"))
    baseline = {}
    for line in (rep_dir / "reports.jsonl").read_text(encoding="utf-8").splitlines():
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
                ts = score_task(bt.task, report, judge, fetcher, cfg=cfg, golden_path=out / "reports" / f"{qid}.golden.json",
                                mm_work_dir=out / "reports" / "mm" / qid, report_path=str(dst),
                                extra={"report_model": rep_summary["model_label"], "generator_model": rep_summary["generator"],
                                       "dataset": dataset, "domain": domain, "topic_qid": bt.topic_qid,
                                       "baseline": {k: b[k] for k in ("status", "report_chars", "citation_markers", "citations_valid",
                                                                      "citations_invalid", "posthoc_sources", "posthoc_figures",
                                                                      "sources_cited", "sources_uncited", "figures_cited_by_model",
                                                                      "model_wrote_references", "under_min_chars")}})
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
                     len(calls), sum(c.status == "ok" and not c.parse_ok for c in calls), sum(c.fallback_used for c in calls),
                     sum(example_copies(calls).values()), sum(c.cached for c in calls), time.perf_counter() - t1)
        cstats = dict(cache.stats)
        results = out / "results" / f"{RESULTS_STEM}.jsonl"
        write_text(results, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records))
        judge.audit.write_jsonl(out / "audit.jsonl")
        prov = provenance(judge, commit=code_commit())
        prov["judge_example_copies"] = example_copies(judge.audit.records)
        prov["judge_replies_cut_at_max_tokens"] = cut_replies(judge.audit.records, cache)
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
        **judge.backend.usage.as_metrics("judge_"),
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


def prompt_examples(prompt_id: str) -> list[dict[str, Any]]:
    """The example JSON objects written in a judge prompt (its answer format), e.g. the evidence judge's
    ``{"support_strength": 0.0, ...}``; objects inside an example array count too."""
    from mmir.mmdr.judge import PROMPTS_DIR

    f = PROMPTS_DIR / f"{prompt_id}.txt"
    if not prompt_id or not f.exists():
        return []
    text, out, i = f.read_text(encoding="utf-8"), [], 0
    while (start := text.find("{", i)) != -1:
        depth, i = 0, start + 1
        for j in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                try:
                    obj = json.loads(text[start : j + 1])
                except json.JSONDecodeError:
                    break
                if isinstance(obj, dict) and obj:
                    out.append(obj)
                    i = j + 1  # objects nested in an example are part of it
                break
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


def copies_example(reply: Any, example: Mapping[str, Any]) -> bool:
    """The reply (an object, or any object of an array) repeats the example: every field of it, or, when the
    example has at least three fields that are not free text (string values with a space, like ``"one short
    sentence"``), every one of those. A one-field example (``{"label": "photo"}``) is an answer, not a template,
    and never counts."""
    if len(example) < 2:
        return False
    keys = [k for k, v in example.items() if not (isinstance(v, str) and " " in v)]
    objs = reply if isinstance(reply, list) else [reply]
    for o in objs:
        if not isinstance(o, dict):
            continue
        if all(k in o and _same(o[k], v) for k, v in example.items()):
            return True
        if len(keys) >= 3 and all(k in o and _same(o[k], example[k]) for k in keys):
            return True
    return False


def example_copies(records: Sequence[Any]) -> dict[str, int]:
    """Per module, judge replies that parsed but repeat the prompt's example values (see :func:`copies_example`):
    a small judge often copies the answer format instead of judging, which no parser can tell from a real
    answer. Counted, per module, for every module that made calls."""
    from mmir.mmdr.judge import parse_json_array, parse_json_object

    cache: dict[str, list[dict[str, Any]]] = {}
    out: dict[str, int] = {}
    for r in records:
        d = r if isinstance(r, Mapping) else r.to_dict()
        out.setdefault(d["module"], 0)
        if not d.get("parse_ok") or not d.get("raw_reply"):
            continue
        exs = cache.setdefault(d["prompt_id"], prompt_examples(d["prompt_id"]))
        if not exs:
            continue
        obj = parse_json_object(d["raw_reply"])[0]
        if obj is None:
            obj = parse_json_array(d["raw_reply"])[0]
        if obj is not None and any(copies_example(obj, ex) for ex in exs):
            out[d["module"]] += 1
    return out


def cut_replies(records: Sequence[Any], cache) -> dict[str, int]:
    """Per module, judge replies that stopped at the output limit (``finish_reason == "length"`` in their
    generation-cache record): usually an unfinished JSON object, hence a parse failure and a fallback."""
    out: dict[str, int] = {}
    for r in records:
        out.setdefault(r.module, 0)
        rec = cache.get(r.cache_key) if r.cache_key else None
        if rec and "length" in (rec.get("finish_reasons") or []):
            out[r.module] += 1
    return out


def board(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means of :data:`TABLE_COLUMNS` over the complete rows (non-blank values), as the exporter's
    leaderboard; plus ``n`` (rows) and ``complete``."""
    from mmir.mmdr.export import mean

    complete = [r for r in rows if r["Complete"]]
    out: dict[str, Any] = {"n": len(rows), "complete": len(complete)}
    for c in TABLE_COLUMNS:
        out[c] = mean(r.get(c) for r in complete if r.get(c) not in ("", None))
    return out


# ------------------------------------------------------------------------------------------------- report
def combine_results(run_dirs: Sequence[str | Path], dest: str | Path) -> list[dict]:
    """Concatenate the domains' results into ``dest``, each qid made unique as ``<dataset>/<domain>/<qid>``.
    Returns the records."""
    recs = []
    for d in run_dirs:
        s = json.loads((Path(d) / "summary.json").read_text(encoding="utf-8"))
        for line in (Path(d) / "results" / f"{RESULTS_STEM}.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                r["qid"] = f"{s['dataset']}/{s['domain']}/{r['qid']}"
                if "report_path" not in r:  # a too-short record: point at its report for the SHA-256
                    r["report_path"] = str(Path(d) / "reports" / f"{r['qid'].rsplit('/', 1)[-1]}.md")
                recs.append(r)
    write_text(dest, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    return recs


def _audit(run_dirs: Sequence[str | Path]):
    from mmir.mmdr.judge import JudgeAudit, JudgeCall

    audit = JudgeAudit()
    for d in run_dirs:
        for line in (Path(d) / "audit.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                audit.add(JudgeCall(**json.loads(line)))
    return audit


def _with_copies(counts: dict[str, dict[str, int]], copies: Mapping[str, int]) -> dict[str, dict[str, int]]:
    return {m: {**c, "example_copies": copies.get(m, 0)} for m, c in counts.items()}


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.2f}"


def write_table(rows: Sequence[tuple[str, dict]], fallbacks: Mapping[str, Mapping[str, Mapping[str, int]]],
                baselines: Mapping[str, Mapping[str, Any]], mmdr: Mapping[str, Any], judge: Mapping[str, Any],
                out_md: str | Path, out_csv: str | Path, cut: Mapping[str, int] | None = None) -> None:
    """``mmdr.md`` (scores per domain and over all tasks, judge-call accounting per module, what the baseline
    did) and ``mmdr.csv`` (the score rows)."""
    import pandas as pd

    from mmir.io import atomic_path

    head = ["Domain", "Tasks", "Complete", *TABLE_COLUMNS]
    lines = [
        f"# MMDeepResearch-Bench: {model_label(mmdr)}", "",
        f"Judge: `{judge.get('model')}` ({judge.get('backend')}"
        f"{', images shown to it as text: ' + judge['image_input'].split(':', 1)[-1] if judge.get('image_input') else ''}). "
        "Scores 0-100; means over complete tasks (every component present). Overall = 0.2 FLAE + 0.5 TRACE + 0.3 MOSAIC; "
        "TRACE = 0.6 EVI + 0.4 VEF; Vef. = pass rate x 100; Read./Insh./Stru. are FLAE parts, Con./Cov./Fid. EVI parts, "
        "Sem./Acc./VQA MOSAIC diagnostics (blank: no task had that item type).", "",
        "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
    ]
    for name, b in rows:
        lines.append("| " + " | ".join([name, str(b["n"]), str(b["complete"]), *(_fmt(b[c]) for c in TABLE_COLUMNS)]) + " |")
    modules = sorted({m for f in fallbacks.values() for m in f})
    lines += ["", "Judge calls per module (calls / parse failures / fallbacks / example copies): a fallback is the "
              "evaluator's fixed default replacing an unusable reply (spec §3); an example copy is a reply that parsed "
              "but repeats the answer-format example of the prompt (e.g. every number 0.0), which a small judge often "
              "writes instead of judging. Both are counted rather than hidden.", "",
              "| Domain | " + " | ".join(modules) + " |", "|---|" + "---|" * len(modules)]
    for name, f in fallbacks.items():
        cells = [f"{f[m]['calls']} / {f[m]['parse_failures']} / {f[m]['fallbacks']} / {f[m].get('example_copies', 0)}"
                 if m in f else "" for m in modules]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if cut is not None:
        lines += ["", f"Replies cut at the judge's output limit (judge_max_tokens = {mmdr['judge_max_tokens']}), all domains: "
                  + (", ".join(f"{k} {v}" for k, v in cut.items() if v) or "none") + "."]
    keys = [("reports", "reports"), ("failed", "failed generations"), ("under_min_chars", "under min_report_chars"),
            ("mean_citation_markers_by_model", "mean markers by the model"),
            ("without_valid_citation", "no valid model citation"), ("with_invalid_citations", "invalid citation numbers"),
            ("posthoc_sources", "post-hoc source citations"), ("posthoc_figures", "post-hoc figure citations"),
            ("model_wrote_references", "model wrote references (cut)"), ("figures_cited_by_model", "figures cited by the model"),
            ("urls_written_by_model", "URLs written by the model"), ("mean_report_chars", "mean characters"),
            ("mean_citations_valid", "mean valid citations"), ("mean_sources_cited", "mean sources cited")]
    lines += ["", f"What the baseline did (k = {mmdr['k']} sources from `{mmdr['task']}/{mmdr['system']}`):", "",
              "| Domain | " + " | ".join(lab for _, lab in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, s in baselines.items():
        lines.append(f"| {name} | " + " | ".join("" if s.get(k) is None else (f"{s[k]:.1f}" if isinstance(s[k], float) else str(s[k]))
                                                for k, _ in keys) + " |")
    write_text(out_md, "\n".join(lines) + "\n")
    frame = pd.DataFrame([{"Domain": n, "Tasks": b["n"], "Complete": b["complete"],
                           **{c: None if b[c] is None else round(float(b[c]), 2) for c in TABLE_COLUMNS}} for n, b in rows])
    with atomic_path(out_csv) as tmp:
        frame.to_csv(tmp, index=False)


def report_step(config: dict, run_dirs: Sequence[str | Path], reports_dirs: Sequence[str | Path], out_md: str | Path,
                out_csv: str | Path, out_dir: str | Path, out_tracking: str | Path) -> dict:
    """Combine the scored domains: leaderboard export of all tasks into ``out_dir`` (spec §8), the readable
    table, and the MLflow runs (a parent ``mmdr`` and a child per domain plus one for all tasks)."""
    from mmir.mmdr.export import code_commit, export_leaderboard, provenance
    from mmir.tracking import log_units

    m = config["mmdr"]
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    sums = [json.loads((Path(d) / "summary.json").read_text(encoding="utf-8")) for d in run_dirs]
    recs = combine_results(run_dirs, out / "results" / f"{RESULTS_STEM}.jsonl")
    audit = _audit(run_dirs)
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
        a = _audit([d])
        per_domain_fb[f"{s['dataset']}/{s['domain']}"] = _with_copies(a.counts(), example_copies(a.records))
    per_domain_fb["All"] = _with_copies(audit.counts(), prov["judge_example_copies"])
    baselines = {f"{s['dataset']}/{s['domain']}": json.loads((Path(r) / "summary.json").read_text(encoding="utf-8"))
                 for r, s in zip(reports_dirs, sums)}
    judge = prov["judge"] if isinstance(prov["judge"], dict) else (judge_ids[0] if judge_ids else {})
    write_table(rows, per_domain_fb, baselines, m, judge or {}, out_md, out_csv, cut=prov["judge_replies_cut_at_max_tokens"])

    params = {"mmdr": m, "generator": config["generators"][m["generator"]], "judge": config["generators"][m["judge"]]}
    units_ = []
    for (name, b), s, d in zip(rows, sums, run_dirs):
        fb = {f"fallbacks_{k}": v for k, v in s["judge_fallbacks"].items()}
        fb |= {f"example_copies_{k}": v for k, v in s["judge_example_copies"].items()}
        units_.append({"name": f"mmdr/{name}", "tags": {"rule": "mmdr_score", "dataset": s["dataset"], "domain": s["domain"]},
                       "metrics": {**_metric_names(b), **fb, "judge_calls": sum(c["calls"] for c in s["judge_calls"].values()),
                                   "seconds": s["seconds"], "too_short": s["too_short"], "mosaic_gated": s["mosaic_gated"]},
                       "artifacts": [str(Path(d) / "results" / f"{RESULTS_STEM}.jsonl"), str(Path(d) / "audit.jsonl"),
                                     str(Path(d) / "summary.json")],
                       "artifact_dirs": {"reports": str(Path(d) / "reports"), "summary": str(Path(d) / "summary")}})
    fb_all = {f"fallbacks_{k}": v for k, v in prov["judge_fallbacks"].items()}
    fb_all |= {f"example_copies_{k}": v for k, v in prov["judge_example_copies"].items()}
    units_.append({"name": "mmdr/All", "tags": {"rule": "mmdr_report", "dataset": "all", "domain": "all"},
                   "metrics": {**_metric_names(rows[-1][1]), **fb_all},
                   "artifacts": [str(exp.leaderboard), str(exp.tasks), str(exp.manifest_path), str(out_md), str(out_csv)]})
    ids = log_units(config, "mmdr", params, units_)
    write_json(out_tracking, ids)
    log.info("read %d scored domains (%d records); wrote %s, %s (%s, complete %d/%d), %s, %s; MLflow parent %s with %d "
             "children; fallbacks per module: %s", len(run_dirs), len(recs), out, exp.leaderboard.name, "submission-ready" if
             exp.submission_ready else "partial", exp.manifest["records_complete"], n_tasks, out_md, out_csv, ids["parent"],
             len(ids["children"]), {k: v for k, v in prov["judge_fallbacks"].items() if v} or "none")
    return {"rows": rows, "manifest": exp.manifest, "tracking": ids}


def _metric_names(b: Mapping[str, Any]) -> dict[str, Any]:
    return {k.rstrip("."): v for k, v in b.items() if v is not None}
