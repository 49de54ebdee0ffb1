"""The unit lists of every stage: which (dataset, domain, system, setting, ...) each rule runs on.

One module holds them all, so the Snakemake rules, the CLI and MLflow tracking enumerate the same units.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.config import parse_params
from mmir.config.models import Params, ParamsSlice, fill
from mmir.core import paths
from mmir.core.tasks import ABLATION_BASE, ABLATION_TASK
from mmir.core.tasks import task as task_spec
from mmir.data.domains import dataset_domains, has_multimodal, has_query_images


@dataclass(frozen=True)
class PreparedUnit:
    """One prepared domain a step reads: the ``dataset`` and ``domain`` it names and its folder ``path``
    (``data/prepared/<dataset>/<domain>``)."""

    dataset: str
    domain: str
    path: str | Path


_TYPED: list[tuple[dict, dict, Params]] = []  # (config, a copy of it, its Params): the last few parsed


def typed(config: dict | Params) -> Params:
    """``config`` (a validated, filled config dict: Snakemake's ``config``) as :class:`~mmir.config.models.Params`.

    The DAG asks for the units of every job, so the parse is kept per dict and redone when the dict has changed.
    """
    if isinstance(config, Params):
        return config
    for held, snapshot, params in _TYPED:
        if held is config and snapshot == config:
            return params
    params = parse_params(config)
    _TYPED.insert(0, (config, copy.deepcopy(config), params))
    del _TYPED[8:]
    return params


def mmdr_units(config: dict | Params) -> list[dict]:
    """``{dataset, domain}`` of the MMDR stage: every domain of ``mmdr.datasets`` (null = all datasets) whose
    queries can have images; none when the section is absent or ``mmdr.enabled`` is false."""
    p = typed(config)
    if not p.mmdr or not p.mmdr.enabled:
        return []
    wanted = p.mmdr.datasets or list(p.datasets)
    return [{"dataset": d, "domain": dom} for d, dom in units(p) if d in wanted and has_query_images(p.datasets[d], dom)]


M2RAG_DEVSET = ("m2rag-bench", "dev", "devset")  # (dataset, domain, source) of the dev-set knowledge bases


def m2rag_units(config: dict | Params) -> list[dict]:
    """``{dataset, domain, source, strategy}`` of the M2RAG stage: each multimodal domain of the chosen
    datasets whose ``task`` run exists for the source system, times the strategies; plus the dev set when
    ``m2rag.devset`` is set (see :data:`M2RAG_DEVSET`); none when the section is absent or ``m2rag.enabled`` is false."""
    p = typed(config)
    m = p.m2rag
    if not m or not m.enabled:
        return []
    wanted = m.datasets or list(p.datasets)
    kbs = []
    for d, dom in units(p):
        if d not in wanted or not has_multimodal(p.datasets[d], dom):
            continue
        for s in m.sources:
            if any(u["domain"] == dom and u["system"] == s for u in task_units(p, m.task) if u["dataset"] == d):
                kbs.append((d, dom, s))
    if m.devset:
        kbs.append(M2RAG_DEVSET)
    return [{"dataset": d, "domain": dom, "source": s, "strategy": st} for d, dom, s in kbs for st in m.strategies]


def rag_units(config: dict | Params) -> list[dict]:
    """``{dataset, domain, setting, slug}`` of the RAG stage (slug = setting with ':' as '-', for paths)."""
    p = typed(config)
    if not p.rag:
        return []
    wanted = p.rag.datasets or list(p.datasets)
    return [{"dataset": d, "domain": dom, "setting": s, "slug": s.replace(":", "-")}
            for d, dom in units(p) if d in wanted for s in p.rag.settings]


def ablation_systems(config: dict | Params) -> dict[str, dict]:
    """Derived Task 1 systems of the ablation grids: ``{"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr",
    "grid": "caption", "source": "ocr"}, "bm25+ref:qwen": {..., "variant": "ref-qwen", ...}}``."""
    out = {}
    ab = typed(config).ablations
    for s in ab.caption.systems:
        for c in ab.caption.captioners:
            out[f"{s}+cap:{c}"] = {"base": s, "variant": f"cap-{c}", "grid": "caption", "source": c}
    for s in ab.reformulation.systems:
        for r in ab.reformulation.reformulators:
            out[f"{s}+ref:{r}"] = {"base": s, "variant": f"ref-{r}", "grid": "reformulation", "source": r}
    for s in ab.reasoning.systems:
        for v in ab.reasoning.variants:
            out[f"{s}+reason:{v}"] = {"base": s, "variant": f"reason-{v}", "grid": "reasoning", "source": v}
    return out


def audit_units(config: dict | Params) -> list[dict]:
    """``{dataset, domain}`` of the quality audit (MM-BRIGHT §3): every domain of ``audit.datasets`` (null = all
    datasets); none when the section is absent or ``audit.enabled`` is false."""
    p = typed(config)
    if not p.audit or not p.audit.enabled:
        return []
    wanted = p.audit.datasets or list(p.datasets)
    return [{"dataset": d, "domain": dom} for d, dom in units(p) if d in wanted]


#: how a reranked system is named: ``<first-stage system>+rr:<reranker>``
RERANK_SEP = "+rr:"


def rerank_systems(config: dict | Params) -> dict[str, dict]:
    """The second-stage systems of ``rerank.runs``: ``{"bm25+rr:minilm-ce": {"base": "bm25", "reranker": "minilm-ce",
    "depth": 100, "tasks": None, "datasets": None}}`` (None = every task / dataset its first stage runs), in config order."""
    out = {}
    for r in typed(config).rerank.runs:
        out[f"{r.system}{RERANK_SEP}{r.reranker}"] = {"base": r.system, "reranker": r.reranker, "depth": r.depth,
                                                     "tasks": None if r.tasks is None else list(r.tasks),
                                                     "datasets": None if r.datasets is None else list(r.datasets)}
    return out


def essentiality_systems(config: dict | Params, dataset: str) -> list[str]:
    """The systems whose ``essentiality.task`` per-query scores the essentiality table breaks down on ``dataset``:
    the task's systems (``essentiality.systems``: null = all of them, else those listed), in config order."""
    p = typed(config)
    e = p.essentiality
    if not e:
        return []
    wanted = e.systems
    present = dict.fromkeys(u["system"] for u in task_units(p, e.task) if u["dataset"] == dataset)
    return [s for s in present if wanted is None or s in wanted]


def essentiality_units(config: dict | Params) -> list[dict]:
    """``{dataset, domain}`` of the essentiality stage (MM-BRIGHT §3.4): every domain of ``essentiality.datasets``
    (null = all datasets) whose queries have images and where ``essentiality.task`` runs at least one chosen system.
    None when the section is absent or its ``systems`` list is empty (the stage is off)."""
    p = typed(config)
    e = p.essentiality
    if not e or e.task not in p.tasks:
        return []
    wanted = e.datasets or list(p.datasets)
    return [{"dataset": d, "domain": dom} for d, dom in units(p)
            if d in wanted and has_query_images(p.datasets[d], dom) and has_multimodal(p.datasets[d], dom)
            and essentiality_systems(p, d)]


def essentiality_skipped(config: dict | Params) -> list[str]:
    """``"<dataset>/<domain>: why"`` for each domain of the chosen datasets that the essentiality stage leaves out."""
    p = typed(config)
    e = p.essentiality
    if not e:
        return []
    wanted = e.datasets or list(p.datasets)
    out = []
    for d, dom in units(p):
        if d not in wanted:
            continue
        ds = p.datasets[d]
        if not has_query_images(ds, dom):
            out.append(f"{d}/{dom}: its queries have no images")
        elif not has_multimodal(ds, dom):
            out.append(f"{d}/{dom}: no {e.task} data (examples_multimodal)")
        elif not essentiality_systems(p, d):
            out.append(f"{d}/{dom}: no chosen system runs {e.task}")
    return out


def units(config: dict | Params, *, scored: bool = True) -> list[tuple[str, str]]:
    """Every (dataset, domain) pair of the config, in config order; ``scored`` leaves out the domains prepare found
    no scorable query in (:func:`unscorable`): no stage plans work for them."""
    p = typed(config)
    out = [(name, dom) for name, ds in p.datasets.items() for dom in dataset_domains(name, ds)]
    if not scored:
        return out
    left_out = unscorable(p)
    return [u for u in out if u not in left_out]


#: Waits for a domain's prepare job before its prepare.json is read: Snakemake's ``checkpoints.prepare.get`` inside an
#: input function (``workflow/rules/common.smk``), so the DAG is built again once prepare has run; None elsewhere.
PREPARED_GATE: ContextVar[Callable[[str, str], object] | None] = ContextVar("PREPARED_GATE", default=None)


def unscorable(config: dict | Params) -> dict[tuple[str, str], str]:
    """``{(dataset, domain): why}`` of the domains with no scorable query: those of a dataset with
    ``integrity.no_scorable_queries: warn`` (under ``error`` prepare stops instead) whose ``prepare.json`` says
    ``scorable_queries: 0``. A domain not prepared yet counts as scorable, unless :data:`PREPARED_GATE` is set (it
    waits for prepare first)."""
    p = typed(config)
    gate = PREPARED_GATE.get()
    out = {}
    for name, ds in p.datasets.items():
        if ds.integrity.no_scorable_queries != "warn":
            continue
        for dom in dataset_domains(name, ds):
            if gate is not None:
                gate(name, dom)
            report = _prepare_report(Path(paths.prepared(name, dom, "prepare.json")))
            if report is not None and report.get("scorable_queries") == 0:
                out[(name, dom)] = report.get("scorable_reason") or "no scorable query"
    return out


def _prepare_report(path: Path) -> dict | None:
    """The prepare report at ``path`` (None when not written yet), read once per modification."""
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        return None
    if _REPORTS.get(path, (None,))[0] != stamp:
        _REPORTS[path] = (stamp, json.loads(path.read_text(encoding="utf-8")))
    return _REPORTS[path][1]


_REPORTS: dict[Path, tuple[int, dict]] = {}


#: the row order of every task table, as MM-BRIGHT's Tables 3-6: systems by kind (lexical, dense text, late interaction,
#: multimodal; a kind not listed after them), then by name; each reranked system right after its first stage
KIND_ORDER = ("bm25", "dense", "multivector", "mm")
#: the system a task table is tested against when ``significance.baseline`` is null or not one of its rows: the paper's
DEFAULT_BASELINE = "bm25"


def system_order(config: dict | Params) -> list[str]:
    """The keys of ``systems`` in table order (:data:`KIND_ORDER`, then name): never the order of the config's mapping,
    which depends on how overlays were merged."""
    p = typed(config)
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    return sorted(p.systems, key=lambda n: (rank.get(p.systems[n].kind, len(KIND_ORDER)), n))


def task_units(config: dict | Params, task: str, *, scored: bool = True) -> list[dict]:
    """``{dataset, domain, system}`` of every unit a task runs on: datasets and domains in config order, systems in
    table order (:func:`system_order`, each reranked system after its first stage, by reranker name).

    Task 1 (text only, the paper's Table 3) runs the text systems (bm25, dense) on every domain; Tasks 2–4 run
    every system on the domains with multimodal data (text systems through image text). ``scored``: as
    :func:`units`. The ablation systems are :func:`ablation_units`.
    """
    spec = task_spec(task)
    p = typed(config)
    reranked = rerank_systems(p)
    after: dict[str, list[str]] = {}  # first stage -> its reranked systems (a reranked system runs wherever its first stage does)
    for rr in sorted(reranked):
        if reranked[rr]["tasks"] is None or task in reranked[rr]["tasks"]:
            after.setdefault(reranked[rr]["base"], []).append(rr)
    out = []
    for name, dom in units(p, scored=scored):
        if spec.multimodal and not has_multimodal(p.datasets[name], dom):
            continue
        for s in system_order(p):
            sys_ = p.systems[s]
            if (spec.mm_kinds is None and sys_.kind == "mm") or (sys_.tasks is not None and task not in sys_.tasks) \
                    or (sys_.datasets is not None and name not in sys_.datasets):
                continue
            out.append({"dataset": name, "domain": dom, "system": s})
            out += [{"dataset": name, "domain": dom, "system": rr} for rr in after.get(s, [])
                    if reranked[rr]["datasets"] is None or name in reranked[rr]["datasets"]]
    return out


def table_tasks(config: dict | Params) -> list[str]:
    """The tasks of ``tasks`` that make a table: those with a unit (:func:`task_units`), a domain without a scorable
    query included (its table says so). A Task 2-4 of a config whose data has no images makes none."""
    return [t for t in typed(config).tasks if task_units(config, t, scored=False)]


def no_unit_reason(config: dict | Params, task: str) -> str | None:
    """Why ``task`` has no unit (None when it has one): no dataset with its data, no system that runs it, or no
    domain with a scorable query (:func:`unscorable`)."""
    p = typed(config)
    if task_units(p, task):
        return None
    structural = task_units(p, task, scored=False)
    if structural:
        left_out = unscorable(p)
        return "no domain has a scorable query: " + "; ".join(
            f"{d}/{dom}: {left_out[(d, dom)]}" for d, dom in dict.fromkeys((u["dataset"], u["domain"]) for u in structural))
    if task_spec(task).multimodal and not any(has_multimodal(p.datasets[d], dom) for d, dom in units(p, scored=False)):
        return (f"no dataset of this config has {task} data (queries with images: examples_multimodal, or a BEIR "
                f"corpus with images); {', '.join(p.datasets)} {'is' if len(p.datasets) == 1 else 'are'} text only")
    return f"no system of this config runs {task} (systems.<name>.tasks, .datasets, or its kind)"


def table_baselines(config: dict | Params, task: str) -> dict[str, str]:
    """``{dataset: system}``: what each dataset's table of ``task`` tests every row against. ``significance.baseline``
    where that table has the row, else :data:`DEFAULT_BASELINE` (BM25, the paper's) where it has it, else the table's
    first row (:func:`task_units` order). Depends on neither dict nor merge order; ``python -m mmir validate`` prints it."""
    configured = typed(config).significance.baseline
    rows: dict[str, list[str]] = {}
    for u in task_units(config, task):
        rows.setdefault(u["dataset"], []).append(u["system"])
    return {ds: next((b for b in (configured, DEFAULT_BASELINE) if b in names), names[0]) for ds, names in rows.items()}


def ablation_units(config: dict | Params, grid: str) -> list[dict]:
    """Units of an ablation grid, on the domains whose queries have images (reasoning: the domains of the ``bright``
    datasets): ``{task, dataset, domain, system}`` for each base system (``task1``) and each derived system
    (``ablation``: Task 1 qrels, own paths)."""
    p = typed(config)
    derived = {n: d for n, d in ablation_systems(p).items() if d["grid"] == grid}
    bases = list(dict.fromkeys(d["base"] for d in derived.values()))
    reranked = ablation_reranked(p, grid)
    out = []
    for name, dom in units(p):
        ds = p.datasets[name]
        if derived and (ds.source == "bright" if grid == "reasoning" else has_query_images(ds, dom)):
            out += [{"task": ABLATION_BASE, "dataset": name, "domain": dom, "system": s} for s in bases]
            out += [{"task": ABLATION_TASK, "dataset": name, "domain": dom, "system": s} for s in derived]
            out += [{"task": ABLATION_TASK, "dataset": name, "domain": dom, "system": s} for s, r in reranked.items()
                    if r["datasets"] is None or name in r["datasets"]]
    return out


def ablation_reranked(config: dict | Params, grid: str) -> dict[str, dict]:
    """The reranked systems of ``rerank.runs`` whose first stage is an ablation system of ``grid``
    (``{"bm25+cap:ocr+rr:ce": {"base": "bm25+cap:ocr", ...}}``, as :func:`rerank_systems`); they run on the grid's
    domains (``ablation`` task: the variant's queries, Task 1 qrels)."""
    derived = {n for n, d in ablation_systems(config).items() if d["grid"] == grid}
    return {s: r for s, r in rerank_systems(config).items() if r["base"] in derived}


def config_slice(config: Params | ParamsSlice, *, dataset: str | None = None, system: str | None = None) -> dict[str, Any]:
    """The part of the config a (dataset, system) step reads, as the filled dicts of params.yaml: the MLflow params."""
    out: dict[str, Any] = {"evaluation": fill(config.evaluation)}
    if dataset is not None:
        out["dataset"] = {"name": dataset, **fill(config.datasets[dataset])}
    if system is not None:
        out["system"] = {"name": system, **fill(config.systems[system])}
    return out
