"""Ablation grids (MM-BRIGHT Figures 5 and 7): rows = retrievers, columns = captioners or reformulators, each
cell the macro-average nDCG@10 (×100) of the system with that query variant and its delta against the plain
query; plus a grouped bar chart like the paper's figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mmir.core.io import atomic_path, write_text
from mmir.reporting.tables import FAILED_MARK, collect

LABEL = {"caption": ("captioner", "Caption-augmented queries (query + captions of its images)"),
         "reformulation": ("reformulator", "LLM-reformulated queries (reason, then write the search query)"),
         "reasoning": ("reasoning model", "BRIGHT's reasoning queries (the hub's <model>_reason configs)")}


def ablation_frame(metric_files: list[str | Path], measure: str, derived: dict[str, dict],
                   llm: dict[tuple[str, str, str], dict] | None = None) -> pd.DataFrame:
    """Long frame ``dataset, system, variant, value, plain, delta, llm_calls, llm_failures`` (×100, macro mean
    over domains).

    Only domains where the variants ran are averaged, for the plain system too, so deltas compare like with like.
    ``llm`` maps ``(dataset, domain, derived system)`` to the ``llm_calls`` / ``llm_failures`` of the stage that
    made its queries (summed over the cell's domains; 0 when unknown).
    """
    long = collect(metric_files)
    long = long[long["measure"] == measure]
    long = long.assign(base=[derived[s]["base"] if s in derived else s for s in long["system"]],
                       variant=[derived[s]["source"] if s in derived else "plain" for s in long["system"]])
    # NaN (a domain without a scorable query) makes the cell NaN: an average over fewer domains compares unlike with like
    avg = long.groupby(["dataset", "base", "variant"], sort=False)["value"].agg(lambda v: v.mean(skipna=False)).mul(100).reset_index()
    plain = avg[avg["variant"] == "plain"].set_index(["dataset", "base"])["value"]
    rows = avg[avg["variant"] != "plain"].copy()
    rows["plain"] = [plain.get((d, b)) for d, b in zip(rows["dataset"], rows["base"])]
    rows["delta"] = rows["value"] - rows["plain"]
    cells = long[long["system"].isin(derived)].drop_duplicates(["dataset", "domain", "system"])
    for key in ("llm_calls", "llm_failures"):
        per = {}
        for d, dom, sys_ in zip(cells["dataset"], cells["domain"], cells["system"]):
            k = (d, derived[sys_]["base"], derived[sys_]["source"])
            per[k] = per.get(k, 0) + int((llm or {}).get((d, dom, sys_), {}).get(key, 0))
        rows[key] = [per.get((d, b, v), 0) for d, b, v in zip(rows["dataset"], rows["base"], rows["variant"])]
    return rows.rename(columns={"base": "system"})[["dataset", "system", "variant", "value", "plain", "delta",
                                                    "llm_calls", "llm_failures"]]


def write_ablation(grid: str, frame: pd.DataFrame, measure: str, out_md, out_csv, out_png, out_plot_csv) -> None:
    """Markdown and CSV tables (cells ``value (±delta)``; :data:`~mmir.reporting.tables.FAILED_MARK` on cells
    with failed LLM calls, counted in a footnote), the plot data CSV and a grouped bar chart PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col, title = LABEL[grid]
    parts = [f"# {title} — Task 1 {measure} (×100), Avg. over domains", "",
             f"Each cell: {measure} of the system fed the {col}'s queries, and in brackets its change against the plain "
             "query on the same domains.", ""]
    for ds, sub in frame.groupby("dataset", sort=False):
        variants = list(dict.fromkeys(sub["variant"]))
        head = "| system | plain | " + " | ".join(variants) + " |"
        lines = [head, "|---|---:|" + "---:|" * len(variants)]
        for system, g in sub.groupby("system", sort=False):
            cells = {v: ("–" if pd.isna(x) else f"{x:.1f}") + ("" if pd.isna(d) else f" ({d + 0.0:+.1f})") + (FAILED_MARK if f else "")
                     for v, x, d, f in zip(g["variant"], g["value"], g["delta"].round(1), g["llm_failures"])}
            plain = g["plain"].iloc[0]
            lines.append(f"| {system} | {'–' if pd.isna(plain) else f'{plain:.1f}'} | "
                         + " | ".join(cells.get(v, "–") for v in variants) + " |")
        parts += [f"## {ds}", "", *lines, ""]
        bad = sub.drop_duplicates("variant")
        bad = bad[bad["llm_failures"] > 0]
        if len(bad):
            parts += [f"{FAILED_MARK} LLM calls failed while making these queries (the original query stands in; the "
                      "failures are retried on the next run): " + "; ".join(
                          f"{v}: {f} of {c}" for v, f, c in zip(bad["variant"], bad["llm_failures"], bad["llm_calls"])), ""]
    write_text(out_md, "\n".join(parts))
    write_text(out_csv, frame.round(4).to_csv(index=False))
    plot = pd.concat([frame[["dataset", "system", "variant", "value"]],
                      frame.drop_duplicates(["dataset", "system"]).assign(variant="plain", value=lambda f: f["plain"])[
                          ["dataset", "system", "variant", "value"]]])
    write_text(out_plot_csv, plot.round(4).to_csv(index=False))
    datasets = list(dict.fromkeys(frame["dataset"])) or ["-"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        sub = plot[plot["dataset"] == ds]
        if not len(sub):
            continue
        piv = sub.pivot(index="system", columns="variant", values="value")
        piv = piv[["plain", *[c for c in piv.columns if c != "plain"]]]
        piv.plot.bar(ax=ax, rot=0)
        ax.set_title(f"{ds}: {title.split(' (')[0]}")
        ax.set_ylabel(f"{measure} (×100)")
        ax.legend(title=col, fontsize=8)
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
