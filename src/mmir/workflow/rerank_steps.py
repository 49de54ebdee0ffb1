"""The step of the ``rerank`` rule: one first-stage run of one task and domain reranked
(:mod:`mmir.retrieval.rerank`), written as a TREC run with its stats and, for LLM rerankers, the audit of every call."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.config.models import Reranker, parse
from mmir.core.io import write_json, write_text

log = logging.getLogger("mmir.workflow.rerank")


@dataclass(frozen=True)
class RerankJob:
    """One rerank job. ``reranker``: the ``rerankers.<name>`` entry (``generator``: its generator's entry, LLM kinds);
    ``captions``: the image text of the domain (tasks that rank images or pairs); ``out_calls``: the audit (JSON lines,
    empty for a cross-encoder); ``queries``: the query variants (``qid, query`` parquet) of an ablation first stage,
    whose text replaces each topic's, as in the first stage's search; ``top_k``: the first stage's ``evaluation.top_k``
    (rankings shorter than it are complete, so a larger ``depth`` reranks them whole)."""

    task: str
    prep: str | Path
    system: str
    reranker_name: str
    reranker: dict
    depth: int
    first_stage: str | Path
    out_run: str | Path
    out_stats: str | Path
    out_calls: str | Path
    generator: dict | None = None
    generation_cache: str | Path | None = None
    captions: str | Path | None = None
    alt_text: bool = False
    queries: str | Path | None = None
    top_k: int | None = None


def reranker_prompt(cfg: Any):
    """The prompt template of an LLM/VLM reranker (a VLM's ``prompt`` defaults by its ``mode``)."""
    from mmir.retrieval.rerank import RERANK_PROMPTS

    name = cfg.prompt or ("rerank_listwise_v1" if getattr(cfg, "mode", None) == "listwise" else "rerank_pointwise_v1")
    return RERANK_PROMPTS.get(name)


def rerank(job: RerankJob, *, scorer=None, backend=None) -> dict:
    """Rerank ``job.first_stage`` (``scorer`` / ``backend``: an already loaded cross-encoder, plug-in scorer or LLM
    backend, for tests).

    Raises:
        PluginError: a plug-in reranker that cannot be built, raised, or returned bad scores (nothing is written).
        DataError: the run's queries are not the task's, it ranks an unknown item, or ``depth`` exceeds every ranking.
        LLMStageError: every LLM call failed (nothing is written).
    """
    from mmir.retrieval.items import ImageText
    from mmir.retrieval.rerank.candidates import TaskCandidates
    from mmir.retrieval.rerank.order import check_run
    from mmir.retrieval.rerank.stage import cross_encoder_reranker, llm_reranker, rerank_run
    from mmir.retrieval.runs import read_run, write_run

    t0 = time.perf_counter()
    cfg = parse(Reranker, job.reranker, f"rerankers.{job.reranker_name}")
    image_text = ImageText.load(job.captions, job.prep, job.alt_text) if job.captions else None
    cands = TaskCandidates(job.task, job.prep, image_text, with_images=cfg.kind == "vlm", variants=job.queries)
    run = read_run(job.first_stage)
    longest = check_run(run, cands.queries.qids, job.depth, str(job.first_stage), items_known=cands.item_ids, top_k=job.top_k)
    stats: dict[str, Any] = {"task": job.task, "system": job.system, "reranker": job.reranker_name, "kind": cfg.kind,
                             "depth": job.depth, "first_stage": str(job.first_stage), "queries": len(run),
                             "first_stage_depth": longest, **({"queries_file": str(job.queries)} if job.queries else {})}
    audit = None
    if cfg.kind == "cross-encoder":
        if cfg.runtime == "torch":
            from mmir.retrieval.rerank.cross_encoder import CrossEncoderScorer as Scorer
        else:
            from mmir.retrieval.rerank.onnx_cross_encoder import OnnxCrossEncoderScorer as Scorer

        ce = scorer or Scorer(cfg)
        try:
            out = rerank_run(run, job.depth, cross_encoder_reranker(ce, cands))
        finally:
            if scorer is None:
                ce.close()
        stats |= {"pairs": ce.pairs, "pairs_truncated": ce.truncated, "model": cfg.model, "device": ce.device,
                  "random_init": cfg.random_init, "runtime": cfg.runtime,
                  **({"onnx_sha256": ce.onnx.sha256, "precision": ce.onnx.precision} if getattr(ce, "onnx", None) else {})}
    elif cfg.kind == "plugin":  # a Python plug-in's scores, checked query by query
        from mmir.retrieval.encoding import corpus_texts
        from mmir.retrieval.rerank.plugin import PluginRerankScorer

        ps = scorer or PluginRerankScorer(cfg, f"rerankers.{job.reranker_name}", lambda: corpus_texts(job.prep))
        out = rerank_run(run, job.depth, ps.query_reranker(cands))
        stats |= {"pairs": ps.pairs, "plugin": ps.identity.label, "plugin_calls": ps.caller.batches}
    else:
        from mmir.llm.backends import make_backend
        from mmir.llm.cache import GenerationCache
        from mmir.llm.client import LLMClient
        from mmir.llm.policy import check_stage
        from mmir.retrieval.rerank.llm import LLMReranker

        be = backend or make_backend(job.generator)
        cache = GenerationCache(job.generation_cache) if job.generation_cache else GenerationCache.in_memory()
        with cache:
            before = dict(cache.stats)
            client = LLMClient(be, cache)
            rr = LLMReranker(client, cfg, reranker_prompt(cfg), images=cfg.kind == "vlm")
            out = rerank_run(run, job.depth, llm_reranker(rr, cands))
            after = dict(cache.stats)
        audit = client.audit
        llm = check_stage("rerank", str(job.out_run), audit)
        counts = {k: int(rr.counts.get(k, 0)) for k in ("unscored", "windows", "windows_kept", "windows_partial",
                                                         "candidates_cut", "queries_cut", "query_images_cut")}
        stats |= counts | llm | {f"cache_{k}": after[k] - before[k] for k in after} | {"model": be.model_id}
        if cfg.kind == "llm-pointwise":
            stats["score"] = cfg.score  # reply: the written grade; logprobs: the expected grade
    n = write_run(job.out_run, out, tag=job.system)
    stats |= {"run_lines": n, "seconds": round(time.perf_counter() - t0, 3)}
    write_text(job.out_calls, audit.to_jsonl() if audit is not None else "")
    write_json(job.out_stats, stats)
    log.info("read %s (%d queries, up to %d items each); reranked the top %d with %s (%s); wrote %s: %d lines; %s; %.1fs",
             job.first_stage, len(run), longest, job.depth, job.reranker_name, cfg.kind, job.out_run, n,
             ", ".join(f"{k} {v}" for k, v in stats.items() if k in ("pairs_truncated", "llm_calls", "llm_failures", "unscored",
                                                                      "windows_kept", "candidates_cut")), stats["seconds"])
    return stats
