"""Rules of ``pipeline/rules/retrieval.smk``: encode (one shard of one kind of a vector system) and retrieve (one
system over one prepared domain for one task -> TREC run; a ``kind: run`` system's external run checked and copied).
What a task reads comes from :mod:`mmir.core.tasks`."""

from __future__ import annotations

from pathlib import Path

from mmir.core import paths
from mmir.core.tasks import task as task_spec
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W, base_system, image_text_captions, prepared_dir, system_config


def store_dir(w: W, kind: str | None = None) -> str:
    return paths.VECTORS.format(dataset=w["dataset"], domain=w["domain"], system=w["system"], kind=kind or w["kind"])


#: the prepared files each encoded kind is built from
KIND_FILES = {"documents": ["corpus"], "pairs": ["corpus", "pairs", "images"], "images": ["images"],
              "queries": ["topics"], "mm_queries": ["topics_mm"], "query_texts": ["topics_mm"],
              "query_images": ["topics_mm", "query_images"], "query_stacks": ["topics_mm", "query_images"],
              "query_image_sets": ["topics_mm", "query_images"]}


def encode_inputs_for(config: dict, w: W, kind: str) -> dict[str, str]:
    """Prepared files a kind is built from, plus the image text a dense system needs for pairs, images and
    multimodal queries."""
    from mmir.retrieval.encoding import needs_image_text

    files = {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in KIND_FILES[kind]}
    if needs_image_text(U.typed(config).systems[w["system"]], kind):
        files["captions"] = image_text_captions(config, w)
    return files


def shard_ids(config: dict, w: W) -> list[str]:
    from mmir.workflow.shards import n_shards

    return [f"{s:05d}" for s in range(n_shards(config, w["dataset"], w["domain"], w["kind"]))]


def _encode(job: Job):
    from mmir.workflow import retrieval_steps

    w, p = job.wildcards, job.params
    return retrieval_steps.encode(retrieval_steps.EncodeJob(
        prepared_dir(w), w["system"], p["system"], w["kind"], int(w["shard"]), p["shards"], p["encoding"], p["cache_root"],
        store_dir(w), job.output["seal"], job.output["stats"], job.input.get("captions"), p["alt_text"]))


def _encode_inputs(config: dict, w: W) -> dict:
    return encode_inputs_for(config, w, w["kind"])


def _encode_params(config: dict, w: W) -> dict:
    from mmir.encoders.plugins import plugin_params  # numpy, the plug-in encoders: the DAG's process only
    from mmir.retrieval.encoding import needs_image_text
    from mmir.workflow.shards import n_shards

    system = config["systems"][w["system"]]
    return {"system": system, "shards": n_shards(config, w["dataset"], w["domain"], w["kind"]),
            "encoding": config["encoding"], "cache_root": config["paths"]["embedding_cache"],
            "alt_text": bool(needs_image_text(U.typed(config).systems[w["system"]], w["kind"]) and config["evaluation"]["alt_text"]),
            **plugin_params(system, f"systems.{w['system']}")}  # a plug-in's new version reruns the job


def _retrieve(job: Job):
    from mmir.workflow import retrieval_steps

    w, p, i = job.wildcards, job.params, job.input
    stores = {k[len("shards_"):]: str(Path(v[0]).parent) for k, v in i.items() if k.startswith("shards_")}
    return retrieval_steps.retrieve(retrieval_steps.RetrieveJob(
        w["task"], prepared_dir(w), w["system"], p["system"], p["evaluation"], job.output["run"], job.output["stats"], stores,
        i.get("captions"), i.get("queries"), p.get("cache_root"), i.get("external")))


def external_run_file(config: dict, w: W) -> str:
    """The run file of a ``kind: run`` system's unit (its ``path`` template filled; relative to the project directory)."""
    from mmir.retrieval.external import run_path

    return run_path(config["systems"][w["system"]]["path"], w["task"], w["dataset"], w["domain"])


def _retrieve_inputs(config: dict, w: W) -> dict:
    """Prepared files the task reads, the stores of a vector system (one encode per kind), the image text of a
    text system on a multimodal task and the query variants of an ablation system."""
    from mmir.workflow.shards import encoded_kinds

    spec = task_spec(w["task"])
    files = {n.replace(".", "_"): paths.prepared(w["dataset"], w["domain"], n) for n in spec.retrieve_files}
    kind = system_config(config, w["system"])["kind"]
    if kind == "run":  # the external run file, checked against the task's items, topics and exclusions
        return files | {"external": external_run_file(config, w)}
    if spec.multimodal and kind == "bm25":
        files["captions"] = image_text_captions(config, w)
    base = {**w, "system": base_system(config, w["system"])}
    for k in encoded_kinds(config, w["system"], w["task"]):
        files[f"shards_{k}"] = [paths.VECTOR_SHARD_STATS.format(kind=k, shard=s, **base)
                                for s in shard_ids(config, {**base, "kind": k})]
    derived = U.ablation_systems(config)
    if w["system"] in derived:
        files["queries"] = paths.QUERIES.format(dataset=w["dataset"], domain=w["domain"],
                                                variant=derived[w["system"]]["variant"])
    return files


def _retrieve_params(config: dict, w: W) -> dict:
    from mmir.encoders.plugins import plugin_params  # numpy, the plug-in encoders: the DAG's process only

    spec = task_spec(w["task"])
    system = system_config(config, w["system"])
    ev = {k: config["evaluation"][k] for k in ("protocol", "top_k")}
    if spec.qrels_official:  # the task has a label protocol
        ev["task4_protocol"] = config["evaluation"]["task4_protocol"]
    typed = U.typed(config).systems[base_system(config, w["system"])]
    kind = typed.kind
    if kind == "run":  # the file's sha256 decides a rerun, as a changed config slice does
        from mmir.retrieval.external import file_sha256

        path = external_run_file(config, w)
        return {"system": system, "evaluation": ev, "external_sha256": file_sha256(path) if Path(path).is_file() else None}
    if kind != "bm25":
        ev["chunk_size"] = config["evaluation"]["chunk_size"]
    elif spec.multimodal:
        ev["alt_text"] = config["evaluation"]["alt_text"]
    inline = w["system"] in U.ablation_systems(config) and kind == "dense"
    inline |= kind == "multivector" and typed.index == "voyager"  # the Voyager index is cached there
    return {"system": system, "evaluation": ev, "cache_root": config["paths"]["embedding_cache"] if inline else None,
            **plugin_params(system, f"systems.{base_system(config, w['system'])}")}


RULES = (
    Rule(name="encode", output={"seal": paths.VECTOR_SHARD, "stats": paths.VECTOR_SHARD_STATS}, run=_encode,
         input=_encode_inputs, params=_encode_params),
    Rule(name="retrieve", output={"run": paths.RUN, "stats": paths.RUN_STATS}, run=_retrieve, input=_retrieve_inputs,
         params=_retrieve_params),
)
