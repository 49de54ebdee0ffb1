"""Rules of ``pipeline/rules/rerank.smk``: rerank (the top ``depth`` of one first-stage run of one task and domain
reordered by a reranker -> the TREC run of ``<system>+rr:<reranker>``, scored and tabulated like any system)."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.tasks import task as task_spec
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W, image_text_captions, prepared_dir

LLM_KINDS = ("llm-pointwise", "llm-listwise", "vlm")


def _rerank(job: Job):
    from mmir.workflow import rerank_steps

    w, p, i, o = job.wildcards, job.params, job.input, job.output
    return rerank_steps.rerank(rerank_steps.RerankJob(
        w["task"], prepared_dir(w), w["system"], p["reranker_name"], p["reranker"], p["depth"], i["first_stage"], o["run"],
        o["stats"], o["calls"], p.get("generator"), p.get("generation_cache"), i.get("captions"), p.get("alt_text", False),
        i.get("queries"), p.get("top_k")))


def _rerank_inputs(config: dict, w: W) -> dict:
    """The first-stage run, the prepared files the task's candidates and queries come from, the image text of a task
    with images (text rerankers read images as text), and for an ablation first stage (``bm25+cap:ocr``) its query
    variants: the reranker sees the query text the first stage searched with."""
    r = U.rerank_systems(config)[w["system"]]
    spec = task_spec(w["task"])
    reranker = config["rerankers"][r["reranker"]]
    files = {"first_stage": paths.RUN.format(task=w["task"], dataset=w["dataset"], system=r["base"], domain=w["domain"])}
    names = [*(["corpus.parquet"] if spec.ranks != "images" else []), spec.queries,
             *(["images.parquet"] if spec.ranks != "documents" else []), *(["pairs.parquet"] if spec.ranks == "pairs" else []),
             *(["query_images.parquet"] if reranker["kind"] == "vlm" and spec.multimodal else [])]
    files |= {n.replace(".", "_"): paths.prepared(w["dataset"], w["domain"], n) for n in names}
    if spec.multimodal:
        files["captions"] = image_text_captions(config, w)
    derived = U.ablation_systems(config)
    if r["base"] in derived:
        files["queries"] = paths.QUERIES.format(dataset=w["dataset"], domain=w["domain"], variant=derived[r["base"]]["variant"])
    return files


def _rerank_params(config: dict, w: W) -> dict:
    """The reranker's entry, the depth and, for an LLM reranker, its generator and the generation cache; for a plug-in,
    its identity (a new version reruns the job)."""
    from mmir.encoders.plugins import plugin_params  # numpy, the plug-in encoders: the DAG's process only

    r = U.rerank_systems(config)[w["system"]]
    reranker = config["rerankers"][r["reranker"]]
    out = {"reranker_name": r["reranker"], "reranker": reranker, "depth": r["depth"], "top_k": config["evaluation"]["top_k"],
           **plugin_params(reranker, f"rerankers.{r['reranker']}")}  # a plug-in's new version reruns the job
    if reranker["kind"] in LLM_KINDS:
        out |= {"generator": config["generators"][reranker["generator"]],
                "generation_cache": config["paths"]["generation_cache"]}
    if task_spec(w["task"]).multimodal:
        out["alt_text"] = config["evaluation"]["alt_text"]
    return out


RULES = (
    Rule(name="rerank", output={"run": paths.RUN, "stats": paths.RUN_STATS, "calls": paths.RERANK_CALLS}, run=_rerank,
         input=_rerank_inputs, params=_rerank_params, retry_from="{stats}"),
)
