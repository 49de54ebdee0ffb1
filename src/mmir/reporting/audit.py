"""The quality-audit table (MM-BRIGHT §3, Appendix F): per dataset a row per domain and the pooled ``All`` row, a column
per criterion (mean rating with its interval), the rated / failed / rejected counts, and the paper's dataset
averages (GPT-4o, 29 domains) as a reference row."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from mmir.benchmarks.mmbright.audit import ALL, CRITERIA, PAPER_AVERAGES
from mmir.core.io import write_text

#: Columns of ``results/tables/audit.csv`` (one row per dataset, domain and criterion).
CSV_COLUMNS = ["dataset", "domain", "judge", "variant", "criterion", "measure", "n", "mean", "sd", "ci_low", "ci_high",
               "queries", "failed", "rejected"]


def _cell(mean: float, lo: float, hi: float) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    return f"{mean:.2f}" + ("" if lo is None or math.isnan(lo) else f" [{lo:.2f}, {hi:.2f}]")


def write_audit(summary: pd.DataFrame, notes: Sequence[str], out_md: str | Path, out_csv: str | Path) -> None:
    """Markdown (a section per dataset) and CSV (:data:`CSV_COLUMNS`; ``measure`` is the criterion's display name)
    of :func:`mmir.benchmarks.mmbright.audit.aggregate`'s frame with its ``judge`` and ``variant`` columns."""
    names = list(CRITERIA.values())
    parts = ["# Quality audit: queries and their positive documents rated 1–5 by an LLM judge (MM-BRIGHT §3)", "",
             *(x for n in notes for x in (n, "")),
             ]
    for ds, g in summary.groupby("dataset", sort=False):
        parts += [f"## {ds}", "", "| domain | n | failed | rejected | " + " | ".join(names) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(names)]
        for dom, d in g.groupby("domain", sort=False):
            by = {r.criterion: r for r in d.itertuples()}
            first = d.iloc[0]
            label = f"**{ALL}**" if dom == ALL else dom
            parts.append(f"| {label} | {int(d['n'].max())} | {int(first['failed'])} | {int(first['rejected'])} | "
                         + " | ".join(_cell(by[c].mean, by[c].ci_low, by[c].ci_high) for c in CRITERIA) + " |")
        parts.append("| MM-BRIGHT paper (GPT-4o, 29 domains, all queries) | | | | "
                     + " | ".join(f"{PAPER_AVERAGES[c]:.2f}" for c in CRITERIA) + " |")
        parts.append("")
    if summary.empty:
        parts += ["No domain was audited.", ""]
    write_text(out_md, "\n".join(parts))
    csv = summary.assign(measure=summary["criterion"].map(CRITERIA))
    write_text(out_csv, csv.reindex(columns=CSV_COLUMNS).to_csv(index=False))
