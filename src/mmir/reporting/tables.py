"""Paper-style tables: rows are systems, columns domains plus Avg. (macro mean over domains).

Values are the measure × 100 (the papers' convention), best per column in bold in markdown. One table per
dataset, since averaging domains of different datasets means nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mmir.core.io import write_json, write_text

AVG = "Avg."
#: Marks a table cell or row whose unit had failed LLM calls (no reply, or a reply the parser rejected); every
#: table that carries it explains it in a footnote with the counts.
FAILED_MARK = "†"
TITLES = {
    "task1": "Task 1: text query → documents",
    "task2": "Task 2: text + image query → documents",
    "task3": "Task 3: text + image query → images",
    "task4": "Task 4: text + image query → (document, image) pairs",
}


def collect(metric_files: list[str | Path]) -> pd.DataFrame:
    """Long frame ``dataset, domain, system, measure, value, queries`` from score_run JSON files."""
    rows = []
    for f in metric_files:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        for m, v in d["measures"].items():
            rows.append({"dataset": d["dataset"], "domain": d["domain"], "system": d["system"],
                         "measure": m, "value": v, "queries": d["queries"]})
    return pd.DataFrame(rows, columns=["dataset", "domain", "system", "measure", "value", "queries"])


def wide(long: pd.DataFrame, measure: str, dataset: str) -> pd.DataFrame:
    """Systems × domains (+ Avg.) of one dataset for one measure, values × 100, systems in input order."""
    sub = long[(long["dataset"] == dataset) & (long["measure"] == measure)]
    domains = list(dict.fromkeys(sub["domain"]))
    systems = list(dict.fromkeys(sub["system"]))
    t = sub.pivot(index="system", columns="domain", values="value").reindex(index=systems, columns=domains) * 100
    t[AVG] = t[domains].mean(axis=1, skipna=False)  # macro average; NaN when a domain is missing
    return t


def _md_table(t: pd.DataFrame, digits: int) -> str:
    best = {c: t[c].max() for c in t.columns}
    head = "| system | " + " | ".join(t.columns) + " |"
    sep = "|---|" + "---:|" * len(t.columns)
    body = []
    for sysname, row in t.iterrows():
        cells = []
        for c in t.columns:
            v = row[c]
            s = "–" if pd.isna(v) else f"{v:.{digits}f}"
            cells.append(f"**{s}**" if not pd.isna(v) and v == best[c] else s)
        body.append(f"| {sysname} | " + " | ".join(cells) + " |")
    return "\n".join([head, sep, *body])


def write_task_table(long: pd.DataFrame, task: str, measure: str, protocol: str, out_md: str | Path,
                     out_csv: str | Path, out_metrics: str | Path | None = None, digits: int = 1,
                     notes: list[str] = ()) -> None:
    """Write ``out_md`` (a section per dataset), ``out_csv`` (dataset, system, domains..., Avg.) and, when
    given, ``out_metrics`` = ``{dataset: {system: {domain: value, "Avg.": value}}}`` for ``dvc metrics``."""
    datasets = list(dict.fromkeys(long["dataset"]))
    title = TITLES.get(task, task)
    parts = [f"# {title} — {measure} (×100)", "",
             f"Protocol: **{protocol}** "
             + ("(each query's negative_ids removed from its ranking, as the MM-BRIGHT code does)." if protocol.startswith("official")
                else "(negative_ids kept: hard negatives compete)."),
             *notes,
             *(["Rows marked (untrained) use randomly initialised weights: they exercise the pipeline, not the model."]
               if long["system"].str.endswith("(untrained)").any() else []),
             "Avg. = mean over the dataset's domains. Best per column in bold.", ""]
    csv_frames, metrics = [], {}
    for ds in datasets:
        t = wide(long, measure, ds)
        nq = long[(long["dataset"] == ds) & (long["measure"] == measure)].groupby("domain")["queries"].first()
        parts += [f"## {ds}", "", _md_table(t, digits), "",
                  "Queries per domain: " + ", ".join(f"{d} {int(n)}" for d, n in nq.items()), ""]
        c = t.round(4).reset_index()
        c.insert(0, "dataset", ds)
        csv_frames.append(c)
        metrics[ds] = {s: {k: (None if pd.isna(v) else round(float(v), 4)) for k, v in row.items()} for s, row in t.iterrows()}
    write_text(out_md, "\n".join(parts))
    csv = pd.concat(csv_frames, ignore_index=True) if csv_frames else pd.DataFrame(columns=["dataset", "system", AVG])
    csv = csv[[c for c in csv.columns if c != AVG] + [AVG]]  # domains of every dataset, then Avg.
    write_text(out_csv, csv.to_csv(index=False))
    if out_metrics is not None:
        write_json(out_metrics, {"measure": measure, "protocol": protocol, task: metrics})
