"""The quality audit of MM-BRIGHT §3 as pipeline steps (:mod:`mmir.benchmarks.mmbright.audit`). The Snakemake rules
(``pipeline/rules/audit.smk``) and ``python -m mmir run`` call these.

* :func:`rate_step` -- per (dataset, domain): the judge rates each query with its positive Task 1 documents on the
  four criteria. Output: ``ratings.tsv`` (one row per query), ``calls.jsonl`` (every judge call's record: prompt hash,
  reply, parse outcome) and ``stats.json`` (counts, failures, the model, the prompt and its hash, cache hits).
* :func:`report_step` -- per-domain means with Student-t intervals and each dataset's pooled mean
  (``results/tables/audit.{md,csv}``) and the MLflow runs (a parent, a child per domain, one per dataset).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mmir.config.models import AuditConfig, AuditReportParams, fill, parse
from mmir.core.errors import DataError
from mmir.core.io import write_json, write_text
from mmir.workflow.units import PreparedUnit

log = logging.getLogger("mmir.workflow.audit")


def positives_of(qrels_file: str | Path, corpus: Mapping[str, str]) -> dict[str, list[str]]:
    """``{qid: positive document ids}`` (relevance > 0, in the qrels file's order) of a prepared domain.

    Raises:
        DataError: a positive document that is not in the corpus (file, line's query, field ``docid``).
    """
    from mmir.data.trec import read_qrels

    out = {}
    for qid, docs in read_qrels(qrels_file).items():
        pos = [d for d, r in docs.items() if r > 0]
        missing = [d for d in pos if d not in corpus]
        if missing:
            raise DataError(str(qrels_file), f"query {qid!r}: positive document {missing[0]!r} is not in corpus.parquet "
                            f"({len(missing)} missing)", field="docid")
        out[qid] = pos
    return out


def rate_step(unit: PreparedUnit, cfg: Mapping[str, Any], out_ratings: str | Path, out_calls: str | Path,
              out_stats: str | Path, *, generator: Mapping[str, Any] | Any, generation_cache: str | Path) -> dict:
    """Rate one domain's queries (see the module docstring); writes the three outputs atomically.

    Args:
        unit: the prepared domain (``topics.parquet``, ``corpus.parquet``, ``qrels.task1.txt``).
        cfg: the ``audit`` section (``prompt``, ``parser``, ``max_queries`` (0 = all), ``max_documents``,
            ``document_chars``, ``query_chars``, ``temperature``, ``max_tokens``, ``seed``).
        generator: the judge's generator config (or a ready backend).
        generation_cache: the SQLite generation cache.

    Returns:
        The stats written to ``out_stats``.

    Raises:
        DataError: a positive document missing from the corpus.
        LLMStageError: every judge call failed without a reply (nothing is written).
    """
    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
    from mmir.benchmarks.mmbright.audit import AUDIT_PARSERS, CRITERIA, rate, select_queries
    from mmir.llm.backends import Backend, make_backend
    from mmir.llm.cache import GenerationCache
    from mmir.llm.client import LLMClient
    from mmir.llm.policy import check_stage

    cfg = parse(AuditConfig, dict(cfg), "audit")
    t0 = time.perf_counter()
    prep = Path(unit.path)
    topics = pd.read_parquet(prep / "topics.parquet", columns=["qid", "query"])
    corpus = dict(pd.read_parquet(prep / "corpus.parquet").iloc[:, :2].itertuples(index=False))
    positives = positives_of(prep / "qrels.task1.txt", corpus)
    todo = select_queries(topics, positives, cfg.max_queries)
    with_pos = int(sum(bool(positives.get(q)) for q in topics["qid"]))
    prompt, parser = MMBRIGHT_PROMPTS.get(cfg.prompt), AUDIT_PARSERS[cfg.parser]
    backend = generator if isinstance(generator, Backend) else make_backend(dict(generator))
    with GenerationCache(generation_cache) as cache:
        before = dict(cache.stats)
        client = LLMClient(backend, cache)
        frame, counts = rate(todo, positives, corpus, client, prompt, parser, cfg)
        after = dict(cache.stats)
    unit_name = f"{unit.dataset}/{unit.domain}"
    llm = check_stage("audit", unit_name, client.audit) if len(todo) else {"llm_calls": 0, "llm_failures": 0}
    ok = frame[frame["status"] == "ok"]
    stats = {"dataset": unit.dataset, "domain": unit.domain, "topics": len(topics), "topics_with_positives": with_pos,
             "max_queries": cfg.max_queries, **counts, **llm, **{f"cache_{k}": after[k] - before[k] for k in after},
             **backend.usage.as_metrics(), "model": backend.model_id, "prompt": {prompt.id: prompt.sha256},
             "parser": parser.name, "means": {c: (float(ok[c].astype(float).mean()) if len(ok) else None) for c in CRITERIA},
             "seconds": round(time.perf_counter() - t0, 2)}
    write_text(out_ratings, frame.to_csv(sep="\t", index=False))
    client.audit.write_jsonl(out_calls)
    write_json(out_stats, stats)
    log.info("read %s (%d topics, %d with a positive document); wrote %s, %s, %s: %d queries rated, %d failed, %d "
             "rejected (left unrated), %d positives not shown (max_documents %d); %d judge calls (%d cached); %.0fs", prep,
             len(topics), with_pos, out_ratings, out_calls, out_stats, counts["rated"], counts["failed"], counts["rejected"],
             counts["documents_cut"], cfg.max_documents, llm["llm_calls"], stats["cache_hits"], stats["seconds"])
    if with_pos > len(todo):
        log.info("skipped %d queries with a positive document (max_queries %d)", with_pos - len(todo), cfg.max_queries)
    if with_pos < len(topics):
        log.info("skipped %d queries without a positive document (nothing to audit)", len(topics) - with_pos)
    return stats


def read_ratings(path: str | Path) -> pd.DataFrame:
    """A ``ratings.tsv`` of :func:`rate_step` (qids as strings, criteria as nullable integers)."""
    from mmir.benchmarks.mmbright.audit import CRITERIA

    return pd.read_csv(path, sep="\t", dtype={"qid": str, "status": str, "error": str}, keep_default_na=False,
                       na_values={c: [""] for c in CRITERIA}).astype({c: "Int64" for c in CRITERIA})


def _notes(cfg: AuditConfig, stats: Sequence[dict], confidence: float) -> list[str]:
    models = sorted({s["model"] for s in stats if s.get("model")})
    return [
        f"Judge: `{cfg.judge}` ({', '.join(models) or 'no call made'}); prompt `{cfg.prompt}` "
        f"(src/mmir/benchmarks/mmbright/prompts), parser `{cfg.parser}`; temperature {cfg.temperature}, max_tokens "
        f"{cfg.max_tokens}, seed {cfg.seed}. MM-BRIGHT used GPT-4o with its Appendix F prompt (not in the text held here).",
        "Each query is shown with its first " + f"{cfg.max_documents} positive Task 1 documents (each cut at "
        f"{cfg.document_chars} characters), as text only.",
        "Queries rated per domain: " + (f"the first {cfg.max_queries} with a positive document" if cfg.max_queries
                                        else "all with a positive document") + " (" + ", ".join(
            f"{s['domain']} {s['queries']} of {s['topics_with_positives']}" for s in stats) + ").",
        f"Cells: mean rating (1-5) over the rated queries with its {confidence:.0%} Student-t interval [low, high] "
        "(mean ± t · sd / sqrt(n); – when n < 2). n = rated queries; failed = calls without a reply; rejected = replies missing a "
        "criterion or rating outside 1-5 — both left out of the means, never given a default score. `All` pools the "
        "dataset's rated queries (each counts once).",
    ]


def report_step(config: Mapping[str, Any], ratings_files: Sequence[str | Path], stats_files: Sequence[str | Path],
                out_md: str | Path, out_csv: str | Path, out_tracking: str | Path) -> dict:
    """The audit table and MLflow runs.

    Args:
        config: the report's slice (:class:`~mmir.config.models.AuditReportParams`): ``audit``, ``generator`` (the
            judge's config), ``confidence``, ``units`` (``[{dataset, domain}]`` parallel to the files), ``mlflow``.
        ratings_files, stats_files: the rate step's outputs of each unit.

    Returns:
        ``{"parent", "children"}`` MLflow run ids (also written to ``out_tracking``).
    """
    from mmir.benchmarks.mmbright.audit import ALL, CRITERIA, aggregate
    from mmir.reporting.audit import write_audit
    from mmir.tracking import log_units

    r = parse(AuditReportParams, dict(config), "params")
    ratings, stats = {}, []
    for u, rf, sf in zip(r.units, ratings_files, stats_files):
        ratings[(u["dataset"], u["domain"])] = read_ratings(rf)
        stats.append(json.loads(Path(sf).read_text(encoding="utf-8")))
    summary = aggregate(ratings, float(r.confidence))
    judges = {(s["dataset"], s["domain"]): s.get("model") or "" for s in stats}
    summary.insert(2, "judge", [judges.get((d, m)) or _dataset_judge(judges, d) for d, m in zip(summary["dataset"],
                                                                                             summary["domain"])])
    summary["variant"] = "all queries" if not r.audit.max_queries else f"first {r.audit.max_queries} queries per domain"
    write_audit(summary, _notes(r.audit, stats, float(r.confidence)), out_md, out_csv)
    runs = []
    for s, rf, sf in zip(stats, ratings_files, stats_files):
        ds, dom = s["dataset"], s["domain"]
        sub = summary[(summary["dataset"] == ds) & (summary["domain"] == dom)]
        m = {k: s[k] for k in ("queries", "rated", "failed", "rejected", "documents_cut", "llm_calls", "llm_failures", "seconds")}
        m |= {f"{c}.{k}": v for c, *vals in sub[["criterion", "mean", "ci_low", "ci_high"]].itertuples(index=False)
              for k, v in zip(("mean", "ci_low", "ci_high"), vals)}
        runs.append({"name": f"audit/{ds}/{dom}", "tags": {"rule": "audit", "dataset": ds, "domain": dom,
                                                          "model": str(s.get("model") or "")},
                     "metrics": m, "artifacts": [str(rf), str(sf)]})
    for ds in dict.fromkeys(u["dataset"] for u in r.units):
        sub = summary[(summary["dataset"] == ds) & (summary["domain"] == ALL)]
        m = {f"{c}.{k}": v for c, *vals in sub[["criterion", "mean", "ci_low", "ci_high", "n"]].itertuples(index=False)
             for k, v in zip(("mean", "ci_low", "ci_high", "n"), vals)}
        runs.append({"name": f"audit/{ds}/{ALL}", "tags": {"rule": "audit_report", "dataset": ds}, "metrics": m,
                     "artifacts": [str(out_md), str(out_csv)]})
    ids = log_units(dict(config), "audit", {"audit": fill(r.audit), "generator": r.generator}, runs)
    write_json(out_tracking, ids)
    all_rows = summary[summary["domain"] == ALL]
    log.info("read %d ratings files; wrote %s, %s (%s); logged MLflow parent %s with %d children", len(ratings_files),
             out_md, out_csv, "; ".join(f"{d} {CRITERIA[c]} {m:.2f} (n {n})" for d, c, m, n in
                                         zip(all_rows["dataset"], all_rows["criterion"], all_rows["mean"], all_rows["n"])),
             ids["parent"], len(ids["children"]))
    return ids


def _dataset_judge(judges: Mapping[tuple[str, str], str], dataset: str) -> str:
    """The judge model of a dataset's pooled rows (its domains' models, joined when they differ)."""
    return "+".join(sorted({m for (d, _), m in judges.items() if d == dataset and m}))
