"""Paper-style tables: rows are systems, columns domains plus Avg. (macro mean over domains).

Values are the measure × 100 (the papers' convention), best per column in bold in markdown. One table per
dataset, since averaging domains of different datasets means nothing. Given the per-query values, every cell also
gets its confidence interval and a test against the baseline system (:mod:`mmir.evaluation.significance`): a
marker (:data:`MARK`) where the corrected p-value is below alpha, a footnote saying how, an interval table in the
markdown, and the numbers in the CSV and ``<task>.significance.json``. Ties and cells without a number:
:mod:`mmir.reporting.cells`. The CSV and the metrics JSON name systems plainly (``system``), their row labels
(untrained, approximate, failed LLM calls) in a ``label`` column; the markdown shows the label beside the name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mmir.core.io import write_json, write_text
from mmir.core.tasks import TASKS
from mmir.evaluation.significance import EXACT_MAX_DIFFS, Settings, family_size, finite_or_none, read_perquery, table_statistics
from mmir.reporting import cells as C

AVG = "Avg."
#: Marks a table cell or row whose unit had failed LLM calls (no reply, or a reply the parser rejected); every
#: table that carries it explains it in a footnote with the counts.
FAILED_MARK = "‡"
MARK = "†"  # significantly different from the baseline (corrected p < alpha)
#: the note under a task table with rows searched through an approximate index (rows marked ``(approximate)``)
APPROXIMATE_NOTE = ("Rows marked (approximate) searched an approximate index (FAISS hnsw/ivf, or Voyager candidates re-scored "
                    "by exact MaxSim): an item the index missed is never ranked; the run stats name the index.")


COLUMNS = ["dataset", "domain", "system", "measure", "value", "queries", "run_order", "tie_aware", "tied_items", "tie_depth",
           "tie_order", "unscored"]


def collect(metric_files: list[str | Path]) -> pd.DataFrame:
    """Long frame :data:`COLUMNS` from score_run JSON files: ``value`` NaN where no query was scorable (``unscored``
    says why); ``run_order``, ``tie_aware`` (the means under both tie orders), ``tied_items`` and ``tie_depth``
    (:func:`mmir.evaluation.scoring.tie_summary`) NaN in files written before they existed."""
    rows = []
    for f in metric_files:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        orders, ties = d.get("tie_orders", {}), d.get("ties", {})
        for m, v in d["measures"].items():
            t = ties.get(m, {})
            rows.append({"dataset": d["dataset"], "domain": d["domain"], "system": d["system"], "measure": m, "value": v,
                         "queries": d["queries"], "run_order": orders.get("run", {}).get(m),
                         "tie_aware": orders.get("expected", {}).get(m), "tied_items": t.get("tied_items"),
                         "tie_depth": t.get("depth"), "tie_order": d.get("tie_order", "run"), "unscored": d.get("unscored", "")})
    long = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("value", "run_order", "tie_aware", "tied_items", "tie_depth"):
        long[c] = pd.to_numeric(long[c]).astype(float)
    return long


def wide(long: pd.DataFrame, measure: str, dataset: str) -> pd.DataFrame:
    """Systems × domains (+ Avg.) of one dataset for one measure, values × 100, systems in input order (the workflow
    gives the metric files in table order: :func:`mmir.workflow.units.task_units`)."""
    sub = long[(long["dataset"] == dataset) & (long["measure"] == measure)]
    domains = list(dict.fromkeys(sub["domain"]))
    systems = list(dict.fromkeys(sub["system"]))
    t = sub.pivot(index="system", columns="domain", values="value").reindex(index=systems, columns=domains) * 100
    t[AVG] = t[domains].mean(axis=1, skipna=False)  # macro average; NaN when a domain is missing
    return t


def collect_perquery(metric_files: list[str | Path], perquery_files: list[str | Path],
                     measure: str) -> dict[str, dict[str, dict[str, pd.Series]]]:
    """``{dataset: {system: {domain: per-query values}}}`` of one measure, in file order; ``perquery_files[i]`` is
    the per-query file of ``metric_files[i]`` (whose JSON names its dataset, domain and system).

    Raises:
        ValueError: the two lists differ in length, or as :func:`mmir.evaluation.significance.read_perquery`.
    """
    if len(metric_files) != len(perquery_files):
        raise ValueError(f"{len(metric_files)} metric files but {len(perquery_files)} per-query files")
    out: dict[str, dict[str, dict[str, pd.Series]]] = {}
    for mf, pf in zip(metric_files, perquery_files):
        d = json.loads(Path(mf).read_text(encoding="utf-8"))
        out.setdefault(d["dataset"], {}).setdefault(d["system"], {})[d["domain"]] = read_perquery(pf, measure)
    return out


def task_statistics(metric_files: list[str | Path], perquery_files: list[str | Path], measure: str, settings: Settings,
                    task: str, baselines: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """:func:`mmir.evaluation.significance.table_statistics` of each dataset's table, tested against
    ``baselines[dataset]`` where given (the workflow's choice, :func:`mmir.workflow.units.table_baselines`), else
    ``settings.baseline``."""
    return {ds: table_statistics(scores, settings.model_copy(update={"baseline": (baselines or {}).get(ds, settings.baseline)}))
            for ds, scores in collect_perquery(metric_files, perquery_files, measure).items()}


def _md_table(t: pd.DataFrame, digits: int, marks: set[tuple[str, str]] = frozenset(), extras: C.CellExtras | None = None) -> str:
    best = {c: t[c].max() for c in t.columns}
    head = "| system | " + " | ".join(t.columns) + " |"
    sep = "|---|" + "---:|" * len(t.columns)
    body = []
    for sysname, row in t.iterrows():
        cells = []
        for c in t.columns:
            v = row[c]
            s = "–" if pd.isna(v) else f"{v:.{digits}f}"
            s = f"**{s}**" if not pd.isna(v) and v == best[c] else s
            cells.append(s + (MARK if (sysname, c) in marks else "") + C.alternate_text(extras, sysname, c, v, digits))
        body.append(f"| {sysname} | " + " | ".join(cells) + " |")
    return "\n".join([head, sep, *body])


def _fmt_p(p: float) -> str:
    return "–" if pd.isna(p) else (f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}")


def _md_significance(t: pd.DataFrame, st: pd.DataFrame, settings: Settings, digits: int) -> list[str]:
    """The interval table and the Avg. tests of one dataset's table."""
    cell = st.set_index(["system", "column"])
    lines = ["| system | " + " | ".join(t.columns) + " |", "|---|" + "---:|" * len(t.columns)]
    for sysname in t.index:
        cells = []
        for c in t.columns:
            lo, hi = (cell.at[(sysname, c), k] * 100 if (sysname, c) in cell.index else float("nan") for k in ("ci_low", "ci_high"))
            cells.append("–" if pd.isna(lo) else f"[{lo:.{digits}f}, {hi:.{digits}f}]")
        lines.append(f"| {sysname} | " + " | ".join(cells) + " |")
    base = st["baseline"].iloc[0]
    conf = f"{settings.confidence:.0%}"
    out = [f"{conf} confidence intervals ({'percentile' if settings.interval == 'percentile' else 'BCa'} bootstrap over "
           f"queries, {settings.resamples} resamples, seed {settings.seed}; Avg.: queries resampled within each domain, "
           "domain means averaged):", "", *lines, ""]
    avg = st[(st["column"] == AVG) & st["p"].notna()]
    if len(avg):
        corr = {"holm": "Holm", "bh": "BH", "none": "uncorrected"}[settings.correction]
        out += [f"Tests against {base} (Avg.):", "", f"| system | Δ Avg. | p | p ({corr}) |", "|---|---:|---:|---:|"]
        out += [f"| {r.system} | {round(r.diff * 100, digits) + 0.0:+.{digits}f} | {_fmt_p(r.p)} | "
                f"{_fmt_p(r.p_adj)}{MARK if r.significant else ''} |"
                for r in avg.itertuples()]
        out.append("")
    return out


def significance_note(settings: Settings, baseline: str, family: int, measure: str, judged: bool = False) -> str:
    """The footnote of the markers: test, correction, alpha, resamples, seed."""
    unit = "per-answer scores (mean of valid judgings)" if judged else f"per-query {measure}"
    plural = "comparison" if family == 1 else "comparisons"
    fam = (f"over the {family} {plural} with the baseline in each column" if settings.family == "column"
           else f"over all {family} {plural} with the baseline in the table")
    stratum = ("signs flipped within each domain" if settings.test == "permutation" else "differences resampled within each domain")
    return (f"{MARK} = differs from the baseline **{baseline}** at α = {settings.alpha:g}: {settings.describe_test()} on "
            f"the {unit}, p-values {settings.describe_correction()} {fam}; {settings.resamples} resamples with seed {settings.seed}, "
            f"drawn from the data (the same data, the same draws); the sign-flip test counts all 2^N sign patterns "
            f"when N <= {EXACT_MAX_DIFFS} queries differ. Avg.: {stratum}, then the domain means averaged (stratified).")


@dataclass(frozen=True)
class TableFiles:
    """Where :func:`write_task_table` writes: ``md`` and ``csv`` always, ``metrics`` and ``significance`` when given."""

    md: str | Path
    csv: str | Path
    metrics: str | Path | None = None
    significance: str | Path | None = None


@dataclass(frozen=True)
class TableStatistics:
    """The significance input of a task table: ``stats`` = ``{dataset: table_statistics frame}`` (systems named as in
    the long frame), their ``settings`` (None = the defaults) and ``labels`` = ``{system: row label}``."""

    stats: dict[str, pd.DataFrame] | None = None
    settings: Settings | None = None
    labels: dict[str, str] | None = None


def row_labels(untrained: Sequence[str] = (), approximate: Sequence[str] = (), failed: Sequence[str] = ()) -> dict[str, str]:
    """``{system: row label}`` of the systems whose table row is labelled: ``<name> (untrained)`` (random weights),
    ``(approximate)`` (an approximate index), then :data:`FAILED_MARK` (failed LLM calls)."""
    return {s: s + " (untrained)" * (s in untrained) + " (approximate)" * (s in approximate) + f" {FAILED_MARK}" * (s in failed)
            for s in {*untrained, *approximate, *failed}}


def label_tags(system: str, label: str) -> str:
    """The CSV ``label`` of a row: the words of its label beside the plain name (``untrained``, ``approximate``,
    ``llm failures``), ``; ``-separated; ``""`` for an unlabelled row."""
    rest = label[len(system):] if label.startswith(system) else ""
    words = [w.strip("() ") for w in rest.replace(FAILED_MARK, "").split(")") if w.strip("() ")]
    return "; ".join([*words, *(["llm failures"] if FAILED_MARK in rest else [])])


def protocol_name(task: str, protocol: str, task4_protocol: str = "paper") -> str:
    """``<protocol>`` plus ``, task4 labels: <task4_protocol>`` for a task with a label protocol (Task 4)."""
    spec = TASKS.get(task)
    return protocol + (f", task4 labels: {task4_protocol}" if spec is not None and spec.qrels_official else "")


def protocol_caption(task: str, protocol: str, task4_protocol: str = "paper") -> str:
    """``Protocol: **<name>** (what each ranking loses)`` from the task's :meth:`~mmir.core.tasks.TaskSpec.exclusion_note`."""
    spec = TASKS.get(task)
    note = f" ({spec.exclusion_note(protocol, task4_protocol)})" if spec is not None else ""
    return f"Protocol: **{protocol_name(task, protocol, task4_protocol)}**{note}."


def write_task_table(long: pd.DataFrame, task: str, measure: str, protocol: str, files: TableFiles, digits: int = 1,
                     notes: list[str] = (), statistics: TableStatistics = TableStatistics(), task4_protocol: str = "paper") -> None:
    """Write ``files.md`` (a section per dataset), ``files.csv`` (dataset, system, label, domains..., Avg.) and, when
    given, ``files.metrics`` = ``{dataset: {system: {domain: value, "Avg.": value}}}`` for ``dvc metrics`` (plain
    system names; ``unscored``: ``{dataset: {system: {domain: why}}}`` of the cells without a number).

    ``protocol`` (``evaluation.protocol``) and ``task4_protocol`` name the protocol in the caption, with what the
    task's rankings lose under it (:func:`protocol_caption`). Each cell shows the other tie order's value where it
    prints differently, each dataset its tied items (:mod:`mmir.reporting.cells`); CSV columns ``<col> run_order``,
    ``<col> tie_aware``, ``<col> tied_items``.

    ``statistics.stats`` with its ``settings`` adds the markers, the interval table and the Avg. tests to the markdown,
    ``baseline`` and per column ``<col> ci_low``, ``<col> ci_high``, ``<col> p``, ``<col> p_adj``, ``<col> significant``
    to the CSV (×100 like the values), and ``files.significance`` gets the same numbers, the settings and the seed, as
    JSON (cells keyed by the row label; ``statistics.labels`` for the systems whose label differs).
    """
    stats, labels = statistics.stats, statistics.labels
    out_md, out_csv, out_metrics, out_significance = files.md, files.csv, files.metrics, files.significance
    settings = statistics.settings or Settings()
    datasets = list(dict.fromkeys(long["dataset"]))
    title = TASKS[task].label if task in TASKS else task
    unlabel = {v: k for k, v in (labels or {}).items()}
    parts = [f"# {title} — {measure} (×100)", "", protocol_caption(task, protocol, task4_protocol), *notes,
             *(["Rows marked (untrained) use randomly initialised weights: they exercise the pipeline, not the model."]
               if long["system"].str.contains("(untrained)", regex=False).any() else []),
             "Avg. = mean over the dataset's domains. Best per column in bold.", ""]
    csv_frames, metrics, sig, unscored = [], {}, {}, {}
    for ds in datasets:
        t = wide(long, measure, ds)
        nq = long[(long["dataset"] == ds) & (long["measure"] == measure)].groupby("domain")["queries"].first()
        st = None if stats is None else stats.get(ds)
        marks = set() if st is None else {(r.system, r.column) for r in st.itertuples() if r.significant}
        extras = C.cell_extras(long, measure, ds, list(t.index), [c for c in t.columns if c != AVG])
        parts += [f"## {ds}", "", _md_table(t, digits, marks, extras), ""]
        for (s_, d_), why in extras.unscored.items():
            unscored.setdefault(ds, {}).setdefault(unlabel.get(s_, s_), {})[d_] = why
        if st is not None and len(st):
            parts += [significance_note(settings, st["baseline"].iloc[0], family_size(st, settings), measure), ""]
        parts += [*C.unscored_note(extras), *C.md_ties(extras, t, digits)]  # footnotes of the table, then its ties
        if st is not None and len(st):
            parts += _md_significance(t, st, settings, digits)
        parts += ["Queries per domain: " + ", ".join(f"{d} {int(n)}" for d, n in nq.items()), ""]
        c = t.round(4).reset_index()
        c.insert(0, "dataset", ds)
        c.insert(2, "label", [label_tags(unlabel.get(s_, s_), s_) for s_ in c["system"]])
        c["system"] = [unlabel.get(s_, s_) for s_ in c["system"]]
        if st is not None and len(st):
            c.insert(3, "baseline", unlabel.get(st["baseline"].iloc[0], st["baseline"].iloc[0]))
            cell = st.set_index(["system", "column"])
            for col in t.columns:
                for k in ("ci_low", "ci_high", "p", "p_adj", "significant"):
                    vals = [cell.at[(s_, col), k] if (s_, col) in cell.index else None for s_ in t.index]
                    c[f"{col} {k}"] = [round(v * 100, 4) if k.startswith("ci") and v is not None and pd.notna(v) else v
                                       for v in vals]
            sig[ds] = {"baseline": st["baseline"].iloc[0], "family_size": family_size(st, settings),
                       "cells": {s_: {r.column: _cell_json(r) for r in g.itertuples()} for s_, g in st.groupby("system", sort=False)}}
        for name, vals in C.csv_columns(extras, list(t.index)).items():
            c[name] = vals
        csv_frames.append(c)
        metrics[ds] = {unlabel.get(s, s): {k: (None if pd.isna(v) else round(float(v), 4)) for k, v in row.items()}
                       for s, row in t.iterrows()}
    write_text(out_md, "\n".join(parts))
    csv = pd.concat(csv_frames, ignore_index=True) if csv_frames else pd.DataFrame(columns=["dataset", "system", "label", AVG])
    value_cols = [c for c in csv.columns if c not in ("dataset", "system", "label", "baseline", AVG) and " " not in c]
    stat_cols = [c for c in csv.columns if " " in c and c.rsplit(" ", 1)[1] in ("ci_low", "ci_high", "p", "p_adj", "significant")]
    tie_cols = [c for c in csv.columns if " " in c and c.rsplit(" ", 1)[1] in C.CSV_SUFFIXES]
    lead = ["dataset", "system", "label", *(["baseline"] if "baseline" in csv.columns else [])]
    csv = csv[lead + value_cols + [AVG] + stat_cols + tie_cols]  # domains of every dataset, Avg., the statistics, the ties
    write_text(out_csv, csv.to_csv(index=False))
    if out_metrics is not None:
        write_json(out_metrics, {"measure": measure, "protocol": protocol_name(task, protocol, task4_protocol), task: metrics,
                                 **({"unscored": unscored} if unscored else {})})
    if out_significance is not None:
        write_json(out_significance, {"task": task, "measure": measure, "scale": 100, "settings": settings.as_dict(),
                                      "labels": dict(labels or {}), "datasets": sig})


def write_no_unit_table(task: str, measure: str, protocol: str, files: TableFiles, why: str,
                        task4_protocol: str = "paper") -> None:
    """The files of a task table with no unit (no metric file): the markdown says ``No table: <why>.``, the CSV has
    its header only, ``files.metrics`` and ``files.significance`` hold no dataset and ``note``: why (the forest plot
    shows it)."""
    title = TASKS[task].label if task in TASKS else task
    write_text(files.md, "\n".join([f"# {title} — {measure} (×100)", "", f"No table: {why}.", ""]))
    write_text(files.csv, "dataset,system,label," + AVG + "\n")
    if files.metrics is not None:
        write_json(files.metrics, {"measure": measure, "protocol": protocol_name(task, protocol, task4_protocol), task: {},
                                   "note": why})
    if files.significance is not None:
        write_json(files.significance, {"task": task, "measure": measure, "scale": 100, "labels": {}, "datasets": {},
                                        "note": why})


def _cell_json(r) -> dict:
    """One cell of ``<task>.significance.json``: mean and interval ×100, the test against the baseline."""
    x100 = {k: (None if finite_or_none(getattr(r, k)) is None else round(float(getattr(r, k)) * 100, 4))
            for k in ("mean", "ci_low", "ci_high", "diff")}
    return {**x100, "n": int(r.n), "interval": r.interval, "p": finite_or_none(r.p), "p_adj": finite_or_none(r.p_adj),
            "significant": bool(r.significant), "test_resamples": int(r.test_resamples), "exact": bool(r.exact)}


def add_caption(md_path: str | Path, lines: Sequence[str]) -> None:
    """Put ``lines`` (e.g. the run's sample) under the first heading of a markdown table file, rewritten
    atomically; nothing to do without lines."""
    if not lines:
        return
    path = Path(md_path)
    text = path.read_text(encoding="utf-8").split("\n")
    at = next((i + 1 for i, line in enumerate(text) if line.startswith("#")), 0)
    write_text(path, "\n".join([*text[:at], "", *(f"*{line}*" for line in lines), *text[at:]]))
