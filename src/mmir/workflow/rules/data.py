"""Rules of ``pipeline/rules/data.smk``: fetch (hub datasets), prepare (normalise a domain, check its integrity),
caption (the image text of a domain's images; for an OCR captioner gathered from its ``ocr`` shards), ocr (one
shard of a domain's corpus or query images)."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.core.paths import project_path
from mmir.workflow.rules.common import Job, Rule, W, prepared_dir, without


def _fetch(job: Job):
    from mmir.workflow import steps

    return steps.fetch(job.wildcards["dataset"], job.params["dataset"], job.wildcards["domain"], job.output["marker"])


def _dataset_params(config: dict, w: W) -> dict:
    # the dataset entry without its domain list: adding or dropping a domain leaves the others done
    return {"dataset": without(config["datasets"][w["dataset"]], "domains")}


def _prepare_outputs() -> dict[str, str]:
    return {f.replace(".", "_"): f"{paths.PREPARED}/{f}" for f in paths.ALL_FILES}


def _prepare(job: Job):
    from mmir.data.domains import fetched
    from mmir.workflow import steps

    ds = job.params["dataset"]
    return steps.prepare(job.wildcards["dataset"], ds, job.wildcards["domain"], prepared_dir(job.wildcards),
                         job.input["raw"][0] if fetched(ds) else None)


def _prepare_inputs(config: dict, w: W) -> dict:
    """The fetch marker (hub sources), the domain's parquet files (local, bright), the TREC or BEIR files; nothing
    for ir_datasets (its own cache)."""
    from mmir.data.domains import fetched
    from mmir.data.parquet import domain_files

    ds = config["datasets"][w["dataset"]]
    if fetched(ds):
        return {"raw": [paths.FETCHED.format(**w)]}
    if ds["source"] == "ir_datasets":
        return {}
    root = project_path(ds["root"])
    if ds["source"] == "trec":
        return {"raw": [str(root / ds[k]) for k in ("corpus", "topics", "qrels")]}
    if ds["source"] == "beir":
        from mmir.data.beir import source_files

        return {"raw": source_files(root, ds["split"])}
    configs = ("long_documents" if ds.get("long_context") else "documents", "examples")
    files = [str(f) for c in configs for f in domain_files(root, c, w["domain"])]
    if not files:
        raise ConfigError(f"datasets.{w['dataset']}", f"no documents/examples parquet for domain {w['domain']} under {root}")
    return {"raw": files}


def _caption(job: Job):
    from mmir.workflow import steps

    p, i = job.params, job.input
    shards = (list(i["ocr_shards"]), list(i["ocr_stats"])) if "ocr_shards" in i else None
    return steps.caption(prepared_dir(job.wildcards), job.wildcards["captioner"], p["captioner"], p["cache"],
                         job.output["captions"], p["generator"], p["generation_cache"], job.output["stats"], shards)


def ocr_shard_files(config: dict, w: W, pattern: str) -> list[str]:
    """The OCR shard outputs (``pattern``: :data:`~mmir.core.paths.OCR_SHARD` or its stats) of a domain's images:
    the corpus image shards in order, then the query images."""
    from mmir.workflow.shards import OCR_KINDS, n_ocr_shards

    return [pattern.format(kind=kind, shard=f"{s:05d}", **w) for kind in OCR_KINDS
            for s in range(n_ocr_shards(config, w["dataset"], w["domain"], w["captioner"], kind))]


def _caption_inputs(config: dict, w: W) -> dict:
    if config["captioners"][w["captioner"]]["kind"] == "ocr":
        return {"ocr_shards": ocr_shard_files(config, w, paths.OCR_SHARD), "ocr_stats": ocr_shard_files(config, w, paths.OCR_SHARD_STATS)}
    return {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("images", "query_images")}


def _caption_params(config: dict, w: W) -> dict:
    cap = config["captioners"][w["captioner"]]
    vlm = cap["kind"] == "vlm"
    return {"captioner": cap, "cache": f"{config['paths']['caption_cache']}/{w['captioner']}.sqlite" if vlm else None,
            "generator": config["generators"][cap["generator"]] if vlm else None,
            "generation_cache": config["paths"]["generation_cache"] if vlm else None}


def _ocr(job: Job):
    from mmir.workflow import ocr_steps

    w, p = job.wildcards, job.params
    return ocr_steps.ocr_shard(job.input["images"], w["kind"], p["captioner"], p["cache"], int(w["shard"]), p["shards"],
                               job.threads, job.output["captions"], job.output["stats"])


def _ocr_inputs(config: dict, w: W) -> dict:
    return {"images": paths.prepared(w["dataset"], w["domain"], f"{w['kind']}.parquet")}


def _ocr_params(config: dict, w: W) -> dict:
    from mmir.workflow.shards import n_ocr_shards

    cap = config["captioners"][w["captioner"]]
    if cap["kind"] != "ocr":
        raise ConfigError(f"captioners.{w['captioner']}", f"kind {cap['kind']} has no OCR shards (kind ocr has)")
    return {"captioner": cap, "cache": f"{config['paths']['caption_cache']}/{w['captioner']}.sqlite",
            "shards": n_ocr_shards(config, w["dataset"], w["domain"], w["captioner"], w["kind"])}


RULES = (
    Rule(name="fetch", output={"marker": paths.FETCHED}, run=_fetch, params=_dataset_params),
    Rule(name="prepare", output=_prepare_outputs(), run=_prepare, input=_prepare_inputs, params=_dataset_params),
    Rule(name="caption", output={"captions": paths.CAPTIONS, "stats": paths.CAPTIONS_STATS}, run=_caption,
         input=_caption_inputs, params=_caption_params, retry_from="{stats}"),
    Rule(name="ocr", output={"captions": paths.OCR_SHARD, "stats": paths.OCR_SHARD_STATS}, run=_ocr, input=_ocr_inputs,
         params=_ocr_params),
)
