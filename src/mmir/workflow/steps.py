"""One function per pipeline step, taking explicit input/output paths and config slices.

Snakemake rule scripts (pipeline/scripts/) and the DVC-facing CLI (mmir.cli) are thin wrappers around these,
so the logic is importable and tested without either tool. Every step logs what it read, wrote and skipped,
with counts.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from mmir.config.models import Captioner, RagConfig, ReformulatorConfig, System, fill, parse, parse_dataset, parse_slice
from mmir.core import paths
from mmir.core.io import write_json
from mmir.workflow.units import PreparedUnit

log = logging.getLogger("mmir.workflow.steps")


def fetch(dataset: str, ds: dict, domain: str, out_marker: str | Path) -> dict:
    """Download one hub domain into ``data/raw/<dataset>/`` and write the marker JSON (commit, files)."""
    from mmir.data.hub import fetch_domain, fetch_files

    hub = parse_dataset(ds, f"datasets.{dataset}")
    dest = Path(paths.RAW.format(dataset=dataset))
    if hub.source == "beir":
        from mmir.data.beir import HUB_PATTERNS

        info = fetch_files(hub.repo_id, hub.revision, HUB_PATTERNS, dest, hub.source)
    elif hub.source == "bright":
        from mmir.data.bright import configs

        info = fetch_domain(hub.repo_id, hub.revision, domain, configs(hub), dest, hub.source)
    else:
        info = fetch_domain(hub.repo_id, hub.revision, domain, ["documents", "examples", "examples_multimodal",
                                                               "document_images", "examples_images"], dest)
    log.info("fetched %s@%s domain %s: wrote %d files under %s", hub.repo_id, info["commit"], domain, len(info["files"]), dest)
    write_json(out_marker, {"repo_id": hub.repo_id, "revision": hub.revision, **info})
    return info


def prepare(dataset: str, ds: dict, domain: str, out_dir: str | Path, fetched_marker: str | Path | None = None) -> dict:
    """Normalise and check one domain (:mod:`mmir.data.prepare`); writes its artifacts to ``out_dir``."""
    from mmir.data.domains import fetched
    from mmir.data.prepare import log_report, prepare_domain, write_prepared

    parsed = parse_dataset(ds, f"datasets.{dataset}")
    source = parsed.source
    meta = {"dataset": dataset, "domain": domain, "source": source}
    raw_root = None
    if fetched(parsed):
        marker = json.loads(Path(fetched_marker).read_text(encoding="utf-8"))
        meta |= {"repo_id": marker["repo_id"], "revision": marker["commit"]}
        raw_root = paths.RAW.format(dataset=dataset)
    p = prepare_domain(dataset, ds, domain, raw_root)
    report = write_prepared(p, out_dir, meta)
    log_report(report, out_dir, log)
    return report


def caption(prepared_dir: str | Path, captioner_name: str, captioner: dict, cache_path: str | Path,
            out_parquet: str | Path, generator: dict | None = None, generation_cache: str | Path | None = None,
            out_stats: str | Path | None = None, ocr_shards: tuple[list[str], list[str]] | None = None,
            threads: int = 1) -> dict:
    """Image text for every corpus and query image of a prepared domain (``path, role, text``).

    ``ocr``: RapidOCR or Tesseract, cached by image bytes (:mod:`mmir.encoders.ocr`): gathered from the ``ocr`` rule's
    shards when ``ocr_shards`` = (shard files, their stats files) is given (:mod:`mmir.workflow.ocr_steps`), else
    read here on ``threads`` processes. ``vlm``: the ``generator`` backend with a detailed-description prompt, through
    the generation cache (:mod:`mmir.benchmarks.mmbright.captions`). Corrupt images get "" and are counted. Writes
    ``out_parquet`` atomically, the counts (with ``llm_calls`` / ``llm_failures`` for ``vlm``) to ``out_stats``, and
    returns them.
    """
    import pandas as pd

    from mmir.core.io import write_parquet
    from mmir.encoders.ocr import OcrCaptioner
    from mmir.workflow import ocr_steps

    cap = parse(Captioner, captioner, f"captioners.{captioner_name}")
    if cap.kind == "ocr" and ocr_shards is not None:
        return ocr_steps.gather_captions(ocr_shards[0], ocr_shards[1], out_parquet, out_stats)
    prep = Path(prepared_dir)
    rows, n = [], {"images": 0, "empty": 0, "skipped_corrupt": 0}
    frames = [(role, pd.read_parquet(prep / fname)) for role, fname in (("corpus", "images.parquet"), ("query", "query_images.parquet"))]
    if cap.kind == "vlm":
        from mmir.benchmarks.mmbright.captions import vlm_captions
        from mmir.llm.backends import make_backend
        from mmir.llm.cache import GenerationCache
        from mmir.llm.client import LLMClient
        from mmir.llm.policy import check_stage

        with GenerationCache(generation_cache) as cache:
            before = dict(cache.stats)
            client = LLMClient(make_backend(generator), cache)
            for role, df in frames:
                texts, stats = vlm_captions(df, captioner, client)
                rows += [{"path": p, "role": role, "text": t} for p, t in zip(df["path"], texts)]
                for k, v in stats.items():
                    n[k] = n.get(k, 0) + v
            after = dict(cache.stats)
        n |= {f"cache_{k}": after[k] - before[k] for k in after}
        n |= check_stage("caption", f"{prep}/{captioner_name}", client.audit)
        n["empty"] = sum(not r["text"] for r in rows)
        n["skipped_corrupt"] = sum(int((~df["ok"].astype(bool)).sum()) for _, df in frames)
        n["engine_calls"] = n.get("cache_backend_calls", 0)
    else:
        n = dict.fromkeys(ocr_steps.COUNTS, 0)
        with OcrCaptioner.from_config(cap, cache_path, workers=threads) as ocr:
            for role, df in frames:
                got, counts = ocr_steps.ocr_frame(df, role, ocr)
                rows += got
                n = {k: n[k] + counts[k] for k in n}
    n["images"] = len(rows)
    write_parquet(out_parquet, pd.DataFrame(rows, columns=["path", "role", "text"]))
    if out_stats is not None:
        write_json(out_stats, n)
    log.info("read %s images of %s; wrote %s: %d captions (%d empty, %d corrupt images skipped, %d OCR runs, "
             "the rest from the cache)", n["images"], prep, out_parquet, n["images"], n["empty"], n["skipped_corrupt"], n["engine_calls"])
    return n


def reason_queries(dataset: str, ds: dict, domain: str, variant: str, out_parquet: str | Path) -> int:
    """BRIGHT's reasoning queries of config ``<variant>_reason`` for one task (:func:`mmir.data.bright.read_reasoning`),
    from the dataset's local ``root`` or its fetched copy; writes ``qid, query`` and returns the number of queries."""
    from mmir.core.io import write_parquet
    from mmir.data.bright import read_reasoning

    bright = parse_dataset(ds, f"datasets.{dataset}")
    frame = read_reasoning(bright, domain, variant, paths.RAW.format(dataset=dataset))
    write_parquet(out_parquet, frame)
    log.info("read %s_reason/%s of %s; wrote %s: %d queries", variant, domain, dataset, out_parquet, len(frame))
    return len(frame)


def augment(topics_file: str | Path, captions_file: str | Path, out_parquet: str | Path) -> int:
    """Caption-augmented Task 1 queries (:func:`mmir.benchmarks.mmbright.queries.caption_augmented`)."""
    import pandas as pd

    from mmir.benchmarks.mmbright.queries import caption_augmented
    from mmir.core.io import write_parquet

    topics = pd.read_parquet(topics_file)
    caps = pd.read_parquet(captions_file)
    out = caption_augmented(topics, dict(zip(caps["path"], caps["text"])))
    changed = int((out["query"] != topics["query"]).sum())
    write_parquet(out_parquet, out)
    log.info("read %s (%d topics) and %s; wrote %s: %d queries augmented, %d without image text kept as is",
             topics_file, len(topics), captions_file, out_parquet, changed, len(out) - changed)
    return changed


def reformulate(topics_file: str | Path, captions_file: str | Path, reformulator: dict, generator: dict,
                generation_cache: str | Path, out_parquet: str | Path, out_stats: str | Path) -> dict:
    """LLM-reformulated Task 1 queries (:func:`mmir.benchmarks.mmbright.queries.reformulate`), every generation
    cached; writes the queries and a stats JSON (statuses, tokens, requests, failures, retries, latency, cost)."""
    import pandas as pd

    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
    from mmir.benchmarks.mmbright.queries import reformulate as do_reformulate
    from mmir.core.io import write_parquet
    from mmir.llm.backends import make_backend
    from mmir.llm.cache import GenerationCache
    from mmir.llm.client import LLMClient
    from mmir.llm.policy import check_stage

    ref = parse(ReformulatorConfig, reformulator, "reformulators.<name>")
    topics = pd.read_parquet(topics_file)
    caps = pd.read_parquet(captions_file)
    backend = make_backend(generator)
    t0 = time.perf_counter()
    with GenerationCache(generation_cache) as cache:
        before = dict(cache.stats)
        client = LLMClient(backend, cache)
        frame, counts = do_reformulate(topics, dict(zip(caps["path"], caps["text"])), client,
                                       MMBRIGHT_PROMPTS.get(ref.prompt), temperature=ref.temperature, max_tokens=ref.max_tokens,
                                       seed=ref.seed)
        after = dict(cache.stats)
    counts |= {f"cache_{k}": after[k] - before[k] for k in after}
    llm = check_stage("reformulate", str(out_parquet), client.audit)
    stats = {**counts, **llm, **backend.usage.as_metrics(), "seconds": round(time.perf_counter() - t0, 2),
             "topics": len(topics), "model": backend.model_id}
    write_parquet(out_parquet, frame)
    write_json(out_stats, stats)
    log.info("read %s (%d topics); wrote %s: %d ok, %d without 'Search query:' (whole output used), %d failed "
             "(original query kept); %d backend calls, %d cache hits, %.0fs", topics_file, len(topics), out_parquet,
             counts["ok"], counts["no_marker"], counts["failed"], counts["cache_backend_calls"], counts["cache_hits"], stats["seconds"])
    return stats


def score(run_file: str | Path, qrels_file: str | Path, measures: list[str], out_json: str | Path,
          out_perquery: str | Path, meta: dict, binary: bool = False, tie_order: str = "run") -> dict:
    """Evaluate a run (:func:`mmir.evaluation.scoring.score_run`); ``binary`` collapses graded qrels
    (Task 4 under ``task4_protocol: official``)."""
    from mmir.evaluation.scoring import score_run

    s = score_run(run_file, qrels_file, measures, out_json, out_perquery, meta | {"binary_labels": binary}, binary,
                  tie_order)
    ties = s["ties"].get("nDCG@10", {})
    log.info("read %s and %s; wrote %s: %d judged queries (%d with no results, scored 0; %d run queries without qrels skipped); "
             "nDCG@10 = %s (tie-aware %s; %s tied items in the top 10 of %s queries)%s", run_file, qrels_file, out_json, s["queries"],
             s["queries_without_results"], s["run_queries_without_qrels"], s["measures"].get("nDCG@10"),
             s["tie_orders"]["expected"].get("nDCG@10"), ties.get("tied_items"), ties.get("queries_with_ties"),
             f"; {s['unscored']}" if s.get("unscored") else "")
    return s


@dataclass(frozen=True)
class TableFiles:
    """Where a task table goes: markdown ``md``, ``csv``, the cells as ``metrics`` JSON and, with per-query files,
    the intervals and tests as ``significance`` JSON."""

    md: str | Path
    csv: str | Path
    metrics: str | Path
    significance: str | Path | None = None


def report(task: str, metric_files: list[str], measure: str, protocol: str, out: TableFiles,
           untrained: list[str] = (), notes: list[str] = (), perquery_files: list[str] | None = None,
           significance: dict | None = None, reranked: dict[str, str] | None = None,
           rerank_stats: dict[str, list[str]] | None = None, approximate: list[str] = (), task4_protocol: str = "paper",
           baselines: dict[str, str] | None = None) -> None:
    """Write the task table (:mod:`mmir.reporting.tables`) to ``out``; ``protocol``, ``task4_protocol``: ``evaluation``'s; systems in
    ``untrained`` (random weights) and ``approximate`` (FAISS hnsw/ivf, Voyager) are labelled so; ``notes`` go on top. With
    the per-query files (parallel to ``metric_files``) and the ``significance`` config slice every cell gets its interval and its test
    against the baseline (:mod:`mmir.evaluation.significance`), also written to ``out.significance``. ``reranked``
    (``{<system>+rr:<reranker>: first-stage system}``) adds each reranked row's test against its own first stage
    (:mod:`mmir.reporting.rerank`); ``rerank_stats`` marks rows whose reranker calls failed; ``baselines``: ``{dataset: system}``."""
    from mmir.evaluation.significance import Settings
    from mmir.reporting import rerank as rr
    from mmir.reporting.tables import APPROXIMATE_NOTE, TableFiles, TableStatistics, collect, row_labels, task_statistics, write_task_table

    out_md, out_csv, out_metrics, out_significance = out.md, out.csv, out.metrics, out.significance
    fails = rr.failures(rerank_stats or {})
    label = row_labels(untrained, approximate, [s_ for s_, f in fails.items() if f["llm_failures"]])
    note = rr.failure_note(fails, label)
    notes = [*notes, *([APPROXIMATE_NOTE] if approximate else []), *([note] if note else [])]
    long = collect(metric_files)
    long["system"] = [label.get(s, s) for s in long["system"]]
    settings = Settings.from_config(significance)
    stats = None
    if perquery_files is not None:
        stats = task_statistics(metric_files, perquery_files, measure, settings, task, baselines)
        for st in stats.values():
            st["system"], st["baseline"] = st["system"].map(lambda s: label.get(s, s)), st["baseline"].map(lambda s: label.get(s, s))
    write_task_table(long, task, measure, protocol, TableFiles(out_md, out_csv, out_metrics, out_significance), notes=list(notes),
                     statistics=TableStatistics(stats, settings, label), task4_protocol=task4_protocol)
    if reranked and perquery_files is not None:
        _rerank_tests(task, metric_files, perquery_files, measure, settings, reranked, label, out_md, out_significance)
    log.info("read %d metric files%s; wrote %s, %s, %s%s", len(metric_files),
             f" and {len(perquery_files)} per-query files" if perquery_files is not None else "", out_md, out_csv, out_metrics,
             f", {out_significance} ({settings.test} test, {settings.correction} correction, {settings.resamples} resamples, "
             f"seed {settings.seed})" if out_significance else "")


def rag(unit: PreparedUnit, setting: str, rag_cfg: dict, generator: dict,
        judge: dict, generation_cache: str | Path, out_dir: str | Path, run_file: str | Path | None = None,
        captions: str | Path | None = None) -> dict:
    """Answer and judge one RAG setting on one domain (:mod:`mmir.benchmarks.rag.qa`); writes ``answers.parquet``,
    ``judgments.parquet`` and ``summary.json`` in ``out_dir``. A domain without reference answers is skipped
    with the reason in the summary."""
    import pandas as pd

    from mmir.benchmarks.rag.qa import (
        DomainIndex,
        run_setting,
        select_queries,
        summarize,
    )
    from mmir.core.io import write_parquet
    from mmir.llm.backends import make_backend
    from mmir.llm.cache import GenerationCache
    from mmir.llm.client import LLMClient, Sampling
    from mmir.llm.policy import check_stage

    cfg = parse(RagConfig, rag_cfg, "rag")
    dataset, domain, prepared_dir = unit.dataset, unit.domain, unit.path
    out = Path(out_dir)
    base = {"dataset": dataset, "domain": domain, "setting": setting}
    topics = select_queries(pd.read_parquet(Path(prepared_dir) / "topics.parquet"), cfg.max_queries)
    if topics.empty:
        reason = f"no query of {dataset}/{domain} has a reference answer (gold_answers): nothing to judge"
        log.warning("skipped: %s", reason)
        write_parquet(out / "answers.parquet", pd.DataFrame(columns=["qid", "answer", "evidence_ids", "status"]))
        write_parquet(out / "judgments.parquet", pd.DataFrame(columns=["qid", "repeat", "score", "status", "raw"]))
        write_json(out / "summary.json", base | {"skipped": reason, "queries": 0, "llm_calls": 0, "llm_failures": 0})
        return base | {"skipped": reason}
    caps = {}
    if captions:
        c = pd.read_parquet(captions)
        caps = dict(zip(c["path"], c["text"]))
    gen, jud = make_backend(generator), make_backend(judge)
    t0 = time.perf_counter()
    with GenerationCache(generation_cache) as cache:
        gen_client = LLMClient(gen, cache, sampling=Sampling(cfg.answer_temperature, cfg.answer_max_tokens,
                                                             cfg.seed))
        jud_client = LLMClient(jud, cache, sampling=Sampling(cfg.judge_temperature, cfg.judge_max_tokens,
                                                             cfg.seed))
        answers, judgments = run_setting(setting, topics, DomainIndex(prepared_dir, caps), run_file, gen_client, jud_client, cfg)
        cstats = dict(cache.stats)
    llm = check_stage("rag", f"{dataset}/{domain}/{setting}", gen_client.audit, jud_client.audit)
    summary = base | summarize(answers, judgments) | llm | {
        "seconds": round(time.perf_counter() - t0, 1), "generator": gen.model_id, "judge": jud.model_id,
        "cache": cstats, **gen.usage.as_metrics("gen_"), **jud.usage.as_metrics("judge_")}
    write_parquet(out / "answers.parquet", answers)
    write_parquet(out / "judgments.parquet", judgments)
    write_json(out / "summary.json", summary)
    log.info("read %s (%d queries with a reference answer)%s; wrote %s: score %s over %d scored answers, %d judge "
             "failures, %d answers failed, %.0fs", prepared_dir, len(topics), f" and {run_file}" if run_file else "",
             out, None if summary["score"] is None else round(summary["score"], 2), summary["answers_scored"],
             summary["judge_failures"], summary["answers_failed"], summary["seconds"])
    return summary


def rag_report(config: dict, summary_files: list[str], out_md, out_csv, out_tracking,
               judgment_files: list[str] | None = None) -> None:
    """The RAG table (:mod:`mmir.reporting.rag`; with the judgments and ``significance``, intervals and
    tests against the baseline setting) and its MLflow runs (:func:`mmir.tracking.log_rag`; each child also gets its
    cell's interval and p-values)."""
    from mmir.evaluation.significance import Settings
    from mmir.reporting.rag import collect_rag, rag_statistics, write_rag_table
    from mmir.tracking import log_rag

    c = parse_slice(config)
    rag = c.rag
    settings = c.significance or Settings()
    stats = rag_statistics(summary_files, judgment_files, settings) if judgment_files is not None else None
    write_rag_table(collect_rag(summary_files), rag.generator, rag.judge, rag.judge_repeats, out_md, out_csv,
                    stats=stats, settings=settings)
    summaries = [json.loads(Path(f).read_text(encoding="utf-8")) for f in summary_files]
    for s in summaries:
        st = (stats or {}).get(s["dataset"])
        if st is not None and not s.get("skipped"):
            for col, prefix in ((s["domain"], "score"), ("Avg.", "avg")):
                hit = st[(st["system"] == s["setting"]) & (st["column"] == col)]
                if len(hit):
                    s |= {f"{prefix}_{k}": float(hit[k].iloc[0]) for k in ("ci_low", "ci_high", "p", "p_adj")
                          if hit[k].iloc[0] == hit[k].iloc[0]}
    arts = [[str(Path(f).parent / "answers.parquet"), str(Path(f).parent / "judgments.parquet"), str(f)] for f in summary_files]
    ids = log_rag(config, summaries, arts)
    write_json(out_tracking, ids)
    log.info("read %d RAG summaries; wrote %s, %s; logged MLflow parent %s with %d children", len(summary_files),
             out_md, out_csv, ids["parent"], len(ids["children"]))


def _rerank_tests(task: str, metric_files: list[str], perquery_files: list[str], measure: str, settings, reranked: dict[str, str],
                  label: dict[str, str], out_md, out_significance) -> None:
    """Append each reranked row's test against its first stage to the table's markdown and significance JSON."""
    from mmir.core.io import write_text
    from mmir.reporting import rerank as rr
    from mmir.reporting.tables import collect_perquery

    tests = rr.first_stage_tests(collect_perquery(metric_files, perquery_files, measure), reranked, settings, task)
    lines, cells = [], {}
    for ds, t in tests.items():
        t = t.assign(system=t["system"].map(lambda x: label.get(x, x)), first_stage=t["first_stage"].map(lambda x: label.get(x, x)))
        lines += [f"## {ds}: reranked vs first stage", "", *rr.markdown(t, settings)]
        cells[ds] = rr.json_cells(t)
    if lines:
        md = Path(out_md)
        write_text(md, md.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines))
    if out_significance is not None and cells:
        sig = json.loads(Path(out_significance).read_text(encoding="utf-8"))
        write_json(out_significance, sig | {"rerank": cells})


def ablation_report(grid: str, metric_files: list[str], measure: str, derived: dict, out_md, out_csv, out_png,
                    out_plot_csv, perquery_files: list[str] | None = None, reranked: dict[str, str] | None = None,
                    significance: dict | None = None, untrained: list[str] = ()) -> None:
    """The caption or reformulation grid (:mod:`mmir.reporting.ablation`). ``reranked`` (``{<ablation system>+rr:<reranker>:
    its first stage}``, their metric and per-query files among the others): each gets its own row under the grid, with
    its interval and its paired test against its first stage (:func:`mmir.reporting.rerank.ablation_rows`), also in the
    CSV; those in ``untrained`` (random weights) are labelled so."""
    from mmir.reporting.ablation import ablation_frame, write_ablation

    reranked = reranked or {}
    grid_files = [f for f in metric_files if json.loads(Path(f).read_text(encoding="utf-8"))["system"] not in reranked]
    llm = {}
    for f in grid_files:  # the query stage's llm_calls / llm_failures, where it has a stats JSON
        m = json.loads(Path(f).read_text(encoding="utf-8"))
        d = derived.get(m["system"])
        stats = Path(paths.QUERIES_STATS.format(dataset=m["dataset"], domain=m["domain"], variant=d["variant"])) if d else None
        if stats is not None and stats.exists():
            llm[(m["dataset"], m["domain"], m["system"])] = json.loads(stats.read_text(encoding="utf-8"))
    frame = ablation_frame(grid_files, measure, derived, llm)
    write_ablation(grid, frame, measure, out_md, out_csv, out_png, out_plot_csv)
    if reranked:
        from mmir.reporting.rerank import append_ablation_rows

        append_ablation_rows(metric_files, perquery_files, measure, derived, reranked, significance, frame, out_md, out_csv,
                             untrained)
    log.info("read %d metric files; wrote %s, %s, %s, %s (%d cells, %d reranked systems)", len(metric_files), out_md, out_csv,
             out_png, out_plot_csv, len(frame), len(reranked))


def _significance_metrics(significance_file: str | Path | None) -> tuple[dict, dict]:
    """From ``<task>.significance.json``: ``{(dataset, system, domain): metrics}`` of the cells (interval, test against
    the baseline; keys ``<measure>.ci_low``, ...) and the parent run's metrics (every Avg. cell,
    ``<dataset>.<system>.Avg.<key>``)."""
    import re

    if not significance_file or not Path(significance_file).is_file():
        return {}, {}
    sig = json.loads(Path(significance_file).read_text(encoding="utf-8"))
    if "datasets" not in sig:
        return {}, {}
    m = sig["measure"].replace("@", "_at_")
    unlabel = {v: k for k, v in sig.get("labels", {}).items()}
    cells, parent = {}, {}
    for ds, t in sig["datasets"].items():
        for label, cols in t["cells"].items():
            system = unlabel.get(label, label)
            for col, c in cols.items():
                vals = {f"{m}.{k}": c[k] for k in ("ci_low", "ci_high", "diff", "p", "p_adj") if c.get(k) is not None}
                if col == "Avg.":
                    parent |= {re.sub(r"[^A-Za-z0-9_./ -]", "_", f"{ds}.{system}.Avg.{k}"): v for k, v in vals.items()}
                else:
                    cells[ds, system, col] = vals
    return cells, parent


def model_revision(system: System) -> str:
    """What names a system's weights in MLflow: its pinned revision, else its model, its multimodal encoder, or its
    BM25 backend; an external run (``kind: run``): its path template (each file's sha256 is a tag of its own)."""
    return str(getattr(system, "revision", None) or getattr(system, "model", None) or getattr(system, "encoder", None)
               or getattr(system, "backend", None) or f"external run {system.path}")


def track(config: dict, task: str, units: list[dict], out_json: str | Path, run_name: str | None = None,
          derived: dict[str, dict] | None = None, significance: str | Path | None = None,
          reranked: dict[str, dict] | None = None) -> dict:
    """Log this invocation to MLflow (:func:`mmir.tracking.log_invocation`); writes the run ids. ``derived``: the
    ablation systems among ``units`` (:func:`mmir.workflow.units.ablation_systems`); ``significance``: the task's
    ``<task>.significance.json`` (each child gets its cell's interval and p-values, the parent the Avg. ones);
    ``reranked``: the reranked systems among ``units`` (:func:`mmir.workflow.units.rerank_systems`: their child run's
    params hold the first stage, the reranker's config and the depth; its metrics the run stats' call counts)."""
    from mmir.tracking import log_invocation, redact, tracking_uri
    from mmir.workflow.units import config_slice

    c = parse_slice(config)
    derived = derived or {}
    sig_cells, sig_parent = _significance_metrics(significance)
    entries = []
    for u in units:
        fmt = dict(task=u.get("task", task), dataset=u["dataset"], domain=u["domain"], system=u["system"])
        prep = json.loads(Path(paths.prepared(u["dataset"], u["domain"], "prepare.json")).read_text(encoding="utf-8"))
        r = (reranked or {}).get(u["system"])
        d = derived.get(r["base"] if r else u["system"])  # a reranked ablation system: its first stage's query variant
        base = d["base"] if d else (r["base"] if r else u["system"])
        system = c.systems[base]
        params = config_slice(c, dataset=u["dataset"], system=base)
        gen_metrics = {}
        if d:
            params["ablation"] = d
            if d["grid"] == "reformulation":
                reformulator = c.reformulators[d["source"]]
                params["reformulator"] = fill(reformulator)
                params["generator"] = fill(c.generators[reformulator.generator])
                stats = Path(paths.QUERIES_STATS.format(dataset=u["dataset"], domain=u["domain"], variant=d["variant"]))
                gen_metrics = {k: v for k, v in json.loads(stats.read_text()).items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool)}
            elif d["grid"] == "caption":
                params["captioner"] = fill(c.captioners[d["source"]])
        if r:
            reranker = c.rerankers[r["reranker"]]
            params["rerank"] = {"first_stage": r["base"], "depth": r["depth"], "reranker": {"name": r["reranker"], **fill(reranker)}}
            if getattr(reranker, "generator", None):
                gen = fill(c.generators[reranker.generator])
                if "generator" in params:  # the first stage's reformulator has one: the reranker's goes under rerank
                    params["rerank"]["generator"] = gen
                else:
                    params["generator"] = gen
        entries.append({
            **u,
            "metrics_json": paths.METRICS.format(**fmt),
            "perquery": paths.PERQUERY.format(**fmt),
            "run_file": paths.RUN.format(**fmt),
            "params": params | {"measures": c.measures},
            "tags": {"dataset_revision": str(prep.get("revision", "local")), "model_revision": model_revision(system)},
            "extra_metrics": gen_metrics | {k: v for k, v in json.loads(Path(paths.RUN_STATS.format(**fmt)).read_text()).items()
                                            if isinstance(v, (int, float)) and not isinstance(v, bool)}
                             | sig_cells.get((u["dataset"], u["system"], u["domain"]), {}),
        })
    ids = log_invocation(config, task, entries, run_name=run_name, parent_metrics=sig_parent)
    write_json(out_json, {"tracking_uri": redact(tracking_uri(config)), **ids})
    log.info("logged parent run %s with %d child runs to %s", ids["parent"], len(ids["children"]), redact(tracking_uri(config)))
    return ids
