"""What every rule module shares (``pipeline/rules/common.smk``): :class:`Rule` and :class:`Job`, the retry token of
LLM stages, resources, and the path and config helpers several stage families use."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.workflow import units as U

W = Mapping[str, str]  # wildcards of one job


@dataclass(frozen=True)
class Job:
    """One job: its rule, wildcards, inputs and outputs (paths), the config slice it reads and the CPU threads it
    may use (Snakemake's ``threads`` of the job; ``mmir run``: the rule's ``resources``)."""

    rule: str
    wildcards: dict[str, str]
    input: dict[str, Any]
    output: dict[str, str]
    params: dict[str, Any]
    threads: int = 1


def no_inputs(config: dict, w: W) -> dict[str, Any]:
    return {}


def no_params(config: dict, w: W) -> dict[str, Any]:
    return {}


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
    run: Callable[[Job], Any]
    input: Callable[[dict, W], dict[str, Any]] = no_inputs
    params: Callable[[dict, W], dict[str, Any]] = no_params
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
    try:
        failures = int(json.loads(Path(summary).read_text(encoding="utf-8")).get("llm_failures") or 0)
    except (OSError, ValueError, AttributeError):
        return "ok"  # not written yet, or unreadable: the job runs anyway
    return f"failed:{failures}" if failures else "ok"


# ---------------------------------------------------------------------------------------------- shared bits
def prepared_dir(w: W) -> str:
    return paths.PREPARED.format(dataset=w["dataset"], domain=w["domain"])


def base_system(config: dict, system: str) -> str:
    """The system an ablation system (``bm25+cap:ocr``) or a reranked system (``bm25+rr:minilm-ce``) derives from; any
    other system itself."""
    reranked = U.rerank_systems(config)
    if system in reranked:
        return base_system(config, reranked[system]["base"])
    derived = U.ablation_systems(config)
    return derived[system]["base"] if system in derived else system


def system_config(config: dict, system: str) -> dict:
    """The retriever config of a system; an ablation system (``bm25+cap:ocr``) uses its base system's."""
    return config["systems"][base_system(config, system)]


def untrained(config: dict, system: str) -> bool:
    """Random weights somewhere in ``system``: its own (``random_init``), or a reranked system's first stage or
    reranker's."""
    reranked = U.rerank_systems(config)
    if system in reranked:
        r = reranked[system]
        return untrained(config, r["base"]) or bool(config["rerankers"][r["reranker"]].get("random_init"))
    return bool(system_config(config, system).get("random_init"))


def int8_onnx(config: dict, system: str) -> bool:
    """int8 ONNX weights somewhere in ``system`` (``quantization: int8``): its own, or a reranked system's first stage's
    or reranker's."""
    reranked = U.rerank_systems(config)
    if system in reranked:
        r = reranked[system]
        return int8_onnx(config, r["base"]) or config["rerankers"][r["reranker"]].get("quantization") == "int8"
    return system_config(config, system).get("quantization") == "int8"


def int8_notes(config: dict, units: Iterable[Mapping[str, Any]]) -> list[str]:
    """One caption line naming the systems of a table's ``units`` that run an int8 ONNX export (none without one)."""
    systems = sorted({u["system"] for u in units if int8_onnx(config, u["system"])})
    if not systems:
        return []
    return [f"{', '.join(f'`{s}`' for s in systems)}: int8 ONNX export (int8 weights run by ONNX Runtime or OpenVINO on "
            "the CPU; scores differ from the float model's by the quantisation)."]


def approximate(config: dict, system: str) -> bool:
    """An approximate search anywhere in ``system``: a FAISS index (``approximate: hnsw | ivf``) or a Voyager index
    (``index: voyager``), its own or a reranked system's first stage's."""
    typed = U.typed(config).systems[base_system(config, system)]
    return bool(getattr(typed, "approximate", None)) or getattr(typed, "index", "exact") == "voyager"


def job_resources(config: dict, rule_name: str, system: str | None = None) -> dict[str, int]:
    """``threads, mem_mb, runtime (minutes), gpu`` of a rule's jobs: ``resources.default`` < ``resources.<rule>`` <
    the system's own ``resources`` (encode and retrieve jobs)."""
    res = config["resources"]
    out = {**res["default"], **(res.get(rule_name) or {})}
    if system is not None:
        out |= system_config(config, system).get("resources") or {}
    return out


def image_text_captions(config: dict, w: W) -> str:
    """The image-text file (captioner ``evaluation.image_text``) of the job's domain."""
    return paths.CAPTIONS.format(dataset=w["dataset"], domain=w["domain"], captioner=config["evaluation"]["image_text"])


def sample_notes(config: dict, units: Iterable[Mapping[str, Any]]) -> list[str]:
    """One caption line per sampled dataset (``datasets.<name>.sample``) among the datasets of a table's ``units``,
    then the :func:`ocr_engine_notes`."""
    from mmir.data.sample import Sample

    present = {u["dataset"] for u in units}
    return [f"`{d}` {Sample.from_config(ds['sample']).describe()}." for d, ds in config["datasets"].items()
            if ds.get("sample") and d in present] + ocr_engine_notes(config)


def stage_cap_notes(config: dict, stage: str, what: str) -> list[str]:
    """One caption line when the stage takes only its first ``<stage>.max_queries`` ``what`` per domain of the
    dataset's sample (its table would otherwise seem to cover the whole sample); none when it takes all."""
    n = (config.get(stage) or {}).get("max_queries")
    return [f"`{stage}` uses the first {n} {what} per domain of that sample (`{stage}.max_queries`)."] if n else []


def ocr_engine_notes(config: dict) -> list[str]:
    """One line per OCR captioner that reads with another engine than the default RapidOCR (its text differs, so
    every table that may show it says so); none for the default, so its tables stay as they were."""
    return [f"OCR captioner `{name}` reads images with Tesseract (lang {c['lang']}), not RapidOCR: its image text differs."
            for name, c in config["captioners"].items() if c["kind"] == "ocr" and c["engine"] == "tesseract"]


#: how a table names each image mode of a multimodal system's queries
IMAGE_MODE_LABELS = {"first": "first (the first image, MM-BRIGHT section 4.1)", "stack": "stack (the images stacked into one)",
                     "mean": "mean (the mean of the images' vectors)", "none": "none (text only)"}


def image_mode_notes(config: dict, units: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line naming the query image mode of every multimodal system among a table's ``units`` (none without one); a
    reranked or ablation system (``clip+rr:qwen``) has its first stage's mode."""
    systems = sorted({u["system"] for u in units if system_config(config, u["system"]).get("kind") == "mm"})
    if not systems:
        return []
    parts = []
    for s in systems:
        system = system_config(config, s)
        label = IMAGE_MODE_LABELS.get(system["image_mode"]) or (f"all (every image, at most {system['max_query_images']}, "
                                                                "in order, in one input)")
        parts.append(f"`{s}` {label}")
    return ["Query images per multimodal row: " + "; ".join(parts) + "."]


def captioned(run: Callable[[Job], Any]) -> Callable[[Job], Any]:
    """A report step whose markdown table then gets the job's ``samples`` lines under its title."""

    def step(job: Job):
        from mmir.reporting.tables import add_caption

        out = run(job)
        add_caption(job.output["md"], job.params.get("samples", []))
        return out

    return step


def without(d: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def tracking_output(name: str) -> str:
    """The MLflow record of a report-like rule (``results/tracking/<name>.json``)."""
    return paths.TRACKING.replace("{task}", name)


def tracked_slice(config: dict, task_units: list[dict]) -> dict[str, Any]:
    """What MLflow logging reads: the config of the units' systems, datasets and generators, measures, evaluation,
    mlflow."""
    derived = U.ablation_systems(config)
    systems = {u["system"] for u in task_units}
    base = {base_system(config, s) for s in systems}
    out = {"datasets": {d: config["datasets"][d] for d in sorted({u["dataset"] for u in task_units})},
           "systems": {s: config["systems"][s] for s in sorted(base)},
           "measures": config["measures"], "evaluation": config["evaluation"], "mlflow": config["mlflow"]}
    reranked = U.rerank_systems(config)
    used = sorted({reranked[s]["reranker"] for s in systems if s in reranked})
    if used:
        out["rerankers"] = {r: config["rerankers"][r] for r in used}
        gens = sorted({config["rerankers"][r]["generator"] for r in used if "generator" in config["rerankers"][r]})
        if gens:
            out["generators"] = {g: config["generators"][g] for g in gens}
    sources = [derived[s] for s in sorted(systems) if s in derived]
    if sources:
        caps = {d["source"] for d in sources if d["grid"] == "caption"}
        refs = {d["source"] for d in sources if d["grid"] == "reformulation"}
        out["captioners"] = {c: config["captioners"][c] for c in sorted(caps)}
        out["reformulators"] = {r: config["reformulators"][r] for r in sorted(refs)}
        out["generators"] = out.get("generators", {}) | {g: config["generators"][g]
                                                         for g in sorted({config["reformulators"][r]["generator"] for r in refs})}
    return out


def tracked_reranked(config: dict, task_units: list[dict]) -> dict[str, dict]:
    """The reranked systems among the units (their first stage, reranker and depth)."""
    reranked = U.rerank_systems(config)
    return {u["system"]: reranked[u["system"]] for u in task_units if u["system"] in reranked}


def tracked_derived(config: dict, task_units: list[dict]) -> dict[str, dict]:
    """The ablation systems among the units (their base system and query variant)."""
    derived = U.ablation_systems(config)
    return {u["system"]: derived[u["system"]] for u in task_units if u["system"] in derived}
