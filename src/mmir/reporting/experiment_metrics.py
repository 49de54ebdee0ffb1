"""The small, git-committed summary of a task table that DVC experiments compare (``dvc exp show``, ``dvc metrics
diff``, ``dvc plots diff``; docs: Experiments).

``metrics/<task>.json``: ``{task: {dataset: {domain: {system: {<measure>: v, "ci_low": lo, "ci_high": hi}}}}}`` with
``avg`` for the table's Avg. column (a key without a dot: DVC joins nested keys with ``.``), values ×100 as in the
table (4 decimals); ``ci_low``/``ci_high`` are the cell's interval
(``significance.confidence``, :mod:`mmir.evaluation.significance`), absent when the table has no interval for it.
A cell without a number (no scorable query) holds ``null``.

``metrics/<task>_forest.csv``: the same cells as rows (``cell`` = ``dataset/domain/system``, ``dataset``, ``domain``,
``system``, ``measure``, ``value``, ``ci_low``, ``ci_high``): the forest plot's data, a DVC plot.

Both are read from ``results/tables/<task>.metrics.json`` and ``<task>.significance.json`` (:mod:`mmir.reporting.tables`).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from mmir.core.io import write_json, write_text

AVG_KEY = "avg"
FOREST_COLUMNS = ("cell", "dataset", "domain", "system", "measure", "value", "ci_low", "ci_high")


def summary(task: str, metrics_json: str | Path, significance_json: str | Path | None) -> dict:
    """``{task: {dataset: {domain: {system: {measure, ci_low, ci_high}}}}}`` (see the module docstring).

    ``metrics_json``: ``{"measure", task: {dataset: {system: {domain: value}}}}``; ``significance_json``: its
    ``datasets.<dataset>.cells.<row label>.<column>`` and ``labels`` (system -> row label); absent or without
    a dataset: values only. Raises ``KeyError`` when ``metrics_json`` holds no ``task`` section."""
    m = json.loads(Path(metrics_json).read_text(encoding="utf-8"))
    measure = m["measure"]
    sig = json.loads(Path(significance_json).read_text(encoding="utf-8")) if significance_json and Path(significance_json).is_file() else {}
    labels = sig.get("labels", {})
    out: dict = {}
    for dataset, systems in m[task].items():
        cells = sig.get("datasets", {}).get(dataset, {}).get("cells", {})
        for system, row in systems.items():
            by_col = cells.get(labels.get(system, system), {})
            for column, value in row.items():
                cell = {measure: value}
                ci = by_col.get(column)
                if ci is not None and ci.get("ci_low") is not None:
                    cell |= {"ci_low": ci["ci_low"], "ci_high": ci["ci_high"]}
                domain = AVG_KEY if column == "Avg." else column
                out.setdefault(dataset, {}).setdefault(domain, {})[system] = cell
    return {task: out}


def forest_rows(doc: dict) -> list[dict]:
    """The cells of a :func:`summary` as rows of :data:`FOREST_COLUMNS` (``value`` = the measure's)."""
    rows = []
    for datasets in doc.values():
        for dataset, domains in datasets.items():
            for domain, systems in domains.items():
                for system, cell in systems.items():
                    measure = next(k for k in cell if k not in ("ci_low", "ci_high"))
                    rows.append({"cell": f"{dataset}/{domain}/{system}", "dataset": dataset, "domain": domain,
                                 "system": system, "measure": measure, "value": cell[measure],
                                 "ci_low": cell.get("ci_low"), "ci_high": cell.get("ci_high")})
    return rows


def write_experiment_metrics(task: str, metrics_json: str | Path, significance_json: str | Path | None,
                             out_json: str | Path, out_csv: str | Path) -> int:
    """Write ``metrics/<task>.json`` and ``metrics/<task>_forest.csv`` (atomically); returns the number of cells."""
    doc = summary(task, metrics_json, significance_json)
    write_json(out_json, doc)
    rows = forest_rows(doc)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FOREST_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_text(out_csv, buf.getvalue())
    return len(rows)
