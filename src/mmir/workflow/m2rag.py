"""M2RAG as pipeline steps (spec ``shared/specs/m2rag.md``): knowledge bases, answers with their eight
metrics, and the table. The Snakemake rules (``pipeline/rules/m2rag.smk``) and ``python -m mmir m2rag`` call
these; all model calls go through the generation cache, so a rerun repeats nothing finished.

Per (dataset, domain, source):

* :func:`build_knowledge_bases_step` -- a knowledge base per query from the top documents of a retrieval
  run over a prepared domain (``source`` = the system), images described by their alt text and the image
  text of a captioner (OCR), curated (pHash dedup, size filters) and scored 0-10 with the text chunks by the
  judge (spec §2); or :func:`load_dev_set_step` -- the M2RAG-Bench dev set, already scored.
  Output: ``kb.jsonl`` (one curated :class:`~mmir.benchmarks.m2rag.records.M2RAGQuery` per line, image bytes left out)
  and ``kb.json`` (counts).

Per (dataset, domain, source, strategy):

* :func:`answer_step` -- K_In-Doc selection (spec §3), generation (§4), the eight metrics (§6) and one HTML
  page per answer. Output: ``answers.jsonl``, ``evaluations.jsonl``, ``summary.json``, ``pages/<qid>.html``.

Then :func:`report_step` pools the evaluations over domains (spec §6.7) into ``results/tables/m2rag.{md,csv}``
and logs MLflow runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.benchmarks.m2rag.aggregate import aggregate
from mmir.benchmarks.m2rag.records import CountReport
from mmir.benchmarks.m2rag.store import (
    STRATEGIES,
    StoredEvaluation,
    collect,
    evaluation_record,
    page_name,
    prepared_image_bytes,
    read_kb,
    selection_config,
    write_kb,
)
from mmir.config.models import M2RAGConfig, Params, fill, parse, parse_slice, partial
from mmir.core.io import write_json, write_text
from mmir.llm.policy import check_stage
from mmir.reporting.m2rag import write_table
from mmir.workflow.units import PreparedUnit

log = logging.getLogger("mmir.workflow.m2rag")





def _client(backend: Mapping[str, Any] | Any, cache, seed: int | None, max_tokens: int, temperature: float):
    """An :class:`~mmir.llm.client.LLMClient` over a generator config (built with ``make_backend``) or over a
    ready :class:`~mmir.llm.backends.Backend` instance (notebooks, tests)."""
    from mmir.llm.backends import Backend, make_backend
    from mmir.llm.client import LLMClient, Sampling

    return LLMClient(backend if isinstance(backend, Backend) else make_backend(dict(backend)), cache,
                     sampling=Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed))


def kb_inputs(config: dict | Params, dataset: str, domain: str, source: str) -> dict[str, str]:
    """What the knowledge-base step of a unit reads, by name: ``run``, ``topics``, ``corpus``, ``images``,
    ``captions`` (when ``m2rag.image_text`` is set) and ``anchors`` (``meta/<domain>.document_images.tsv`` of
    a local dataset, when ``anchor_images`` and the file exists); for the dev set, ``devset``."""
    from mmir.core import paths
    from mmir.core.paths import project_path
    from mmir.workflow.units import M2RAG_DEVSET, typed

    p = typed(config)
    m = p.m2rag
    if (dataset, domain, source) == M2RAG_DEVSET:
        return {"devset": str(project_path(m.devset.path))}
    files = {"run": paths.RUN.format(task=m.task, dataset=dataset, domain=domain, system=source),
             **{n: paths.prepared(dataset, domain, f"{n}.parquet") for n in ("topics", "corpus", "images")}}
    if m.image_text:
        files["captions"] = paths.CAPTIONS.format(dataset=dataset, domain=domain, captioner=m.image_text)
    ds = p.datasets[dataset]
    if m.anchor_images and ds.source == "local":
        tsv = project_path(ds.root) / "meta" / f"{domain}.document_images.tsv"
        if tsv.is_file():
            files["anchors"] = str(tsv)
    return files












# ------------------------------------------------------------------------------------ knowledge bases
def build_knowledge_bases_step(unit: PreparedUnit, source: str, run_file: str | Path, cfg: Mapping[str, Any],
                               judge: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
                               captions: str | Path | None = None, anchor_tsv: str | Path | None = None) -> dict:
    """Curated, scored knowledge bases of the first ``max_queries`` topics of a prepared domain.

    Steps: :func:`mmir.benchmarks.m2rag.knowledge_base.build_knowledge_bases` (``top_n`` documents of ``run_file``,
    ``page_scope``; figures anchored to their passage through ``anchor_tsv`` when given), image text from
    ``captions`` (``path, role, text``; e.g. OCR) next to the alt text, :func:`~mmir.benchmarks.m2rag.selection.curate_images`
    (dedup, size filters, 0-10 image scores from descriptions) and :func:`~mmir.benchmarks.m2rag.selection.score_chunks`.

    Args:
        unit: the prepared domain (``topics.parquet``, ``corpus.parquet``, ``images.parquet``).
        source: the retrieval system of ``run_file``.
        cfg: the validated ``m2rag`` config; judge: the judge's generator config.
        generation_cache: the SQLite generation cache.
        out_dir: gets ``kb.jsonl`` and its counts ``kb.json``.

    Returns:
        The counts written to ``kb.json``.
    """
    m = parse(partial(M2RAGConfig), dict(cfg), "m2rag")
    import pandas as pd
    from tqdm import tqdm

    from mmir.benchmarks.m2rag.knowledge_base import (
        ImagePlacement,
        PreparedDomain,
        build_knowledge_bases,
        image_passages_from_captions,
        load_image_captions,
    )
    from mmir.benchmarks.m2rag.selection import (
        CurationReport,
        curate_images,
        score_chunks,
    )
    from mmir.llm.cache import GenerationCache

    dataset, domain, prepared_dir = unit.dataset, unit.domain, unit.path
    out_jsonl, out_json = Path(out_dir) / "kb.jsonl", Path(out_dir) / "kb.json"
    t0 = time.perf_counter()
    prepared_dir = Path(prepared_dir)
    topics = pd.read_parquet(prepared_dir / "topics.parquet", columns=["qid", "query"])
    qids = [str(q) for q in topics["qid"]][: m.max_queries or None]
    tables = PreparedDomain.from_dir(prepared_dir)
    anchors = image_passages_from_captions(tables, load_image_captions(anchor_tsv)) if anchor_tsv else {}
    queries, kb_report = build_knowledge_bases(run_file, dict(zip(topics["qid"].astype(str), topics["query"])), tables,
                                               top_n=m.top_n, page_scope=m.page_scope,
                                               images=ImagePlacement(passages=anchors, max_per_page=m.max_page_images),
                                               qids=qids)
    image_text = {}
    if captions:
        c = pd.read_parquet(captions, columns=["path", "text"])
        image_text = dict(zip(c["path"].astype(str), c["text"].fillna("").astype(str)))
    described = CountReport()
    for q in queries:
        for im in q.all_images():
            im.ocr = image_text.get(im.cached_image_url, "")
            described.add("images_with_image_text" if im.ocr.strip() else "images_without_image_text")
            has_alt = bool(im.alt.strip())
            described.add("images_with_alt" if has_alt else "images_without_alt", example=None if has_alt else im.cached_image_url)
    curation = CurationReport()
    with GenerationCache(generation_cache) as cache:
        scorer = _client(judge, cache, m.seed, m.judge_max_tokens, m.judge_temperature)
        for q in tqdm(queries, desc=f"m2rag kb {dataset}/{domain}/{source}", unit="query"):
            curation.merge(curate_images(q, selection_config(cfg), scorer=scorer, vision=False,
                                         max_tokens=m.image_score_max_tokens))
            curation.merge(score_chunks(q, scorer, max_tokens=m.judge_max_tokens))
        cstats = dict(cache.stats)
    llm = check_stage("m2rag_kb", f"{dataset}/{domain}/{source}", scorer.audit)
    write_kb(queries, out_jsonl)
    summary = {"dataset": dataset, "domain": domain, "source": source, "queries": len(queries),
               "anchored_by_caption": len(anchors), "knowledge_base": kb_report.to_dict(),
               "image_text": described.to_dict(), "curation": {"counts": dict(sorted(curation.counts.items())),
                                                               "failures": curation.failures[:20]},
               "judge": scorer.backend.model_id, **llm, "cache": cstats, "seconds": round(time.perf_counter() - t0, 1)}
    write_json(out_json, summary)
    k = kb_report.counts
    log.info("read %s (%d topics, first %d used), %s and %s (%d figures of the domain anchored to a passage by caption); "
             "wrote %s: %d queries, %d pages, %d passages, %d images (%d anchored after their passage, %d at the page "
             "end; %d not ok, %d over max_page_images skipped); curation %s; %.0fs", prepared_dir, len(topics), len(qids),
             run_file, anchor_tsv or "no figure captions", len(anchors), out_jsonl, len(queries), k.get("pages", 0),
             k.get("passages", 0), k.get("images", 0), k.get("images_anchored", 0), k.get("images_unanchored", 0),
             k.get("images_not_ok", 0), k.get("images_over_page_limit", 0), dict(sorted(curation.counts.items())),
             summary["seconds"])
    return summary


def load_dev_set_step(source: str | Path, image_root: str | Path | None, cfg: Mapping[str, Any],
                      out_jsonl: str | Path, out_json: str | Path, *, levels: Sequence[int] | None = (1,)) -> dict:
    """The M2RAG-Bench dev set (spec §1; a local copy of ``ylwt/M2RAG-Bench``) as a ``kb.jsonl``: its
    chunks and images are already scored, so no judge runs. The first ``max_queries`` kept records;
    the loader's counted irregularities go to ``out_json``."""
    m = parse(partial(M2RAGConfig), dict(cfg), "m2rag")
    from mmir.benchmarks.m2rag.loader import load_dev_set

    dev = load_dev_set(source, image_root=image_root, levels=levels, limit=m.max_queries or None)
    write_kb(dev.queries, out_jsonl)
    summary = {"source": str(source), "queries": len(dev.queries), "loader": dev.report.to_dict(), "llm_calls": 0,
               "llm_failures": 0}
    write_json(out_json, summary)
    log.info("read %s; wrote %s: %d queries; counted %s", source, out_jsonl, len(dev.queries), dev.report.counts)
    return summary


@dataclass(frozen=True)
class AnswerUnit:
    """One M2RAG answer unit: the knowledge bases of (``dataset``, ``domain``, ``source``) answered by ``strategy``."""

    dataset: str
    domain: str
    source: str
    strategy: str


def answer_step(unit: AnswerUnit, kb_jsonl: str | Path, cfg: Mapping[str, Any], generator: Mapping[str, Any],
                judge: Mapping[str, Any], generation_cache: str | Path, out_dir: str | Path,
                images: str | Path | None = None, encoder_system: Mapping[str, Any] | None = None) -> dict:
    """Generate and evaluate the answers of one strategy for every query of ``kb_jsonl``.

    Per query: :func:`~mmir.benchmarks.m2rag.selection.select_input` (MuRAR settings for ``separate``), the strategy of
    :mod:`mmir.benchmarks.m2rag.generate` (``mode="llm"``: images as descriptions), the eight metrics
    (:func:`~mmir.benchmarks.m2rag.metrics.evaluate_answer`; a text-only judge reads image descriptions) and an HTML page
    with the images embedded. A failed generation is excluded and counted (spec §6.7); a failed judgement is a
    counted failure of its metric, never a score.

    Args:
        unit: the unit; its strategy ``single_stage``, ``multi_stage`` or ``separate``.
        kb_jsonl: from :func:`build_knowledge_bases_step` or :func:`load_dev_set_step`.
        cfg: the ``m2rag`` config; generator, judge: generator configs.
        out_dir: gets ``answers.jsonl``, ``evaluations.jsonl``, ``summary.json`` and ``pages/``.
        images: the prepared domain's ``images.parquet`` (the images' bytes), for prepared-data knowledge bases.
        encoder_system: a dense system config whose encoder matches images to lines (``separate`` only).

    Raises:
        ValueError: unknown strategy, or ``separate`` without ``encoder_system``.
    """
    m = parse(partial(M2RAGConfig), dict(cfg), "m2rag")
    from tqdm import tqdm

    from mmir.benchmarks.m2rag import generate
    from mmir.benchmarks.m2rag.metrics import Judges, evaluate_answer
    from mmir.benchmarks.m2rag.render import render_html_with_report
    from mmir.benchmarks.m2rag.selection import select_input
    from mmir.llm.backends import GenerationFailure
    from mmir.llm.cache import GenerationCache

    dataset, domain, source, strategy = unit.dataset, unit.domain, unit.source, unit.strategy
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown M2RAG strategy {strategy!r}; expected one of {STRATEGIES}")
    encoder = None
    if strategy == "separate":
        if encoder_system is None:
            raise ValueError("the separate strategy needs encoder_system (a dense system config)")
        from mmir.encoders.text import make_text_encoder

        enc = make_text_encoder(dict(encoder_system))

        def encoder(texts):
            return enc.encode_documents(list(texts))

    t0 = time.perf_counter()
    out = Path(out_dir)
    queries = read_kb(kb_jsonl, prepared_image_bytes(images) if images else None)
    sel_cfg = selection_config(cfg, strategy)
    answers, evaluations, failures = [], [], []
    selection_counts: dict[str, int] = {}
    render_counts = {"pages": 0, "images_embedded": 0, "images_dangling": 0}
    pages: dict[str, str] = {}
    with GenerationCache(generation_cache) as cache:
        gen = _client(generator, cache, m.seed, m.answer_max_tokens, m.answer_temperature)
        jud = _client(judge, cache, m.seed, m.judge_max_tokens, m.judge_temperature)
        judges = Judges(text=jud, image_vision=False)
        for q in tqdm(queries, desc=f"m2rag {strategy} {dataset}/{domain}/{source}", unit="query"):
            selected = select_input(q, sel_cfg)
            for k, v in selected.report.items():
                selection_counts[k] = selection_counts.get(k, 0) + v
            try:
                if strategy == "single_stage":
                    ans = generate.single_stage(selected, gen, mode="llm")
                elif strategy == "multi_stage":
                    ans = generate.multi_stage(selected, gen, mode="llm", place_max_tokens=m.judge_max_tokens)
                else:
                    ans = generate.separate(selected, gen, encoder, threshold=m.separate_threshold)
            except GenerationFailure as f:
                failures.append({"qid": q.query_id, "error": str(f)})
                log.warning("%s: %s generation failed, excluded: %s", q.query_id, strategy, f)
                continue
            ev = evaluate_answer(ans, selected, judges, context_tokens=m.context_tokens,
                                 recall_threshold=m.recall_threshold, released_parse=m.released_parse,
                                 max_tokens=m.metric_max_tokens, faithfulness_max_tokens=m.faithfulness_max_tokens)
            html, rrep = render_html_with_report(ans, selected.images, title=f"{q.content[:80]} [{strategy}]")
            pages[page_name(q.query_id)] = html
            render_counts["pages"] += 1
            render_counts["images_embedded"] += rrep.embedded
            render_counts["images_dangling"] += len(rrep.dangling)
            answers.append({**ans.to_dict(), "selected_images": [ii.image.cached_image_url for ii in selected.images],
                            "page": f"pages/{page_name(q.query_id)}.html"})
            evaluations.append(evaluation_record(ev, ans))
        cstats = dict(cache.stats)
    llm = check_stage("m2rag_answer", f"{dataset}/{domain}/{source}/{strategy}", gen.audit, jud.audit)
    run = aggregate([StoredEvaluation(e) for e in evaluations], failed_generations=len(failures))
    for name, html in pages.items():
        write_text(out / "pages" / f"{name}.html", html)
    write_text(out / "answers.jsonl", "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers))
    write_text(out / "evaluations.jsonl", "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in evaluations))
    # the knowledge base's own scoring calls (m2rag_kb) are counted in its kb.json; carried here for the table's note
    kb_counts = Path(kb_jsonl).with_name("kb.json")
    kb_llm = json.loads(kb_counts.read_text(encoding="utf-8")) if kb_counts.is_file() else {}
    summary = {"dataset": dataset, "domain": domain, "source": source, "strategy": strategy,
               "generator": gen.backend.model_id, "judge": jud.backend.model_id, "queries": len(queries),
               "kb_llm_calls": int(kb_llm.get("llm_calls", 0)), "kb_llm_failures": int(kb_llm.get("llm_failures", 0)),
               "answers": len(answers), "generation_failures": failures, **run.to_dict(),
               "output_images": sum(len(a["output_images"]) for a in answers), "selection": selection_counts,
               "render": render_counts, "calls": {"generator": len(gen.audit), "judge": len(jud.audit),
                                                  "judge_failed_calls": jud.audit.summary()["llm_failures"]},
               **llm, "cache": cstats, "seconds": round(time.perf_counter() - t0, 1)}
    write_json(out / "summary.json", summary)
    log.info("read %s (%d queries); wrote %s: %d answers (%d generation failures), %d pages, %d output images; "
             "Overall %s; judge failures %s; %.0fs", kb_jsonl, len(queries), out, len(answers), len(failures),
             render_counts["pages"], summary["output_images"], run.percent()["overall"],
             {m: s.failures for m, s in run.metrics.items() if s.failures}, summary["seconds"])
    return summary


def report_step(config: Mapping[str, Any], summary_files: Sequence[str | Path], out_md: str | Path,
                out_csv: str | Path, out_tracking: str | Path) -> list[dict[str, Any]]:
    """The M2RAG table and its MLflow runs (a parent and one child per answer unit, with the answers,
    evaluations, summary and HTML pages as artifacts)."""
    from mmir.core.errors import ConfigError
    from mmir.tracking import log_units

    c = parse_slice(dict(config))
    m2rag = c.m2rag
    if not summary_files:
        raise ConfigError("m2rag", "no M2RAG unit: no chosen dataset has a domain with images whose run of "
                          f"m2rag.task exists for a source system (datasets {m2rag.datasets}, sources {m2rag.sources})")
    rows = collect(summary_files)
    write_table(rows, out_md, out_csv)
    params = {"m2rag": fill(m2rag), "generator": fill(c.generators[m2rag.generator]), "judge": fill(c.generators[m2rag.judge])}
    units = []
    for f in summary_files:
        s = json.loads(Path(f).read_text(encoding="utf-8"))
        d = Path(f).parent
        metrics = {f"{m}": v["value"] for m, v in s["metrics"].items()}
        metrics |= {f"{m}_n": v["n"] for m, v in s["metrics"].items()}
        metrics |= {f"{m}_failures": v["failures"] for m, v in s["metrics"].items()}
        metrics |= {"overall": s["overall"], "answers": s["answers"], "excluded": s["n_excluded"],
                    "output_images": s["output_images"], "seconds": s["seconds"]}
        units.append({"name": f"m2rag/{s['dataset']}/{s['domain']}/{s['source']}/{s['strategy']}",
                      "tags": {"rule": "m2rag_answer", "dataset": s["dataset"], "domain": s["domain"],
                               "source": s["source"], "strategy": s["strategy"], "generator": s["generator"],
                               "judge": s["judge"]},
                      "metrics": metrics,
                      "artifacts": [str(d / n) for n in ("answers.jsonl", "evaluations.jsonl", "summary.json")],
                      "artifact_dirs": {"pages": str(d / "pages")} if (d / "pages").is_dir() else {}})
    ids = log_units(dict(config), "m2rag", params, units)
    write_json(out_tracking, ids)
    log.info("read %d answer summaries; wrote %s, %s (%d rows); logged MLflow parent %s with %d children",
             len(summary_files), out_md, out_csv, len(rows), ids["parent"], len(ids["children"]))
    return rows


