"""Expected scores (published or regression values) as data, and their check against a run (Pyserini's
reproduction matrix, "2CR", in spirit): every expected value is compared with what this run measured, within a
stated tolerance.

Files (``expected/*.yaml``, listed by the config key ``expected``)::

    defaults: {benchmark: mm-bright-paper, dataset: mm-bright, repo_id: mm-bright/MM-BRIGHT, domains: mm-bright,
               domain: Avg., measure: nDCG@10, tolerance: 1.0}
    entries:
      - {task: task1, system: bm25, value: 8.5, source: "MM-BRIGHT README leaderboard (Table 3)"}

Each entry (``defaults`` filled in first): ``benchmark`` (a label grouping entries), ``task`` (``task1``-``task4``,
``caption_ablation``, ``reformulation_ablation``, ``rag``, ``audit``), ``system``, ``dataset``, ``domain`` (a domain or
``Avg.``), ``measure``, ``value`` (the tables' scale: ×100 for retrieval measures, 0-100 judge scores),
``tolerance`` (> 0), ``source`` (table/figure of the paper or README); optional ``repo_id``, ``domains``,
``variant``, ``note``, ``sample`` (the ``datasets.<name>.sample`` the value was measured on; absent = the whole
data, so a published value is "not run" on a sampled dataset).

Matching an entry to this run (:func:`check`):

- **dataset**: a config dataset of the same name, or any config dataset whose ``repo_id`` equals the entry's
  ``repo_id`` (so a hub MM-BRIGHT dataset matches ``mm-bright`` whatever it is called).
- **system**: a run system whose ``preset`` (``src/mmir/config/presets.yaml``) is the entry's system, or, without a
  preset, whose name is. Several run systems can match one entry (one row each). Ablation systems
  (``<base>+cap:<captioner>``, ``<base>+ref:<reformulator>``) match through their base system, and ``variant``
  (the captioner or reformulator name) when the entry gives one. RAG entries name a setting: ``none``, ``oracle``,
  ``topk:<system>`` (the system matched as above) or ``best-topk`` (the best retriever setting; measure
  ``gap_to_oracle`` = its Avg. minus Oracle's). Audit entries (MM-BRIGHT §3 quality audit) name the judge model
  (``gpt-4o`` also matches a dated snapshot ``gpt-4o-YYYY-MM-DD``), a criterion as ``measure`` and ``variant: all
  queries`` (an audit capped by ``audit.max_queries`` is "not run": its mean is over a subset).
- **domains**: an ``Avg.`` entry with ``domains`` (a list, or ``mm-bright`` = the 29 hub domains) only compares
  with an Avg. over exactly those domains; otherwise the row is "not run" and says how many ran.

Status (:func:`classify`): ``OK`` when ``|observed - expected| <= tolerance``, ``OKish`` within 2 × tolerance,
``FAIL`` beyond, ``not run`` when the task, dataset, system, measure or domain set is not part of this run (the
row says which).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mmir.core.tasks import table_tasks
from mmir.data.domains import MM_BRIGHT_DOMAINS
from mmir.data.sample import Sample

AVG = "Avg."
STATUSES = ("OK", "OKish", "FAIL", "not run")
TASKS = (*table_tasks(), "caption_ablation", "reformulation_ablation", "rag", "audit")
REQUIRED = ("benchmark", "task", "system", "dataset", "domain", "measure", "value", "tolerance", "source")
OPTIONAL = ("repo_id", "domains", "variant", "note", "sample")
UNTRAINED = " (untrained)"  # the task tables' label of random-weight systems


@dataclass(frozen=True)
class Expected:
    """One expected value (see the module docstring); ``file`` and ``index`` say where it was read."""

    benchmark: str
    task: str
    system: str
    dataset: str
    domain: str
    measure: str
    value: float
    tolerance: float
    source: str
    repo_id: str | None = None
    domains: tuple[str, ...] | None = None
    variant: str | None = None
    note: str | None = None
    sample: Sample | None = None
    file: str = ""
    index: int = 0


@dataclass(frozen=True)
class Observation:
    """One number this run produced: ``task``, ``dataset``, ``system`` (run name; ablations: the base system),
    ``domain`` (or ``Avg.``), ``measure``, ``value`` (tables' scale; NaN for a cell without a number), ``domains``
    (those its Avg. is over; None when the source does not say), ``variant`` (captioner / reformulator of an ablation
    row), ``unscored`` (why a cell has no number: no scorable query)."""

    task: str
    dataset: str
    system: str
    domain: str
    measure: str
    value: float
    domains: tuple[str, ...] | None = None
    variant: str | None = None
    unscored: str | None = None


def load_expected(files: Iterable[str | Path]) -> list[Expected]:
    """Every entry of the files, in order, defaults filled in.

    Raises:
        ValueError: a file that is not a mapping with ``entries``, an entry missing a required field or with an
            unknown one, a task outside :data:`TASKS`, a non-numeric value or a tolerance <= 0; the message names
            the file and the entry's index.
    """
    out = []
    for f in files:
        doc = yaml.safe_load(Path(f).read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise ValueError(f"{f}: expected a mapping with an 'entries' list")
        defaults = doc.get("defaults") or {}
        for i, raw in enumerate(doc["entries"]):
            e = {**defaults, **(raw or {})}
            where = f"{f}: entries[{i}]"
            missing = [k for k in REQUIRED if e.get(k) is None]
            unknown = sorted(set(e) - set(REQUIRED) - set(OPTIONAL))
            if missing or unknown:
                raise ValueError(f"{where}: " + "; ".join(([f"missing {', '.join(missing)}"] if missing else [])
                                                          + ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])))
            if e["task"] not in TASKS:
                raise ValueError(f"{where}: task {e['task']!r} is not one of {', '.join(TASKS)}")
            try:
                value, tol = float(e["value"]), float(e["tolerance"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}: value and tolerance must be numbers") from exc
            if not tol > 0:
                raise ValueError(f"{where}: tolerance must be > 0, got {tol}")
            doms = e.get("domains")
            if doms == "mm-bright":
                doms = tuple(MM_BRIGHT_DOMAINS)
            elif doms is not None:
                if not isinstance(doms, list) or not all(isinstance(d, str) for d in doms):
                    raise ValueError(f"{where}: domains must be a list of names or 'mm-bright'")
                doms = tuple(doms)
            out.append(Expected(str(e["benchmark"]), e["task"], str(e["system"]), str(e["dataset"]), str(e["domain"]),
                                str(e["measure"]), value, tol, str(e["source"]), e.get("repo_id"), doms, e.get("variant"),
                                e.get("note"), _sample(e.get("sample"), where), str(f), i))
    return out


def _sample(raw, where: str) -> Sample | None:
    if raw is not None and not isinstance(raw, dict):
        raise ValueError(f"{where}: sample must be a mapping like datasets.<name>.sample, or null")
    return Sample.from_config(raw)


def freeze(observations: Iterable[Observation], samples: Mapping[str, Mapping[str, Any] | None], *, benchmark: str,
           source: str, tolerance: float) -> dict[str, Any]:
    """An expected file (``{defaults, entries}``, the format :func:`load_expected` reads) holding this run's numbers:
    one entry per observation, with its dataset's ``sample``, so a later run checks for regressions against it.

    Raises:
        ValueError: ``tolerance <= 0``.
    """
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    entries = []
    for o in observations:
        if o.unscored is not None:  # a cell without a number has nothing to freeze
            continue
        e = {"task": o.task, "dataset": o.dataset, "system": o.system, "domain": o.domain, "measure": o.measure,
             "value": round(o.value, 4)}
        if o.domain == AVG and o.domains is not None:
            e["domains"] = list(o.domains)
        if o.variant is not None:
            e["variant"] = o.variant
        if samples.get(o.dataset):
            e["sample"] = dict(samples[o.dataset])
        entries.append(e)
    return {"defaults": {"benchmark": benchmark, "tolerance": tolerance, "source": source}, "entries": entries}


# ----------------------------------------------------------------------------------------------- observations
def observations_from_task_metrics(path: str | Path) -> list[Observation]:
    """The numbers of a ``results/tables/<task>.metrics.json`` (``{measure, protocol, <task>: {dataset: {system:
    {domain: value, "Avg.": value}}}}``, ``unscored``: ``{dataset: {system: {domain: why}}}``); systems are named
    plainly (files before that: the ``(untrained)`` label is removed). A cell without a number is an observation with
    a NaN value and its reason (the Avg. of its row: "a domain has no number"), so the check says why."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    task = next((k for k in d if k in TASKS), None)
    if task is None or "measure" not in d:  # an empty family's note file
        return []
    unscored = d.get("unscored", {})
    out = []
    for ds, systems in d[task].items():
        for label, cells in systems.items():
            system = label.removesuffix(UNTRAINED)
            doms = tuple(k for k in cells if k != AVG)
            why = unscored.get(ds, {}).get(label, {})
            for dom, v in cells.items():
                reason = None if v is not None else why.get(dom) or (
                    f"a domain has no number ({', '.join(why)})" if why and dom == AVG else "no number in the table")
                out.append(Observation(task, ds, system, dom, d["measure"], float("nan") if v is None else float(v),
                                       doms if dom == AVG else (dom,), unscored=reason))
    return out


def observations_from_ablation_csv(path: str | Path, grid: str, measure: str) -> list[Observation]:
    """The Avg. of each (dataset, system, variant) of ``results/tables/<grid>_ablation.csv`` (columns ``dataset,
    system, variant, value, plain, delta``); ``domains`` unknown (the CSV does not list them)."""
    df = _read_csv(path, ("dataset", "system", "variant", "value"))
    return [Observation(f"{grid}_ablation", str(r.dataset), str(r.system), AVG, measure, float(r.value), None, str(r.variant))
            for r in df.itertuples() if pd.notna(r.value)]


def observations_from_rag_csv(path: str | Path) -> list[Observation]:
    """Per (dataset, setting): each domain's judge score, the Avg. (measure ``score``) and the gap to Oracle
    (measure ``gap_to_oracle``), from ``results/tables/rag.csv``; plus ``best-topk``: the best ``topk:`` setting's
    Avg. and gap."""
    df = _read_csv(path, ("dataset", "setting", "domain", "score", "avg", "gap_to_oracle"))
    out = []
    for (ds, setting), g in df.groupby(["dataset", "setting"], sort=False):
        doms = tuple(map(str, g["domain"]))
        out += [Observation("rag", str(ds), str(setting), str(r.domain), "score", float(r.score), (str(r.domain),))
                for r in g.itertuples() if pd.notna(r.score)]
        for m in ("avg", "gap_to_oracle"):
            v = g[m].iloc[0]
            if pd.notna(v):
                out.append(Observation("rag", str(ds), str(setting), AVG, "score" if m == "avg" else m, float(v), doms))
    for ds, g in df[df["setting"].astype(str).str.startswith("topk:")].groupby("dataset", sort=False):
        best = g.loc[g["avg"].astype(float).idxmax()] if g["avg"].notna().any() else None
        if best is not None:
            doms = tuple(map(str, g[g["setting"] == best["setting"]]["domain"]))
            out.append(Observation("rag", str(ds), "best-topk", AVG, "score", float(best["avg"]), doms, str(best["setting"])))
            if pd.notna(best["gap_to_oracle"]):
                out.append(Observation("rag", str(ds), "best-topk", AVG, "gap_to_oracle", float(best["gap_to_oracle"]), doms,
                                       str(best["setting"])))
    return out


def observations_from_audit_csv(path: str | Path) -> list[Observation]:
    """Per (dataset, judge, criterion): each domain's mean rating and the pooled mean as ``Avg.`` (measure = the
    criterion's name, e.g. ``Readability``; system = the judge model; variant = ``all queries`` or ``first N queries
    per domain``), from ``results/tables/audit.csv``."""
    df = _read_csv(path, ("dataset", "domain", "judge", "variant", "measure", "mean"))
    out = []
    for (ds, judge), g in df.groupby(["dataset", "judge"], sort=False):
        doms = tuple(str(d) for d in dict.fromkeys(g["domain"]) if d != "All")
        for r in g.itertuples():
            if pd.notna(r.mean):
                dom = AVG if r.domain == "All" else str(r.domain)
                out.append(Observation("audit", str(ds), str(judge), dom, str(r.measure), float(r.mean),
                                       doms if dom == AVG else (dom,), str(r.variant)))
    return out


def _read_csv(path: str | Path, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=list(columns))
    if not set(columns) <= set(df.columns):  # an empty family's note file
        return pd.DataFrame(columns=list(columns))
    return df


# ---------------------------------------------------------------------------------------------------- checking
def classify(diff: float, tolerance: float) -> str:
    """``OK`` (|diff| <= tolerance), ``OKish`` (<= 2 × tolerance) or ``FAIL``."""
    a = abs(diff)
    return "OK" if a <= tolerance + 1e-9 else ("OKish" if a <= 2 * tolerance + 1e-9 else "FAIL")


def _system_matches(entry_system: str, run_system: str, presets: Mapping[str, str | None]) -> bool:
    preset = presets.get(run_system)
    return preset == entry_system if preset else run_system == entry_system


CHECK_COLUMNS = ["benchmark", "task", "dataset", "system", "run_dataset", "run_system", "domain", "measure", "expected",
                 "observed", "diff", "tolerance", "status", "note", "source", "file"]


def check(expected: Iterable[Expected], observations: Iterable[Observation], presets: Mapping[str, str | None],
          datasets: Mapping[str, str | None], tasks_run: Iterable[str],
          samples: Mapping[str, Mapping[str, Any] | None] | None = None) -> pd.DataFrame:
    """Compare every expected value with this run.

    Args:
        expected: from :func:`load_expected`.
        observations: this run's numbers (the ``observations_from_*`` readers).
        presets: ``{run system: its preset name or None}`` (the config's systems).
        datasets: ``{run dataset: its repo_id or None}`` (the config's datasets).
        tasks_run: the tasks / tables this run produced (``task1``, ..., ``caption_ablation``, ``rag``).
        samples: ``{run dataset: its sample config or None}``; an entry only matches a dataset sampled the same way.

    Returns:
        One row per (entry, matching run system and dataset), or one ``not run`` row for an entry without a match;
        columns :data:`CHECK_COLUMNS` (``diff`` = observed - expected; ``note`` says why a row is not run, or what
        matched).
    """
    obs = list(observations)
    tasks_run = set(tasks_run)
    rows = []
    for e in expected:
        base = {"benchmark": e.benchmark, "task": e.task, "dataset": e.dataset, "system": e.system, "domain": e.domain,
                "measure": e.measure, "expected": e.value, "tolerance": e.tolerance, "source": e.source, "file": e.file,
                "run_dataset": "", "run_system": "", "observed": None, "diff": None}

        def not_run(why: str, base: dict = base) -> None:
            rows.append(base | {"status": "not run", "note": why})

        if e.task not in tasks_run:
            not_run(f"{e.task} not run")
            continue
        run_ds = [d for d, repo in datasets.items() if d == e.dataset or (e.repo_id and repo == e.repo_id)]
        if not run_ds:
            not_run(f"dataset {e.dataset} not in this run")
            continue
        same = [d for d in run_ds if Sample.from_config((samples or {}).get(d)) == e.sample]
        if not same:
            ran = Sample.from_config((samples or {}).get(run_ds[0]))
            not_run(f"{run_ds[0]} ran as a {ran.describe()}" if ran else f"{run_ds[0]} ran in full; this value is for a "
                    f"{e.sample.describe()}")
            continue
        run_ds = same
        if e.task == "rag":
            cands = [o for o in obs if o.task == "rag" and o.dataset in run_ds and _rag_matches(e.system, o.system, presets)]
        elif e.task == "audit":
            audited = [o for o in obs if o.task == "audit" and o.dataset in run_ds]
            judged = [o for o in audited if _judge_matches(e.system, o.system)]
            cands = [o for o in judged if e.variant is None or o.variant == e.variant]
            if not cands:
                not_run(f"judge {', '.join(sorted({o.system for o in audited}))} is not {e.system}" if not judged else
                        f"the audit rated the {judged[0].variant}; the expected value is for {e.variant}")
                continue
        else:
            cands = [o for o in obs if o.task == e.task and o.dataset in run_ds and _system_matches(e.system, o.system, presets)
                     and (e.variant is None or o.variant == e.variant)]
        if not cands:
            not_run(f"system {e.system} not in this run" + (f" (variant {e.variant})" if e.variant else ""))
            continue
        cands_m = [o for o in cands if o.measure == e.measure]
        if not cands_m:
            not_run(f"{e.measure} not measured (this run: {', '.join(sorted({o.measure for o in cands}))})")
            continue
        cands_d = [o for o in cands_m if o.domain == e.domain]
        if not cands_d:
            not_run(f"domain {e.domain} not in this run")
            continue
        for o in cands_d:
            row = base | {"run_dataset": o.dataset, "run_system": o.system + (f" [{o.variant}]" if o.variant else "")}
            if o.unscored is not None:
                rows.append(row | {"status": "not run", "note": f"no number: {o.unscored}"})
                continue
            if e.domain == AVG and e.domains is not None and o.domains is not None and set(o.domains) != set(e.domains):
                inter = len(set(o.domains) & set(e.domains))
                rows.append(row | {"status": "not run", "observed": o.value,
                                   "note": f"Avg. over {len(o.domains)} domain{'s' if len(o.domains) != 1 else ''} "
                                           f"({inter} of the expected {len(e.domains)})"})
                continue
            diff = o.value - e.value
            note = e.note or ""
            if e.domain == AVG and e.domains is not None and o.domains is None:
                note = "; ".join(x for x in (note, "domain coverage not checked") if x)
            rows.append(row | {"observed": o.value, "diff": diff, "status": classify(diff, e.tolerance), "note": note})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def _rag_matches(entry_setting: str, run_setting: str, presets: Mapping[str, str | None]) -> bool:
    if entry_setting.startswith("topk:") and run_setting.startswith("topk:"):
        return _system_matches(entry_setting[5:], run_setting[5:], presets)
    return entry_setting == run_setting


def _judge_matches(entry_model: str, run_model: str) -> bool:
    """The run's judge model is the entry's, or a dated snapshot of it (``gpt-4o-2024-08-06`` for ``gpt-4o``)."""
    return run_model == entry_model or re.fullmatch(re.escape(entry_model) + r"-\d{4}-\d{2}-\d{2}", run_model) is not None


def summary(frame: pd.DataFrame) -> dict[str, int]:
    """Rows per status, every status present (0 when none)."""
    counts = frame["status"].value_counts().to_dict() if len(frame) else {}
    return {s: int(counts.get(s, 0)) for s in STATUSES}
