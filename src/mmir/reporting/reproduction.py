"""The reproduction table (``results/tables/reproduction.{md,csv}``): each expected value (published or regression,
``expected/*.yaml``) next to what this run measured, with its status (:mod:`mmir.evaluation.expected`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mmir.core.io import write_text
from mmir.evaluation.expected import CHECK_COLUMNS, STATUSES, summary


def _num(v, digits: int = 2) -> str:
    return "–" if v is None or pd.isna(v) else f"{float(v):.{digits}f}"


def write_reproduction(frame: pd.DataFrame, files: list[str], out_md: str | Path, out_csv: str | Path) -> dict[str, int]:
    """Markdown (a section per benchmark: the checked rows, then the rows not run with their reason) and the CSV
    (every row, columns :data:`mmir.evaluation.expected.CHECK_COLUMNS`). Returns the counts per status.

    The status is plain text, no glyph that needs an emoji font; the HTML page marks it with a coloured dot in CSS
    (:data:`mmir.reporting.html.STATUS_CLASSES`)."""
    counts = summary(frame)
    parts = ["# Reproduction check: expected scores vs this run", "",
             "Each expected value (published or regression, from " + ", ".join(f"`{f}`" for f in files) + ") next to this "
             "run's value. Status: **OK** |observed − expected| ≤ tolerance, **OKish** ≤ 2 × tolerance, **FAIL** beyond, "
             "**not run** when the task, dataset, system, measure or domain set was not part of this run. An entry "
             "matches a run system by its `preset` (or its name when it has none), a dataset by name or `repo_id`.", "",
             "Totals: " + " · ".join(f"{s} {counts[s]}" for s in STATUSES), ""]
    for bench, g in frame.groupby("benchmark", sort=False):
        ran, skipped = g[g["status"] != "not run"], g[g["status"] == "not run"]
        parts += [f"## {bench}", "", " · ".join(f"{s} {n}" for s, n in summary(g).items()), ""]
        if len(ran):
            parts += ["| task | system | run system | dataset | domain | measure | expected | observed | Δ | tolerance | status | source |",
                      "|---|---|---|---|---|---|---:|---:|---:|---:|---|---|"]
            for r in ran.itertuples():
                src = r.source + (f" ({r.note})" if r.note else "")
                parts.append(f"| {r.task} | {r.system} | {r.run_system} | {r.run_dataset} | {r.domain} | {r.measure} | "
                             f"{_num(r.expected)} | {_num(r.observed)} | {_num(r.diff, 2) if r.diff is None else f'{r.diff:+.2f}'} | "
                             f"{_num(r.tolerance)} | {r.status} | {src} |")
            parts.append("")
        if len(skipped):
            parts += [f"Not run ({len(skipped)}):", "", "| task | system | domain | measure | expected | why | source |",
                      "|---|---|---|---|---:|---|---|"]
            parts += [f"| {r.task} | {r.system} | {r.domain} | {r.measure} | {_num(r.expected)} | {r.note} | {r.source} |"
                      for r in skipped.itertuples()]
            parts.append("")
    if frame.empty:
        parts += ["No expected values were given (config key `expected`).", ""]
    write_text(out_md, "\n".join(parts))
    write_text(out_csv, frame.reindex(columns=CHECK_COLUMNS).to_csv(index=False))
    return counts
