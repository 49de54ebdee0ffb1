"""The report's first section: per task table and dataset, the Avg. of every system with its interval and significance
mark (the numbers of ``<task>.significance.json``, in the order of ``<task>.csv``) and its tie-aware Avg. where that
prints differently (``Avg. tie_aware`` of the CSV), a small forest plot of that
column, wins / ties / losses against the baseline and, for a reranked system, against its first stage (queries of
every domain pooled, paired by (domain, qid)), the per-query scatters, the queries with the largest differences (linked
to their query pages) and the links to the domains' query pages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from mmir.core.tasks import TASKS, table_tasks
from mmir.reporting.forest import avg_forest_svg, forest_points, table_order
from mmir.reporting.query_pages import DomainScores, comparison
from mmir.reporting.tables import AVG, MARK

#: queries listed with the largest differences of one comparison in the summary
SUMMARY_LARGEST = 5


def _pooled(domains: Sequence[DomainScores], system: str) -> dict[tuple[str, str], float]:
    return {(d.files.domain, q): v for d in domains for q, v in d.scores.get(system, {}).items()}


def tie_aware_avgs(table_csv) -> dict[tuple[str, str], float]:
    """``{(dataset, system): tie-aware Avg. ×100}`` from a task table's CSV (``Avg. tie_aware``; none in older CSVs)."""
    import csv

    with open(table_csv, newline="", encoding="utf-8") as f:
        return {(r["dataset"], r["system"]): float(r[f"{AVG} tie_aware"]) for r in csv.DictReader(f)
                if r.get(f"{AVG} tie_aware") not in (None, "")}


def dataset_summary(task: str, dataset: str, sig: dict, order: dict, domains: Sequence[DomainScores],
                    tie_aware: dict[tuple[str, str], float] | None = None) -> dict[str, Any]:
    """The context of one (task, dataset) of the summary (see the module docstring); ``tie_aware``
    (:func:`tie_aware_avgs`) gives a row its tie-aware Avg. where that prints differently at 1 decimal."""
    from markupsafe import Markup

    points = [p for p in forest_points(sig, {dataset: order[dataset]}) if p["column"] == AVG]
    table = sig.get("datasets", {}).get(dataset, {})
    cells = table.get("cells", {})
    measure, conf = sig.get("measure", ""), sig.get("settings", {}).get("confidence", 0.95)
    labels = {p["system"]: p["label"] for p in points}
    base = next((p["system"] for p in points if p["baseline"]), domains[0].files.base if domains else None)
    first_stage = {k: v for d in domains for k, v in d.files.first_stage.items()}
    texts = {(d.files.domain, q): t for d in domains for q, t in d.texts.items()}
    href = {d.files.domain: d.href for d in domains}

    def link(key):
        return f"{href[key[0]]}#q-{quote(key[1], safe='')}"

    pooled = {p["system"]: _pooled(domains, p["system"]) for p in points} if domains else {}
    rows, comps = [], []
    for p in points:
        c = cells.get(p["label"], {}).get(AVG, {})
        aware = (tie_aware or {}).get((dataset, p["system"]))
        row = {**p, "diff": c.get("diff"), "p_adj": c.get("p_adj"), "vs_baseline": None, "vs_first": None,
               "tie_aware": aware if aware is not None and f"{aware:.1f}" != f"{p['mean']:.1f}" else None,
               "first_stage": labels.get(first_stage.get(p["system"]), first_stage.get(p["system"]))}
        if domains and p["system"] != base and pooled.get(p["system"]) and pooled.get(base):
            cmp = comparison(pooled[p["system"]], pooled[base], p["label"], labels.get(base, base), "baseline", texts, link,
                             SUMMARY_LARGEST, size=190)
            row["vs_baseline"] = cmp
            comps.append(cmp)
        fs = first_stage.get(p["system"])
        if domains and fs and pooled.get(fs) and pooled.get(p["system"]):
            cmp = comparison(pooled[p["system"]], pooled[fs], p["label"], labels.get(fs, fs), "first stage", texts, link,
                             SUMMARY_LARGEST, size=190)
            row["vs_first"] = cmp
            if fs != base:
                comps.append(cmp)
        rows.append(row)
    return {"task": task, "dataset": dataset, "anchor": f"summary-{task}-{dataset}", "measure": measure,
            "confidence": conf, "baseline": labels.get(base, base), "rows": rows, "comparisons": comps,
            "reranked": any(r["first_stage"] for r in rows),
            "forest": Markup(avg_forest_svg(points, measure, conf)), "mark": MARK,
            "domains": [{"domain": d.files.domain, "href": d.href, "queries": d.queries} for d in domains],
            "queries": sum(d.queries for d in domains)}


def summary_sections(tables: Sequence, domains: Sequence[DomainScores]) -> list[dict[str, Any]]:
    """One entry per task table (in table order) with a significance JSON and a CSV: ``{task, title, datasets:
    [dataset_summary ...]}``; ``tables``: :class:`mmir.reporting.html.ReportTable` s."""
    out = []
    for t in tables:
        if t.name not in table_tasks() or t.significance is None or t.csv is None:
            continue
        sig = json.loads(t.significance.read_text(encoding="utf-8"))
        order = table_order(t.csv)
        mine = [d for d in domains if d.files.task == t.name]
        aware = tie_aware_avgs(t.csv)
        datasets = [dataset_summary(t.name, ds, sig, order, [d for d in mine if d.files.dataset == ds], aware) for ds in order]
        out.append({"task": t.name, "title": TASKS[t.name].label, "short": TASKS[t.name].short,
                    "anchor": f"table-{t.name}", "datasets": datasets})
    return out
