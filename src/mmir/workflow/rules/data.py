"""Rules of ``workflow/rules/data.smk``: fetch (hub datasets), prepare (normalise a domain, check its integrity),
caption (the image text of a domain's images)."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.core.paths import resolve_path
from mmir.workflow.rules.common import Job, Rule, W, prepared_dir, without


def _fetch(job: Job):
    from mmir.workflow import steps

    return steps.fetch(job.wildcards["dataset"], job.params["dataset"], job.wildcards["domain"], job.output["marker"])


def _dataset_params(config: dict, w: W) -> dict:
    # the dataset entry without its domain list: adding or dropping a domain leaves the others done
    return {"dataset": without(config["datasets"][w["dataset"]], "domains")}


def _prepare_outputs() -> dict[str, str]:
    from mmir.data.prepare import ALL_FILES

    return {f.replace(".", "_"): f"{paths.PREPARED}/{f}" for f in ALL_FILES}


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
    root = resolve_path(ds["root"])
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

    p = job.params
    return steps.caption(prepared_dir(job.wildcards), job.wildcards["captioner"], p["captioner"], p["cache"],
                         job.output["captions"], p["generator"], p["generation_cache"], job.output["stats"])


def _caption_inputs(config: dict, w: W) -> dict:
    return {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("images", "query_images")}


def _caption_params(config: dict, w: W) -> dict:
    cap = config["captioners"][w["captioner"]]
    vlm = cap["kind"] == "vlm"
    return {"captioner": cap, "cache": f"{config['paths']['caption_cache']}/{w['captioner']}.sqlite",
            "generator": config["generators"][cap["generator"]] if vlm else None,
            "generation_cache": config["paths"]["generation_cache"] if vlm else None}


RULES = (
    Rule(name="fetch", output={"marker": paths.FETCHED}, run=_fetch, params=_dataset_params),
    Rule(name="prepare", output=_prepare_outputs(), run=_prepare, input=_prepare_inputs, params=_dataset_params),
    Rule(name="caption", output={"captions": paths.CAPTIONS, "stats": paths.CAPTIONS_STATS}, run=_caption,
         input=_caption_inputs, params=_caption_params, retry_from="{stats}"),
)
