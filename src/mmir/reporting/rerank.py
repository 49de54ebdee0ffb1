"""What a task table says about its reranked rows (``<system>+rr:<reranker>``): each one tested against its own first
stage (not the table's baseline), and the rows whose reranker calls failed marked with
:data:`~mmir.reporting.tables.FAILED_MARK`.

The test is the table's (:func:`mmir.evaluation.significance.table_statistics` with the first stage as the baseline: a
paired test on the per-query values, Avg. stratified by domain); its p-values are corrected over the reranked rows of
each column (``significance.family: table``: over all of them), with the table's correction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from mmir.evaluation.significance import Settings, adjust_pvalues, table_statistics
from mmir.reporting.tables import AVG, FAILED_MARK, MARK


def first_stage_tests(scores: Mapping[str, Mapping[str, Mapping[str, pd.Series]]], pairs: Mapping[str, str],
                      settings: Settings, task: str) -> dict[str, pd.DataFrame]:
    """``{dataset: rows}`` with one row per (reranked system, column): ``system, first_stage, column, n, mean, ci_low,
    ci_high, interval, first_stage_mean, diff, p, p_adj, significant`` (values as fractions, not ×100; the interval is
    the table's bootstrap interval of the reranked row).

    Args:
        scores: :func:`mmir.reporting.tables.collect_perquery` output (``{dataset: {system: {domain: Series}}}``).
        pairs: ``{reranked system: its first-stage system}`` (names as in ``scores``).
    """
    out = {}
    for ds, systems in scores.items():
        frames = []
        for rr, base in pairs.items():
            if rr not in systems or base not in systems:
                continue
            st = table_statistics({base: systems[base], rr: systems[rr]}, settings.model_copy(update={"baseline": base}))
            first = dict(zip(st.loc[st["system"] == base, "column"], st.loc[st["system"] == base, "mean"]))
            st = st[st["system"] == rr].rename(columns={"baseline": "first_stage"})
            st = st.assign(first_stage_mean=[first.get(c) for c in st["column"]])
            frames.append(st[["system", "first_stage", "column", "n", "mean", "ci_low", "ci_high", "interval", "first_stage_mean",
                              "diff", "p", "p_adj", "significant"]])
        if frames:
            t = pd.concat(frames, ignore_index=True)
            groups = [t.index] if settings.family == "table" else [g.index for _, g in t.groupby("column", sort=False)]
            for idx in groups:
                t.loc[idx, "p_adj"] = adjust_pvalues(t.loc[idx, "p"].to_numpy(dtype=float), settings.correction)
            t["significant"] = t["p_adj"].lt(settings.alpha) & t["p_adj"].notna()
            out[ds] = t
    return out


def failures(stats_files: Mapping[str, list[str | Path]]) -> dict[str, dict[str, int]]:
    """``{system: {"llm_calls", "llm_failures"}}`` summed over each reranked system's run stats files."""
    out = {}
    for system, files in stats_files.items():
        tot = {"llm_calls": 0, "llm_failures": 0}
        for f in files:
            s = json.loads(Path(f).read_text(encoding="utf-8"))
            for k in tot:
                tot[k] += int(s.get(k) or 0)
        out[system] = tot
    return out


def markdown(tests: pd.DataFrame, settings: Settings, digits: int = 1) -> list[str]:
    """The Avg. test of each reranked row against its first stage, as markdown lines."""
    avg = tests[tests["column"] == AVG]
    if avg.empty:
        return []
    corr = {"holm": "Holm", "bh": "BH", "none": "uncorrected"}[settings.correction]
    over = "all reranked rows and columns" if settings.family == "table" else "the reranked rows of each column"
    lines = [f"Reranked rows against their own first stage (Avg.; {settings.describe_test()}; p {corr} over {over}; "
             f"{MARK} where below α = {settings.alpha:g}):", "",
             f"| system | first stage | Δ Avg. | p | p ({corr}) |", "|---|---|---:|---:|---:|"]
    for r in avg.itertuples():
        diff = "–" if pd.isna(r.diff) else f"{round(r.diff * 100, digits) + 0.0:+.{digits}f}"
        p = "–" if pd.isna(r.p) else f"{r.p:.4f}"
        pa = "–" if pd.isna(r.p_adj) else f"{r.p_adj:.4f}{MARK if r.significant else ''}"
        lines.append(f"| {r.system} | {r.first_stage} | {diff} | {p} | {pa} |")
    return [*lines, ""]


def failure_note(fails: Mapping[str, Mapping[str, int]], labels: Mapping[str, str]) -> str | None:
    """The footnote of the :data:`FAILED_MARK` rows (None when no reranker call failed)."""
    bad = {s: f for s, f in fails.items() if f["llm_failures"]}
    if not bad:
        return None
    parts = [f"{labels.get(s, s)}: {f['llm_failures']} of {f['llm_calls']}" for s, f in bad.items()]
    return (f"{FAILED_MARK} = reranker calls failed or were unparseable (their candidates kept first-stage order, below "
            f"scored ones for pointwise; the window's input order for listwise): {'; '.join(parts)}. A plain rerun "
            "retries them.")


def json_cells(tests: pd.DataFrame) -> dict:
    """The tests of one dataset for ``<task>.significance.json`` (``diff`` ×100)."""
    out: dict = {}
    for r in tests.itertuples():
        out.setdefault(r.system, {"first_stage": r.first_stage, "cells": {}})["cells"][r.column] = {
            "diff": None if pd.isna(r.diff) else round(float(r.diff) * 100, 4), "p": None if pd.isna(r.p) else float(r.p),
            "p_adj": None if pd.isna(r.p_adj) else float(r.p_adj), "significant": bool(r.significant), "n": int(r.n)}
    return out


def ablation_rows(tests: pd.DataFrame, derived: Mapping[str, Mapping[str, str]], plain: Mapping[tuple[str, str], float],
                  fails: Mapping[str, Mapping[str, int]], dataset: str) -> pd.DataFrame:
    """The reranked rows of an ablation grid's CSV (×100): ``dataset, system`` (``<retriever>+rr:<reranker>``),
    ``variant`` (the first stage's captioner / reformulator / reasoning model), ``value`` (Avg.), ``plain`` and
    ``delta`` (against the retriever's plain query, as the grid's cells), ``llm_calls, llm_failures`` (the reranker's),
    ``reranked_system`` (its full name), ``first_stage, first_stage_value, rerank_diff, ci_low, ci_high, p, p_adj,
    significant``.

    Args:
        tests: :func:`first_stage_tests` of one dataset (its Avg. rows are used).
        derived: the ablation systems (:func:`mmir.workflow.units.ablation_systems`).
        plain: ``{(dataset, retriever): plain-query value ×100}`` of the grid.
    """
    rows = []
    for r in tests[tests["column"] == AVG].itertuples():
        d = derived[r.first_stage]
        value = float(r.mean) * 100
        base = plain.get((dataset, d["base"]))
        f = fails.get(r.system, {})
        rows.append({"dataset": dataset, "system": r.system.replace(r.first_stage, d["base"], 1), "variant": d["source"],
                     "reranked_system": r.system, "untrained": False,
                     "value": value, "plain": base, "delta": None if base is None else value - base,
                     "llm_calls": int(f.get("llm_calls", 0)), "llm_failures": int(f.get("llm_failures", 0)),
                     "first_stage": r.first_stage, "first_stage_value": float(r.first_stage_mean) * 100,
                     "rerank_diff": float(r.diff) * 100, "ci_low": float(r.ci_low) * 100, "ci_high": float(r.ci_high) * 100,
                     "p": float(r.p), "p_adj": float(r.p_adj), "significant": bool(r.significant)})
    return pd.DataFrame(rows)


def ablation_markdown(rows: pd.DataFrame, settings: Settings, measure: str, digits: int = 1) -> list[str]:
    """The reranked rows of one dataset of an ablation grid (:func:`ablation_rows`) as markdown lines: each row's Avg.
    with its interval, its first stage's, and the paired test against the first stage."""
    if rows.empty:
        return []
    corr = {"holm": "Holm", "bh": "BH", "none": "uncorrected"}[settings.correction]
    lines = [f"Reranked query variants: {measure} (×100, Avg.) with its {settings.confidence:.0%} interval; tested against its "
             f"own first stage ({settings.describe_test()}; p {corr} over the reranked rows; {MARK} where below "
             f"α = {settings.alpha:g}):", "",
             f"| system | query variant | {measure} [CI] | first stage | first stage {measure} | Δ | p | p ({corr}) |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for r in rows.itertuples():
        fail = (" (untrained)" if r.untrained else "") + (f" {FAILED_MARK}" if r.llm_failures else "")
        diff = "–" if pd.isna(r.rerank_diff) else f"{round(r.rerank_diff, digits) + 0.0:+.{digits}f}"
        p = "–" if pd.isna(r.p) else f"{r.p:.4f}"
        pa = "–" if pd.isna(r.p_adj) else f"{r.p_adj:.4f}{MARK if r.significant else ''}"
        lines.append(f"| {r.system}{fail} | {r.variant} | {r.value:.{digits}f} [{r.ci_low:.{digits}f}, {r.ci_high:.{digits}f}] | "
                     f"{r.first_stage} | {r.first_stage_value:.{digits}f} | {diff} | {p} | {pa} |")
    bad = rows[rows["llm_failures"] > 0]
    if len(bad):
        lines += ["", f"{FAILED_MARK} = reranker calls failed or were unparseable (their candidates kept first-stage order): "
                  + "; ".join(f"{s} ({v}): {f} of {c}" for s, v, f, c in zip(bad["system"], bad["variant"], bad["llm_failures"],
                                                                               bad["llm_calls"])) + ". A plain rerun retries them."]
    return [*lines, ""]


def append_ablation_rows(metric_files: list[str], perquery_files: list[str] | None, measure: str,
                         derived: Mapping[str, Mapping[str, str]], reranked: Mapping[str, str], significance: dict | None,
                         frame: pd.DataFrame, out_md: str | Path, out_csv: str | Path, untrained: Sequence[str] = ()) -> None:
    """Append the reranked rows of an ablation grid (:func:`ablation_rows`, with their failed-call marks from their run
    stats files) to its markdown (a section per dataset, :func:`ablation_markdown`) and CSV (``frame``: the grid's rows).

    Args:
        metric_files, perquery_files: the grid's files, parallel (the reranked systems' and their first stages' among them).
        reranked: ``{<ablation system>+rr:<reranker>: its first stage}``.
        significance: the ``significance`` config section (test, correction, interval).
        untrained: reranked systems with random weights somewhere (labelled ``(untrained)``; CSV column ``untrained``).

    Raises:
        ValueError: no per-query files.
    """
    from mmir.core import paths
    from mmir.core.io import write_text
    from mmir.reporting.tables import collect_perquery

    if perquery_files is None:
        raise ValueError("reranked ablation rows need the per-query files of the grid's metric files")
    settings = Settings.from_config(significance)
    metas = [json.loads(Path(f).read_text(encoding="utf-8")) for f in metric_files]
    keep = [i for i, m in enumerate(metas) if m["system"] in reranked or m["system"] in set(reranked.values())]
    tests = first_stage_tests(collect_perquery([metric_files[i] for i in keep], [perquery_files[i] for i in keep], measure),
                              dict(reranked), settings, "ablation")
    stats: dict[str, list[str]] = {s: [] for s in reranked}
    for m in (metas[i] for i in keep if metas[i]["system"] in reranked):
        stats[m["system"]].append(paths.RUN_STATS.format(task=m["task"], dataset=m["dataset"], system=m["system"],
                                                         domain=m["domain"]))
    fails = failures(stats)
    plain = {(d, s): v for d, s, v in zip(frame["dataset"], frame["system"], frame["plain"])}
    lines, rows = [], []
    for ds, t in tests.items():
        r = ablation_rows(t, derived, plain, fails, ds)
        r["untrained"] = r["reranked_system"].isin(list(untrained))
        rows.append(r)
        lines += [f"## {ds}: reranked query variants", "", *ablation_markdown(r, settings, measure)]
    if rows:
        md = Path(out_md)
        write_text(md, md.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n".join(lines))
        write_text(out_csv, pd.concat([frame, *rows], ignore_index=True).round(4).to_csv(index=False))
