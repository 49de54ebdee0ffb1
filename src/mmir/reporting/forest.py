"""Forest plot of a task table (``results/plots/<task>_forest.svg``): every system's mean of the measure (×100) with
its confidence interval, per domain and for Avg., one panel per dataset, the significance marker
(:data:`mmir.reporting.tables.MARK`) beside the interval of a cell that differs from the baseline.

It draws ``<task>.significance.json`` as :func:`mmir.reporting.tables.write_task_table` wrote it, in the order of
the table's CSV, so every point and interval is the table's own number. The SVG (matplotlib; text as paths, so no
font is needed to view it) is byte-stable for the same input: fixed hash salt, no date. Each drawn point is the
group ``<g id="point-<i>">`` (marker and interval) and the plotted numbers are the figure's ``dc:description``
(JSON), so a reader or a test can check them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmir.core.io import atomic_path
from mmir.core.tasks import TASKS
from mmir.reporting.tables import AVG, MARK

ROW_INCHES = 0.24  # height of one (system, column) row


def table_order(table_csv: str | Path) -> dict[str, tuple[list[str], list[str]]]:
    """``{dataset: (systems, columns)}`` in the order of the task table's CSV (``<task>.csv``: rows in table order,
    the domain columns of every dataset, then Avg.); the significance JSON's keys are sorted, the table's are not."""
    import csv

    with open(table_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return {}
    columns = [c for c in rows[0] if c not in ("dataset", "system", "label", "baseline") and " " not in c]
    out: dict[str, tuple[list[str], list[str]]] = {}
    for r in rows:
        labels, cols = out.setdefault(r["dataset"], ([], []))
        labels.append(r["system"])  # the plain name (the significance JSON's ``labels`` map it to its row label)
        cols += [c for c in columns if r[c] != "" and c not in cols]
    return {ds: (labels, [c for c in cols if c != AVG] + [c for c in cols if c == AVG]) for ds, (labels, cols) in out.items()}


def forest_points(sig: Mapping[str, Any], order: Mapping[str, tuple[list[str], list[str]]]) -> list[dict[str, Any]]:
    """The points of ``<task>.significance.json``: ``{dataset, system, label, column, mean, ci_low, ci_high,
    significant, baseline}`` (values ×100 as in the JSON), datasets, rows and columns in the table's ``order``
    (:func:`table_order`), columns (domains, then Avg.) outermost and rows inside; cells without a mean are left out."""
    labels = sig.get("labels", {})
    unlabel = {v: k for k, v in labels.items()}
    out = []
    for ds, (rows, columns) in order.items():
        t = sig.get("datasets", {}).get(ds)
        if t is None:
            continue
        rows = [labels.get(r, r) for r in rows]  # CSV rows name systems plainly (older CSVs: by their label)
        for col in columns:
            for r in rows:
                c = t["cells"].get(r, {}).get(col)
                if c is None or c.get("mean") is None:
                    continue
                out.append({"dataset": ds, "system": unlabel.get(r, r), "label": r, "column": col, "mean": c["mean"],
                            "ci_low": c.get("ci_low"), "ci_high": c.get("ci_high"), "significant": bool(c.get("significant")),
                            "baseline": r == t.get("baseline") or unlabel.get(r, r) == t.get("baseline")})
    return out


def write_forest(significance_json: str | Path, table_csv: str | Path, out_svg: str | Path) -> int:
    """Draw the forest plot of one task table (its ``<task>.significance.json`` and ``<task>.csv``) into ``out_svg``
    (atomically); returns the number of points.

    A table without statistics (no per-query values) gives a figure that says so; one with no unit, its ``note``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sig = json.loads(Path(significance_json).read_text(encoding="utf-8"))
    points = forest_points(sig, table_order(table_csv))
    task = sig.get("task", "")
    with plt.rc_context(RC):
        fig = forest_figure(sig, points)
        desc = json.dumps([{k: p[k] for k in ("dataset", "system", "column", "mean", "ci_low", "ci_high", "significant")}
                           for p in points], sort_keys=True)
        with atomic_path(out_svg) as tmp:
            fig.savefig(tmp, format="svg", metadata={"Date": None, "Description": desc,
                                                     "Title": f"{task} forest plot"})
        plt.close(fig)
    return len(points)


#: the figure's matplotlib settings (byte-stable SVG, text as paths)
RC = {"svg.hashsalt": "mmir", "svg.fonttype": "path", "font.size": 9}


def forest_figure(sig: Mapping[str, Any], points: list[dict[str, Any]]):
    """The forest plot's matplotlib Figure of ``points`` (:func:`forest_points` of ``sig``, the significance JSON):
    the title on top, a panel per dataset, the legend and its note under the panels (constrained layout: no text
    overlaps another or leaves the figure, however long the task's title)."""
    import matplotlib.pyplot as plt

    task, measure = sig.get("task", ""), sig.get("measure", "")
    conf = sig.get("settings", {}).get("confidence", 0.95)
    datasets = list(dict.fromkeys(p["dataset"] for p in points))
    systems = list(dict.fromkeys(p["label"] for p in points))
    colors = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(systems)}
    heights = [max(2, sum(p["dataset"] == d for p in points) + 2 * len({p["column"] for p in points if p["dataset"] == d}))
               for d in datasets] or [2]
    fig, axes = plt.subplots(len(heights), 1, figsize=(8, 1.2 + ROW_INCHES * sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    if not points:
        axes[0][0].text(0.5, 0.5, sig.get("note") or "no per-query values: no intervals", ha="center", va="center", wrap=True)
        axes[0][0].set_axis_off()
    index = 0
    for ax, ds in zip(axes[:, 0], datasets):
        y, ticks, labels, seps = 0.0, [], [], []
        mine = [p for p in points if p["dataset"] == ds]
        for col in dict.fromkeys(p["column"] for p in mine):
            group = [p for p in mine if p["column"] == col]
            top = y
            for p in group:
                lo, hi = p["ci_low"], p["ci_high"]
                g = f"point-{index}"
                kw = {"color": colors[p["label"]], "gid": g}
                if lo is not None and hi is not None:
                    ax.plot([lo, hi], [y, y], lw=1.6, solid_capstyle="butt", **kw)
                ax.plot([p["mean"]], [y], marker="o" if not p["baseline"] else "D", ms=5,
                        mfc="white" if p["baseline"] else colors[p["label"]], mec=colors[p["label"]], ls="none", **kw)
                if p["significant"]:
                    ax.annotate(MARK, (hi if hi is not None else p["mean"], y), xytext=(3, -1), textcoords="offset points",
                                va="center", fontsize=10, color=colors[p["label"]], gid=f"{g}-mark")
                index += 1
                y += 1
            ticks.append((top + y - 1) / 2)
            labels.append(col)
            seps.append(y)
            y += 1
        for s in seps[:-1]:
            ax.axhline(s, color="#d0d6de", lw=0.6)
        ax.set_yticks(ticks, labels)
        for t in ax.get_yticklabels():
            if t.get_text() == AVG:
                t.set_fontweight("bold")
        ax.set_ylim(y - 1, -1)
        ax.grid(axis="x", color="#e3e7ec", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_title(ds, loc="left", fontsize=10, fontweight="bold")
        ax.set_xlabel(f"{measure} (×100), mean and {conf:.0%} interval")
    handles = [plt.Line2D([], [], color=colors[s], marker="D" if any(p["label"] == s and p["baseline"] for p in points)
                          else "o", mfc="white" if any(p["label"] == s and p["baseline"] for p in points) else colors[s],
                          label=s + (" (baseline)" if any(p["label"] == s and p["baseline"] for p in points) else ""))
               for s in systems]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False, ncols=min(3, len(handles)),
                   title=f"{MARK} = differs from the baseline (corrected p < α)", title_fontsize=8)
    fig.suptitle(f"{TASKS[task].label if task in TASKS else task}: {measure} by domain", x=0.01, ha="left", fontsize=11)
    return fig


def avg_forest_svg(points: list[dict[str, Any]], measure: str, confidence: float = 0.95, width: int = 460) -> str:
    """A small inline SVG forest plot of one dataset's Avg. column (the summary's): per row of ``points`` (as
    :func:`forest_points` gives them, one column) the mean (a dot; the baseline a hollow diamond) and its interval,
    with :data:`MARK` where the cell differs from the baseline. No fonts or files needed; labels escaped. Each row is
    ``<g class="point" data-system=.. data-mean=.. data-ci-low=.. data-ci-high=..>``."""
    from html import escape

    row, left, right, top = 18, 170, 40, 8
    vals = [v for p in points for v in (p["mean"], p["ci_low"], p["ci_high"]) if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 100.0)
    pad = max(1.0, (hi - lo) * 0.05)
    lo, hi = max(0.0, lo - pad), hi + pad
    span = hi - lo or 1.0
    plot = width - left - right
    h = top + row * len(points) + 34

    def x(v: float) -> float:
        return left + (v - lo) / span * plot

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="avg-forest" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
           f'role="img" aria-label="{escape(measure)} Avg. with {confidence:.0%} intervals">']
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50) if span / s <= 8)
    t = (int(lo // step) + 1) * step
    while t < hi:
        out.append(f'<line x1="{x(t):.1f}" y1="{top - 2}" x2="{x(t):.1f}" y2="{h - 30}" stroke="#e3e7ec"/>'
                   f'<text x="{x(t):.1f}" y="{h - 18}" font-size="10" text-anchor="middle">{t:g}</text>')
        t += step
    out.append(f'<text x="{left + plot / 2:.1f}" y="{h - 4}" font-size="10" text-anchor="middle">'
               f'{escape(measure)} (×100), Avg. and {confidence:.0%} interval</text>')
    for i, p in enumerate(points):
        y = top + row * i + row / 2
        color = "#20344f" if p["baseline"] else "#1f5fbf" if p["significant"] else "#4a5563"
        attrs = " ".join(f'data-{k.replace("_", "-")}="{p[k]}"' for k in ("mean", "ci_low", "ci_high") if p[k] is not None)
        g = [f'<g class="point" data-system="{escape(p["label"])}" {attrs}>',
             f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{escape(p["label"])}</text>']
        if p["ci_low"] is not None and p["ci_high"] is not None:
            g.append(f'<line x1="{x(p["ci_low"]):.1f}" y1="{y:.1f}" x2="{x(p["ci_high"]):.1f}" y2="{y:.1f}" '
                     f'stroke="{color}" stroke-width="2"/>')
        if p["baseline"]:
            g.append(f'<path d="M{x(p["mean"]):.1f},{y - 5:.1f} l5,5 l-5,5 l-5,-5 z" fill="#fff" stroke="{color}" stroke-width="1.5"/>')
        else:
            g.append(f'<circle cx="{x(p["mean"]):.1f}" cy="{y:.1f}" r="4" fill="{color}"/>')
        if p["significant"]:
            g.append(f'<text x="{x(p["ci_high"] if p["ci_high"] is not None else p["mean"]) + 4:.1f}" y="{y + 4:.1f}" '
                     f'font-size="12" fill="{color}">{MARK}</text>')
        out.append("".join(g) + "</g>")
    out.append("</svg>")
    return "".join(out)
