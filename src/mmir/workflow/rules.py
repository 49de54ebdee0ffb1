"""Every rule of the workflow as data: its outputs, what it reads (inputs), the config slice it gets (params) and
the step it runs.

The Snakemake rule files (``workflow/rules/*.smk``) take ``input``, ``output`` and ``params`` from here and run
``workflow/scripts/step.py``, which calls :func:`run_job`; ``mmir run <rule> key=value ...`` builds the same
:class:`Job` from the same functions and calls the same step. Nothing about a rule is derived twice.

``params`` is exactly the config slice the step reads, so a config change reruns only the jobs whose slice
changed (Snakemake's params rerun trigger): adding a RAG setting changes no existing RAG job's params.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.core.paths import resolve_path
from mmir.data.domains import has_query_images
from mmir.workflow import units as U

log = logging.getLogger("mmir.workflow")

W = Mapping[str, str]  # wildcards of one job


@dataclass(frozen=True)
class Job:
    """One job: its rule, wildcards, inputs and outputs (paths) and the config slice it reads."""

    rule: str
    wildcards: dict[str, str]
    input: dict[str, Any]
    output: dict[str, str]
    params: dict[str, Any]


@dataclass(frozen=True)
class Rule:
    """What a rule is, apart from Snakemake's scheduling (log, benchmark, threads, resources stay in the .smk).

    Attributes:
        output: name -> path pattern with ``{wildcards}``.
        input: ``(config, wildcards) -> {name: path or [paths]}``.
        params: ``(config, wildcards) -> the config slice`` (JSON-like).
        run: the step, called with the :class:`Job`.
        directories: names in ``output`` that are directories.
        retry_from: for a stage that calls an LLM, where it writes ``llm_failures`` (a pattern over the output
            names, e.g. ``"{reports}/summary.json"``): the params then carry :func:`retry_token`.
        extra_output: ``config -> {name: path}``: outputs whose number depends on the config (the report's LaTeX
            files, one per table), added to ``output`` (no wildcards).
    """

    name: str
    output: dict[str, str]
    input: Callable[[dict, W], dict[str, Any]]
    params: Callable[[dict, W], dict[str, Any]]
    run: Callable[[Job], Any]
    directories: tuple[str, ...] = field(default=())
    retry_from: str | None = None
    extra_output: Callable[[dict], dict[str, str]] | None = None

    def output_patterns(self, config: dict) -> dict[str, str]:
        """``output`` plus the config's :attr:`extra_output` (patterns with ``{wildcards}``)."""
        return {**self.output, **(self.extra_output(config) if self.extra_output is not None else {})}

    def outputs(self, config: dict, wildcards: W) -> dict[str, str]:
        """The output paths of these wildcards (ConfigError naming a missing wildcard)."""
        try:
            return {k: p.format(**wildcards) for k, p in self.output_patterns(config).items()}
        except KeyError as e:
            raise ConfigError("<wildcards>", f"rule {self.name} needs the wildcard {e.args[0]!r}") from e

    def slice(self, config: dict, wildcards: W) -> dict[str, Any]:
        """The params of a job: the config slice, plus ``retry`` for an LLM stage (:func:`retry_token`)."""
        p = self.params(config, wildcards)
        if self.retry_from is None:
            return p
        return p | {"retry": retry_token(self.retry_from.format(**self.outputs(config, wildcards)))}

    def job(self, config: dict, wildcards: W) -> Job:
        """The job of these wildcards (outputs formatted; inputs and params from the config)."""
        w = dict(wildcards)
        return Job(self.name, w, self.input(config, w), self.outputs(config, w), self.slice(config, w))


def retry_token(summary: str | Path) -> str:
    """``"ok"``, or ``"failed:<n>"`` when the summary JSON an LLM stage wrote last time counts ``n`` failed calls.

    The token differs from the params Snakemake recorded when that summary was written, so a plain ``snakemake``
    reruns the job; the generation cache never stores a failed call as final, so the rerun repeats only the failed
    calls (the rest are cache hits). The job reruns while the count changes; a count that stays the same (a judge
    that answers the same unusable reply again) stops the reruns, so an unchanged rerun still ends with nothing to
    do; ``--forcerun <rule>`` retries again."""
    import json

    try:
        failures = int(json.loads(Path(summary).read_text(encoding="utf-8")).get("llm_failures") or 0)
    except (OSError, ValueError, AttributeError):
        return "ok"  # not written yet, or unreadable: the job runs anyway
    return f"failed:{failures}" if failures else "ok"


RULES: dict[str, Rule] = {}


def rule(name: str, output: dict[str, str], *, directories: tuple[str, ...] = (), retry_from: str | None = None):
    """Register ``fn(job)`` as the step of rule ``name``; decorate the input and params functions after it."""

    def deco(run):
        RULES[name] = Rule(name, output, _no_inputs, _no_params, run, directories, retry_from)
        return run

    return deco


def _no_inputs(config, w):
    return {}


def _no_params(config, w):
    return {}


def inputs(name: str):
    """Decorator: the input function of rule ``name``."""

    def deco(fn):
        RULES[name] = _replace(RULES[name], input=fn)
        return fn

    return deco


def params(name: str):
    """Decorator: the params (config slice) function of rule ``name``."""

    def deco(fn):
        RULES[name] = _replace(RULES[name], params=fn)
        return fn

    return deco


def extra_outputs(name: str):
    """Decorator: the config-dependent outputs of rule ``name`` (:attr:`Rule.extra_output`)."""

    def deco(fn):
        RULES[name] = _replace(RULES[name], extra_output=fn)
        return fn

    return deco


def _replace(r: Rule, **kw) -> Rule:
    import dataclasses

    return dataclasses.replace(r, **kw)


def run_job(job: Job) -> Any:
    """Run a job's step; an error is logged (with its traceback) before it propagates, so the rule log holds it."""
    try:
        return RULES[job.rule].run(job)
    except Exception:
        log.exception("rule %s failed (wildcards %s)", job.rule, job.wildcards)
        raise


# ---------------------------------------------------------------------------------------------- shared bits
def prepared_dir(w: W) -> str:
    return paths.PREPARED.format(dataset=w["dataset"], domain=w["domain"])


def system_config(config: dict, system: str) -> dict:
    """The retriever config of a system; an ablation system (``bm25+cap:ocr``) uses its base system's."""
    derived = U.ablation_systems(config)
    return config["systems"][derived[system]["base"] if system in derived else system]


def image_text_captions(config: dict, w: W) -> str:
    """The image-text file (captioner ``evaluation.image_text``) of the job's domain."""
    return paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=config["evaluation"]["image_text"])


def sample_notes(config: dict, units: Iterable[Mapping[str, Any]]) -> list[str]:
    """One caption line per sampled dataset (``datasets.<name>.sample``) among the datasets of a table's ``units``."""
    from mmir.data.sample import Sample

    present = {u["dataset"] for u in units}
    return [f"`{d}` {Sample.from_config(ds['sample']).describe()}." for d, ds in config["datasets"].items()
            if ds.get("sample") and d in present]


def _captioned(run: Callable[[Job], Any]) -> Callable[[Job], Any]:
    """A report step whose markdown table then gets the job's ``samples`` lines under its title."""

    def step(job: Job):
        from mmir.reporting.tables import add_caption

        out = run(job)
        add_caption(job.output["md"], job.params.get("samples", []))
        return out

    return step


def _without(d: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


# -------------------------------------------------------------------------------------------------- data
@rule("fetch", {"marker": paths.FETCHED})
def _fetch(job: Job):
    from mmir.workflow import steps

    return steps.fetch(job.wildcards["dataset"], job.params["dataset"], job.wildcards["domain"], job.output["marker"])


@params("fetch")
def _fetch_params(config, w):
    return {"dataset": _without(config["datasets"][w["dataset"]], "domains")}


def _prepare_outputs() -> dict[str, str]:
    from mmir.data.prepare import ALL_FILES

    return {f.replace(".", "_"): f"{paths.PREPARED}/{f}" for f in ALL_FILES}


@rule("prepare", _prepare_outputs())
def _prepare(job: Job):
    from mmir.workflow import steps

    ds = job.params["dataset"]
    return steps.prepare(job.wildcards["dataset"], ds, job.wildcards["domain"], prepared_dir(job.wildcards),
                         job.input["raw"][0] if ds["source"] == "hf" else None)


@inputs("prepare")
def _prepare_inputs(config, w):
    """The fetch marker (hf), the domain's parquet files (local), the TREC files."""
    from mmir.data.parquet import domain_files

    ds = config["datasets"][w["dataset"]]
    if ds["source"] == "hf":
        return {"raw": [paths.FETCHED.format(**w)]}
    root = resolve_path(ds["root"])
    if ds["source"] == "trec":
        return {"raw": [str(root / ds[k]) for k in ("corpus", "topics", "qrels")]}
    files = [str(f) for c in ("documents", "examples") for f in domain_files(root, c, w["domain"])]
    if not files:
        raise ConfigError(f"datasets.{w['dataset']}", f"no documents/examples parquet for domain {w['domain']} under {root}")
    return {"raw": files}


@params("prepare")
def _prepare_params(config, w):
    # the dataset entry without its domain list: adding or dropping a domain leaves the others done
    return {"dataset": _without(config["datasets"][w["dataset"]], "domains")}


@rule("caption", {"captions": paths.CAPTIONS, "stats": paths.CAPTIONS_STATS}, retry_from="{stats}")
def _caption(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.caption(prepared_dir(job.wildcards), job.wildcards["captioner"], p["captioner"], p["cache"],
                         job.output["captions"], p["generator"], p["generation_cache"], job.output["stats"])


@inputs("caption")
def _caption_inputs(config, w):
    return {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("images", "query_images")}


@params("caption")
def _caption_params(config, w):
    cap = config["captioners"][w["captioner"]]
    vlm = cap["kind"] == "vlm"
    return {"captioner": cap, "cache": f"{config['paths']['caption_cache']}/{w['captioner']}.sqlite",
            "generator": config["generators"][cap["generator"]] if vlm else None,
            "generation_cache": config["paths"]["generation_cache"] if vlm else None}


# ------------------------------------------------------------------------------------------- ablation queries
@rule("augment", {"queries": paths.QUERIES.replace("{variant}", "cap-{source}")})
def _augment(job: Job):
    from mmir.workflow import steps

    return steps.augment(job.input["topics"], job.input["captions"], job.output["queries"])


@inputs("augment")
def _augment_inputs(config, w):
    return {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
            "captions": paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=w["source"])}


@rule("reformulate", {"queries": paths.QUERIES.replace("{variant}", "ref-{source}"),
                      "stats": paths.QUERIES_STATS.replace("{variant}", "ref-{source}")}, retry_from="{stats}")
def _reformulate(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.reformulate(job.input["topics"], job.input["captions"], p["reformulator"], p["generator"],
                             p["cache"], job.output["queries"], job.output["stats"])


@inputs("reformulate")
def _reformulate_inputs(config, w):
    ref = config["reformulators"][w["source"]]
    return {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
            "captions": paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=ref["image_text"])}


@params("reformulate")
def _reformulate_params(config, w):
    ref = config["reformulators"][w["source"]]
    return {"reformulator": ref, "generator": config["generators"][ref["generator"]],
            "cache": config["paths"]["generation_cache"]}


# ---------------------------------------------------------------------------------------------- resources
def job_resources(config: dict, rule_name: str, system: str | None = None) -> dict[str, int]:
    """``threads, mem_mb, runtime (minutes), gpu`` of a rule's jobs: ``resources.default`` < ``resources.<rule>`` <
    the system's own ``resources`` (encode and retrieve jobs)."""
    res = config["resources"]
    out = {**res["default"], **(res.get(rule_name) or {})}
    if system is not None:
        out |= system_config(config, system).get("resources") or {}
    return out


# ---------------------------------------------------------------------------------------------- encoding
def store_dir(w: W, kind: str | None = None) -> str:
    return paths.VECTORS.format(dataset=w["dataset"], domain=w["domain"], system=w["system"], kind=kind or w["kind"])


def encode_inputs_for(config: dict, w: W, kind: str) -> dict[str, str]:
    """Prepared files a kind is built from, plus the image text a dense system needs for pairs, images and
    multimodal queries."""
    from mmir.retrieval.encoding import needs_image_text

    names = {"documents": ["corpus"], "pairs": ["corpus", "pairs", "images"], "images": ["images"],
             "queries": ["topics"], "mm_queries": ["topics_mm"], "query_texts": ["topics_mm"],
             "query_images": ["topics_mm", "query_images"], "query_stacks": ["topics_mm", "query_images"]}[kind]
    files = {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in names}
    if needs_image_text(config["systems"][w["system"]], kind):
        files["captions"] = image_text_captions(config, w)
    return files


@rule("encode", {"seal": paths.VECTOR_SHARD, "stats": paths.VECTOR_SHARD_STATS})
def _encode(job: Job):
    from mmir.workflow import retrieval_steps

    w, p = job.wildcards, job.params
    return retrieval_steps.encode(prepared_dir(w), w["system"], p["system"], w["kind"], int(w["shard"]), p["shards"],
                                  p["encoding"], p["cache_root"], store_dir(w), job.output["seal"], job.output["stats"],
                                  job.input.get("captions"), p["alt_text"])


@inputs("encode")
def _encode_inputs(config, w):
    return encode_inputs_for(config, w, w["kind"])


@params("encode")
def _encode_params(config, w):
    from mmir.retrieval.encoding import needs_image_text
    from mmir.workflow.shards import n_shards

    system = config["systems"][w["system"]]
    return {"system": system, "shards": n_shards(config, w["dataset"], w["domain"], w["kind"]),
            "encoding": config["encoding"], "cache_root": config["paths"]["embedding_cache"],
            "alt_text": bool(needs_image_text(system, w["kind"]) and config["evaluation"]["alt_text"])}


def shard_ids(config: dict, w: W) -> list[str]:
    from mmir.workflow.shards import n_shards

    return [f"{s:05d}" for s in range(n_shards(config, w["dataset"], w["domain"], w["kind"]))]


# ---------------------------------------------------------------------------------------------- retrieval
RETRIEVE_FILES = {
    "task1": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
    "ablation": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
    "task2": ["corpus.parquet", "topics_mm.parquet", "excluded.task2.tsv"],
    "task3": ["topics_mm.parquet", "images.parquet"],
    "task4": ["corpus.parquet", "topics_mm.parquet", "images.parquet", "pairs.parquet", "excluded.task4.tsv",
              "excluded.task4.always.tsv"],
}


def base_system(config: dict, system: str) -> str:
    derived = U.ablation_systems(config)
    return derived[system]["base"] if system in derived else system


@rule("retrieve", {"run": paths.RUN, "stats": paths.RUN_STATS})
def _retrieve(job: Job):
    from mmir.workflow import retrieval_steps

    w, p, i = job.wildcards, job.params, job.input
    stores = {k[len("shards_"):]: str(Path(v[0]).parent) for k, v in i.items() if k.startswith("shards_")}
    return retrieval_steps.retrieve(w["task"], prepared_dir(w), w["system"], p["system"], p["evaluation"],
                                    job.output["run"], job.output["stats"], stores, i.get("captions"), i.get("queries"),
                                    p["cache_root"])


@inputs("retrieve")
def _retrieve_inputs(config, w):
    """Prepared files the task reads, the stores of a vector system (one encode per kind), the image text of a
    text system on Tasks 2-4 and the query variants of an ablation system."""
    from mmir.workflow.shards import encoded_kinds

    files = {n.replace(".", "_"): paths.prepared(w["dataset"], w["domain"], n) for n in RETRIEVE_FILES[w["task"]]}
    kind = system_config(config, w["system"])["kind"]
    if w["task"] not in ("task1", U.ABLATION_TASK) and kind == "bm25":
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


@params("retrieve")
def _retrieve_params(config, w):
    system = system_config(config, w["system"])
    ev = {k: config["evaluation"][k] for k in ("protocol", "top_k")}
    if w["task"] == "task4":
        ev["task4_protocol"] = config["evaluation"]["task4_protocol"]
    if system["kind"] != "bm25":
        ev["chunk_size"] = config["evaluation"]["chunk_size"]
    elif w["task"] not in ("task1", U.ABLATION_TASK):
        ev["alt_text"] = config["evaluation"]["alt_text"]
    inline = w["system"] in U.ablation_systems(config) and system["kind"] == "dense"
    return {"system": system, "evaluation": ev, "cache_root": config["paths"]["embedding_cache"] if inline else None}


# ------------------------------------------------------------------------------------------------ scoring
def qrels_task(task: str) -> str:
    return "task1" if task == U.ABLATION_TASK else task


@rule("score", {"metrics": paths.METRICS, "perquery": paths.PERQUERY})
def _score(job: Job):
    from mmir.workflow import steps

    w = job.wildcards
    meta = {k: w[k] for k in ("task", "dataset", "domain", "system")}
    return steps.score(job.input["run"], job.input["qrels"], job.params["measures"], job.output["metrics"],
                       job.output["perquery"], meta, job.params["binary"], job.params["tie_order"])


@inputs("score")
def _score_inputs(config, w):
    from mmir.data.prepare import qrels_file

    return {"run": paths.RUN.format(**w),
            "qrels": paths.prepared(w["dataset"], w["domain"], qrels_file(qrels_task(w["task"]),
                                                                         config["evaluation"]["task4_protocol"]))}


@params("score")
def _score_params(config, w):
    # Task 4 official reads its own (binary) qrels: no label is collapsed here
    return {"measures": config["measures"], "tie_order": config["evaluation"]["tie_order"], "binary": False}


# ------------------------------------------------------------------------------------------------ reports
def task_metric_files(config: dict, task: str) -> list[str]:
    return [paths.METRICS.format(task=task, **u) for u in U.task_units(config, task)]


def protocol_label(config: dict, task: str) -> str:
    """How a task table names its protocol (Task 4 adds its label protocol)."""
    ev = config["evaluation"]
    return ev["protocol"] + (f", task4 labels: {ev['task4_protocol']}" if task == "task4" else "")


@rule("report", {"md": paths.TABLE_MD, "csv": paths.TABLE_CSV, "metrics": paths.TABLE_METRICS,
                 "significance": paths.TABLE_SIGNIFICANCE, "forest": paths.TABLE_FOREST})
def _report(job: Job):
    from mmir.reporting.forest import write_forest
    from mmir.workflow import steps

    p, o = job.params, job.output
    out = steps.report(job.wildcards["task"], list(job.input["metrics"]), p["measure"], p["protocol"], o["md"], o["csv"],
                       o["metrics"], p["untrained"], p["notes"], list(job.input["perquery"]), p["significance"],
                       o["significance"])
    write_forest(o["significance"], o["csv"], o["forest"])
    return out


@inputs("report")
def _report_inputs(config, w):
    return {"metrics": task_metric_files(config, w["task"]),
            "perquery": [paths.PERQUERY.format(task=w["task"], **u) for u in U.task_units(config, w["task"])]}


@params("report")
def _report_params(config, w):
    systems = {u["system"] for u in U.task_units(config, w["task"])}
    return {"measure": config["evaluation"]["primary_measure"], "protocol": protocol_label(config, w["task"]),
            "untrained": sorted(s for s in systems if config["systems"][s].get("random_init")),
            "notes": table_notes(config, w["task"]), "significance": config["significance"]}


@rule("reproduction", {"md": paths.REPRODUCTION_MD, "csv": paths.REPRODUCTION_CSV,
                       "tracking": paths.TRACKING.replace("{task}", "reproduction")})
def _reproduction(job: Job):
    from mmir.workflow.reproduction import reproduction_step

    i, o = job.input, job.output
    ablations = dict(zip(job.params["grids"], i["ablations"]))
    return reproduction_step(job.params, list(i["expected"]), list(i["tables"]), ablations,
                             i["rag"][0] if i["rag"] else None, o["md"], o["csv"], o["tracking"])


@inputs("reproduction")
def _reproduction_inputs(config, w):
    """The expected files, the task tables' metrics JSON, the ablation and RAG CSVs the config makes."""
    from mmir.workflow.targets import grids

    return {"expected": [paths.project_file(f) for f in config["expected"]],
            "tables": [paths.TABLE_METRICS.format(task=t) for t in config["tasks"]],
            "ablations": [paths.ABLATION_CSV.format(grid=g) for g in grids(config)],
            "rag": [paths.RAG_TABLE_CSV] if U.rag_units(config) else []}


@params("reproduction")
def _reproduction_params(config, w):
    from mmir.workflow.targets import grids

    return {"expected": list(config["expected"]), "grids": grids(config),
            "presets": {n: s.get("preset") for n, s in config["systems"].items()},
            "datasets": {n: d.get("repo_id") if d["source"] == "hf" else None for n, d in config["datasets"].items()},
            "samples": {n: d.get("sample") for n, d in config["datasets"].items()},
            "measure": config["evaluation"]["primary_measure"], "mlflow": config["mlflow"]}


@rule("report_html", {"html": paths.REPORT_HTML, "lineage": paths.REPORT_LINEAGE, "latex": paths.REPORT_LATEX,
                      "tracking": paths.TRACKING.replace("{task}", "report")})
def _report_html(job: Job):
    from mmir.workflow.report import report_step

    o = job.output
    tex = {k: v for k, v in o.items() if k.startswith("tex_")}
    return report_step(job.params, list(job.input["files"]), list(job.input["prepared"]), o["html"], o["lineage"],
                       o["latex"], tex, o["tracking"])


@extra_outputs("report_html")
def _report_html_tex(config):
    from mmir.workflow.report import tex_outputs

    return tex_outputs(config)


@inputs("report_html")
def _report_html_inputs(config, w):
    """Every table, figure and MLflow record of the families the config runs, and the prepare reports (lineage)."""
    from mmir.workflow.report import report_files
    from mmir.workflow.targets import family_targets

    return {"files": report_files(config), "prepared": family_targets(config, "prepare")}


#: The config the report reads: what the lineage names (data, models, generators, prompts of the stages) and MLflow.
REPORT_KEYS = ("datasets", "systems", "generators", "captioners", "reformulators", "ablations", "rag", "m2rag", "mmdr",
               "mlflow")


@params("report_html")
def _report_html_params(config, w):
    return {k: config.get(k) for k in REPORT_KEYS}


def table_notes(config: dict, task: str) -> list[str]:
    """What a task table says about its inputs: the image text of text systems, how ties were scored."""
    ev = config["evaluation"]
    notes = sample_notes(config, U.task_units(config, task))
    if task != "task1":
        notes.append(f"Text systems (bm25, dense) see images as their `{ev['image_text']}` image text"
                     + (" plus the dataset's alt text for corpus images." if ev["alt_text"] else
                        " only (no alt text: the hub's document_images has none)."))
    notes.append("Ties are scored in the run's own order (the order the run file lists)." if ev["tie_order"] == "run" else
                 "Ties are re-sorted by trec_eval (document id), as the released scripts.")
    return notes


def tracked_slice(config: dict, task_units: list[dict]) -> dict[str, Any]:
    """What MLflow logging reads: the config of the units' systems, datasets and generators, measures, evaluation,
    mlflow."""
    derived = U.ablation_systems(config)
    systems = {u["system"] for u in task_units}
    base = {derived[s]["base"] if s in derived else s for s in systems}
    out = {"datasets": {d: config["datasets"][d] for d in sorted({u["dataset"] for u in task_units})},
           "systems": {s: config["systems"][s] for s in sorted(base)},
           "measures": config["measures"], "evaluation": config["evaluation"], "mlflow": config["mlflow"]}
    sources = [derived[s] for s in sorted(systems) if s in derived]
    if sources:
        caps = {d["source"] for d in sources if d["grid"] == "caption"}
        refs = {d["source"] for d in sources if d["grid"] == "reformulation"}
        out["captioners"] = {c: config["captioners"][c] for c in sorted(caps)}
        out["reformulators"] = {r: config["reformulators"][r] for r in sorted(refs)}
        out["generators"] = {g: config["generators"][g] for g in sorted({config["reformulators"][r]["generator"] for r in refs})}
    return out


def tracked_derived(config: dict, task_units: list[dict]) -> dict[str, dict]:
    """The ablation systems among the units (their base system and query variant)."""
    derived = U.ablation_systems(config)
    return {u["system"]: derived[u["system"]] for u in task_units if u["system"] in derived}


@rule("track", {"tracking": paths.TRACKING})
def _track(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.track(p["config"], job.wildcards["task"], p["units"], job.output["tracking"], derived=p["derived"],
                       significance=job.input["significance"])


@inputs("track")
def _track_inputs(config, w):
    return {"metrics": task_metric_files(config, w["task"]), "table": paths.TABLE_MD.format(task=w["task"]),
            "significance": paths.TABLE_SIGNIFICANCE.format(task=w["task"])}


@params("track")
def _track_params(config, w):
    units = U.task_units(config, w["task"])
    return {"config": tracked_slice(config, units), "units": units, "derived": tracked_derived(config, units)}


@rule("ablation_report", {"md": paths.ABLATION_MD, "csv": paths.ABLATION_CSV, "plot": paths.ABLATION_PLOT,
                          "plot_data": paths.ABLATION_PLOT_DATA})
@_captioned
def _ablation_report(job: Job):
    from mmir.workflow import steps

    o = job.output
    return steps.ablation_report(job.wildcards["grid"], list(job.input["metrics"]), job.params["measure"],
                                 job.params["derived"], o["md"], o["csv"], o["plot"], o["plot_data"])


def ablation_metric_files(config: dict, grid: str) -> list[str]:
    return [paths.METRICS.format(**u) for u in U.ablation_units(config, grid)]


@inputs("ablation_report")
def _ablation_report_inputs(config, w):
    return {"metrics": ablation_metric_files(config, w["grid"])}


@params("ablation_report")
def _ablation_report_params(config, w):
    derived = {n: d for n, d in U.ablation_systems(config).items() if d["grid"] == w["grid"]}
    return {"measure": config["evaluation"]["primary_measure"], "derived": derived,
            "samples": sample_notes(config, U.ablation_units(config, w["grid"]))}


@rule("track_ablation", {"tracking": paths.TRACKING.replace("{task}", "{grid}_ablation")})
def _track_ablation(job: Job):
    from mmir.workflow import steps

    p = job.params
    return steps.track(p["config"], "task1", p["units"], job.output["tracking"], run_name=f"{job.wildcards['grid']}_ablation",
                       derived=p["derived"])


@inputs("track_ablation")
def _track_ablation_inputs(config, w):
    return {"metrics": ablation_metric_files(config, w["grid"]), "table": paths.ABLATION_MD.format(grid=w["grid"])}


@params("track_ablation")
def _track_ablation_params(config, w):
    units = U.ablation_units(config, w["grid"])
    return {"config": tracked_slice(config, units), "units": units, "derived": tracked_derived(config, units)}


# ---------------------------------------------------------------------------------------------------- RAG
def rag_unit(config: dict, w: W) -> dict:
    for u in U.rag_units(config):
        if (u["dataset"], u["domain"], u["slug"]) == (w["dataset"], w["domain"], w["slug"]):
            return u
    raise ConfigError("rag.settings", f"no RAG unit {w['dataset']}/{w['domain']}/{w['slug']}")


@rule("rag", {"answers": f"{paths.RAG}/answers.parquet", "judgments": f"{paths.RAG}/judgments.parquet",
              "summary": f"{paths.RAG}/summary.json"}, retry_from="{summary}")
def _rag(job: Job):
    from mmir.workflow import steps

    w, p = job.wildcards, job.params
    return steps.rag(w["dataset"], w["domain"], p["setting"], prepared_dir(w), p["rag"], p["generator"], p["judge"],
                     p["cache"], paths.RAG.format(**w), job.input.get("run"), job.input.get("captions"))


@inputs("rag")
def _rag_inputs(config, w):
    u = rag_unit(config, w)
    files = {"topics": paths.prepared(w["dataset"], w["domain"], "topics.parquet"),
             "qrels": paths.prepared(w["dataset"], w["domain"], "qrels.task1.txt"),
             "images": paths.prepared(w["dataset"], w["domain"], "images.parquet")}
    if u["setting"].startswith("topk:"):
        files["run"] = paths.RUN.format(task=config["rag"]["task"], dataset=w["dataset"], domain=w["domain"],
                                        system=u["setting"][5:])
    if has_query_images(config["datasets"][w["dataset"]], w["domain"]):
        files["captions"] = image_text_captions(config, w)
    return files


@params("rag")
def _rag_params(config, w):
    rag = config["rag"]
    return {"setting": rag_unit(config, w)["setting"], "rag": _without(rag, "datasets", "settings"),
            "generator": config["generators"][rag["generator"]], "judge": config["generators"][rag["judge"]],
            "cache": config["paths"]["generation_cache"]}


@rule("rag_report", {"md": paths.RAG_TABLE_MD, "csv": paths.RAG_TABLE_CSV,
                     "tracking": paths.TRACKING.replace("{task}", "rag")})
@_captioned
def _rag_report(job: Job):
    from mmir.workflow import steps

    o = job.output
    return steps.rag_report(job.params["config"], list(job.input["summaries"]), o["md"], o["csv"], o["tracking"],
                            list(job.input["judgments"]))


@inputs("rag_report")
def _rag_report_inputs(config, w):
    us = U.rag_units(config)
    return {"summaries": [f"{paths.RAG.format(**u)}/summary.json" for u in us],
            "judgments": [f"{paths.RAG.format(**u)}/judgments.parquet" for u in us]}


@params("rag_report")
def _rag_report_params(config, w):
    rag = config["rag"]
    gens = {g: config["generators"][g] for g in (rag["generator"], rag["judge"])}
    return {"config": {"rag": rag, "generators": gens, "mlflow": config["mlflow"], "significance": config["significance"]},
            "samples": sample_notes(config, U.rag_units(config))}


# -------------------------------------------------------------------------------------------------- M2RAG
M2RAG_UNIT_KEYS = ("datasets", "sources", "strategies")  # keys that choose units, read by no job
M2RAG_ANSWER_ONLY = ("generator", "answer_max_tokens", "context_tokens", "recall_threshold", "separate_encoder",
                     "separate_threshold", "released_parse")


@rule("m2rag_kb", {"kb": f"{paths.M2RAG_KB}/kb.jsonl", "counts": f"{paths.M2RAG_KB}/kb.json"}, retry_from="{counts}")
def _m2rag_kb(job: Job):
    from mmir.workflow import m2rag

    w, i, p, o = job.wildcards, job.input, job.params, job.output
    if "devset" in i:
        dev = p["m2rag"]["devset"]
        return m2rag.load_dev_set_step(i["devset"], dev["image_root"], p["m2rag"], o["kb"], o["counts"],
                                       levels=dev["levels"])
    return m2rag.build_knowledge_bases_step(w["dataset"], w["domain"], w["source"], prepared_dir(w), i["run"],
                                            p["m2rag"], p["judge"], p["cache"], o["kb"], o["counts"],
                                            i.get("captions"), i.get("anchors"))


@inputs("m2rag_kb")
def _m2rag_kb_inputs(config, w):
    from mmir.workflow.m2rag import kb_inputs

    return kb_inputs(config, w["dataset"], w["domain"], w["source"])


@params("m2rag_kb")
def _m2rag_kb_params(config, w):
    m = config["m2rag"]
    return {"m2rag": _without(m, *M2RAG_UNIT_KEYS, *M2RAG_ANSWER_ONLY), "judge": config["generators"][m["judge"]],
            "cache": config["paths"]["generation_cache"]}


@rule("m2rag_answer", {"answers": f"{paths.M2RAG}/answers.jsonl", "evaluations": f"{paths.M2RAG}/evaluations.jsonl",
                       "summary": f"{paths.M2RAG}/summary.json"}, retry_from="{summary}")
def _m2rag_answer(job: Job):
    from mmir.workflow import m2rag

    w, p = job.wildcards, job.params
    return m2rag.answer_step(w["dataset"], w["domain"], w["source"], w["strategy"], job.input["kb"], p["m2rag"],
                             p["generator"], p["judge"], p["cache"], paths.M2RAG.format(**w), job.input.get("images"),
                             p["encoder"])


@inputs("m2rag_answer")
def _m2rag_answer_inputs(config, w):
    files = {"kb": f"{paths.M2RAG_KB.format(**w)}/kb.jsonl"}
    if w["source"] != "devset":
        files["images"] = paths.prepared(w["dataset"], w["domain"], "images.parquet")
    return files


@params("m2rag_answer")
def _m2rag_answer_params(config, w):
    m = config["m2rag"]
    enc = config["systems"].get(m["separate_encoder"] or "") if w["strategy"] == "separate" else None
    keep = _without(m, *M2RAG_UNIT_KEYS, "devset")
    if w["strategy"] != "separate":
        keep = _without(keep, "separate_encoder", "separate_threshold")
    return {"m2rag": keep, "generator": config["generators"][m["generator"]], "judge": config["generators"][m["judge"]],
            "encoder": enc, "cache": config["paths"]["generation_cache"]}


@rule("m2rag_report", {"md": paths.M2RAG_TABLE_MD, "csv": paths.M2RAG_TABLE_CSV,
                       "tracking": paths.TRACKING.replace("{task}", "m2rag")})
@_captioned
def _m2rag_report(job: Job):
    from mmir.workflow import m2rag

    o = job.output
    return m2rag.report_step(job.params["config"], list(job.input["summaries"]), o["md"], o["csv"], o["tracking"])


@inputs("m2rag_report")
def _m2rag_report_inputs(config, w):
    return {"summaries": [f"{paths.M2RAG.format(**u)}/summary.json" for u in U.m2rag_units(config)]}


@params("m2rag_report")
def _m2rag_report_params(config, w):
    m = config["m2rag"]
    gens = {g: config["generators"][g] for g in (m["generator"], m["judge"])}
    return {"config": {"m2rag": m, "generators": gens, "mlflow": config["mlflow"]},
            "samples": sample_notes(config, U.m2rag_units(config))}


# --------------------------------------------------------------------------------------------------- MMDR
MMDR_WRITER_KEYS = ("task", "system", "k", "generator", "image_text", "images", "evidence_chars", "report_max_tokens",
                    "posthoc_citations", "posthoc_min_overlap", "report_temperature", "seed", "evaluator")
MMDR_JUDGE_KEYS = ("judge", "judge_max_tokens", "judge_images", "judge_image_text", "seed", "evaluator")


@rule("mmdr_tasks", {"tasks": paths.MMDR_TASKS}, directories=("tasks",))
def _mmdr_tasks(job: Job):
    from mmir.workflow import mmdr

    w = job.wildcards
    return mmdr.tasks_step(w["dataset"], w["domain"], prepared_dir(w), job.params["mmdr"], job.output["tasks"])


@inputs("mmdr_tasks")
def _mmdr_tasks_inputs(config, w):
    return {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("topics", "query_images")}


@params("mmdr_tasks")
def _mmdr_tasks_params(config, w):
    return {"mmdr": {"max_tasks": config["mmdr"]["max_tasks"]}}


def _mmdr_domain_inputs(config, w) -> dict[str, str]:
    files = {"tasks": paths.MMDR_TASKS.format(**w),
             **{n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("corpus", "images", "query_images")}}
    if has_query_images(config["datasets"][w["dataset"]], w["domain"]):
        files["captions"] = image_text_captions(config, w)
    return files


@rule("mmdr_reports", {"reports": paths.MMDR_REPORTS}, directories=("reports",), retry_from="{reports}/summary.json")
def _mmdr_reports(job: Job):
    from mmir.workflow import mmdr

    w, p = job.wildcards, job.params
    return mmdr.reports_step(w["dataset"], w["domain"], prepared_dir(w), job.input["tasks"], p["mmdr"], p["generator"],
                             p["cache"], job.output["reports"], job.input["run"], job.input.get("captions"))


@inputs("mmdr_reports")
def _mmdr_reports_inputs(config, w):
    m = config["mmdr"]
    return {**_mmdr_domain_inputs(config, w),
            "run": paths.RUN.format(task=m["task"], dataset=w["dataset"], domain=w["domain"], system=m["system"])}


@params("mmdr_reports")
def _mmdr_reports_params(config, w):
    m = config["mmdr"]
    return {"mmdr": {k: m[k] for k in MMDR_WRITER_KEYS}, "generator": config["generators"][m["generator"]],
            "cache": config["paths"]["generation_cache"]}


@rule("mmdr_score", {"run": paths.MMDR_RUN}, directories=("run",), retry_from="{run}/summary.json")
def _mmdr_score(job: Job):
    from mmir.workflow import mmdr

    w, p = job.wildcards, job.params
    return mmdr.score_step(w["dataset"], w["domain"], prepared_dir(w), job.input["tasks"], job.input["reports"],
                           p["mmdr"], p["judge"], p["cache"], job.output["run"], job.input.get("captions"))


@inputs("mmdr_score")
def _mmdr_score_inputs(config, w):
    return {**_mmdr_domain_inputs(config, w), "reports": paths.MMDR_REPORTS.format(**w)}


@params("mmdr_score")
def _mmdr_score_params(config, w):
    m = config["mmdr"]
    return {"mmdr": {k: m[k] for k in MMDR_JUDGE_KEYS}, "judge": config["generators"][m["judge"]],
            "cache": config["paths"]["generation_cache"]}


@rule("mmdr_report", {"export": paths.MMDR_EXPORT, "md": paths.MMDR_TABLE_MD, "csv": paths.MMDR_TABLE_CSV,
                      "tracking": paths.TRACKING.replace("{task}", "mmdr")}, directories=("export",))
@_captioned
def _mmdr_report(job: Job):
    from mmir.workflow import mmdr

    o = job.output
    return mmdr.report_step(job.params["config"], list(job.input["runs"]), list(job.input["reports"]), o["md"],
                            o["csv"], o["export"], o["tracking"])


@inputs("mmdr_report")
def _mmdr_report_inputs(config, w):
    us = U.mmdr_units(config)
    return {"runs": [paths.MMDR_RUN.format(**u) for u in us], "reports": [paths.MMDR_REPORTS.format(**u) for u in us]}


@params("mmdr_report")
def _mmdr_report_params(config, w):
    m = config["mmdr"]
    gens = {g: config["generators"][g] for g in (m["generator"], m["judge"])}
    return {"config": {"mmdr": m, "generators": gens, "mlflow": config["mlflow"], "significance": config["significance"]},
            "samples": sample_notes(config, U.mmdr_units(config))}


# ------------------------------------------------------------------------------------------- essentiality
#: keys of ``essentiality`` that choose units or the report's rows, read by no labelling job
ESSENTIALITY_UNIT_KEYS = ("datasets", "systems", "task")


@rule("essentiality", {"labels": paths.ESSENTIALITY_LABELS, "stats": paths.ESSENTIALITY_STATS}, retry_from="{stats}")
def _essentiality(job: Job):
    from mmir.workflow.essentiality import label_step

    w, p, i = job.wildcards, job.params, job.input
    return label_step(w["dataset"], w["domain"], prepared_dir(w), p["essentiality"], job.output["labels"],
                      job.output["stats"], captions=i.get("captions"), generator=p["generator"],
                      generation_cache=p["cache"], labels_file=i.get("labels_file"))


@inputs("essentiality")
def _essentiality_inputs(config, w):
    e = config["essentiality"]
    files = {n: paths.prepared(w["dataset"], w["domain"], f"{n}.parquet") for n in ("topics_mm", "query_images")}
    if e["labels"]:
        files["labels_file"] = str(resolve_path(e["labels"]))
    else:
        files["captions"] = image_text_captions(config, w)
    return files


@params("essentiality")
def _essentiality_params(config, w):
    e = config["essentiality"]
    if e["labels"]:  # the file route reads no model setting: changing one reruns nothing
        return {"essentiality": {"labels": e["labels"], "max_queries": e["max_queries"]}, "generator": None, "cache": None}
    keep = _without(e, *ESSENTIALITY_UNIT_KEYS, "labels", "classifier")
    return {"essentiality": {**keep, "image_text": config["evaluation"]["image_text"]},
            "generator": config["generators"][e["classifier"]], "cache": config["paths"]["generation_cache"]}


@rule("essentiality_report", {"md": paths.ESSENTIALITY_MD, "csv": paths.ESSENTIALITY_CSV, "plot": paths.ESSENTIALITY_PLOT,
                              "plot_data": paths.ESSENTIALITY_PLOT_DATA,
                              "tracking": paths.TRACKING.replace("{task}", "essentiality")})
@_captioned
def _essentiality_report(job: Job):
    from mmir.workflow.essentiality import report_step

    i, o, p = job.input, job.output, job.params
    keys = [k for u in p["config"]["units"] for k in (f"{u['dataset']}/{u['domain']}/{s}" for s in p["config"]["systems"][u["dataset"]])]
    return report_step(p["config"], list(i["labels"]), list(i["stats"]), dict(zip(keys, i["perquery"])), o["md"], o["csv"],
                       o["plot"], o["plot_data"], o["tracking"])


@inputs("essentiality_report")
def _essentiality_report_inputs(config, w):
    us, task = U.essentiality_units(config), config["essentiality"]["task"]
    return {"labels": [paths.ESSENTIALITY_LABELS.format(**u) for u in us],
            "stats": [paths.ESSENTIALITY_STATS.format(**u) for u in us],
            "perquery": [paths.PERQUERY.format(task=task, system=s, **u) for u in us
                         for s in U.essentiality_systems(config, u["dataset"])]}


@params("essentiality_report")
def _essentiality_report_params(config, w):
    e = config["essentiality"]
    us = U.essentiality_units(config)
    systems = {d: U.essentiality_systems(config, d) for d in dict.fromkeys(u["dataset"] for u in us)}
    chosen = {s for v in systems.values() for s in v}
    return {"config": {"essentiality": {**e, "image_text": config["evaluation"]["image_text"]}, "task": e["task"],
                       "generator": None if e["labels"] else config["generators"][e["classifier"]],
                       "measure": config["evaluation"]["primary_measure"], "units": us, "systems": systems,
                       "skipped": U.essentiality_skipped(config), "mlflow": config["mlflow"],
                       "untrained": sorted(s for s in chosen if config["systems"][s].get("random_init"))},
            "samples": sample_notes(config, us)}


def rule_names() -> list[str]:
    """Every rule, in definition order."""
    return list(RULES)



def run_snakemake_job(smk) -> Any:
    """The body of ``workflow/scripts/step.py``: the job of a Snakemake script call, its log set up, run.

    ``smk`` is the ``snakemake`` object Snakemake injects (``rule``, ``wildcards``, ``input``, ``output``,
    ``params.slice``, ``log``).
    """
    from mmir.core import logs

    def plain(v):
        return v if isinstance(v, str) else [str(x) for x in v]

    logs.setup(smk.log[0] if smk.log else None)
    job = Job(smk.rule, {k: str(v) for k, v in smk.wildcards.items()}, {k: plain(v) for k, v in smk.input.items()},
              {k: str(v) for k, v in smk.output.items()}, smk.params.slice)
    return run_job(job)
