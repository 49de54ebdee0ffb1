"""The essentiality table (MM-BRIGHT §3.3-3.4, Figures 3, 4 and 6, Appendix Tables 16-23): per domain the
distribution of essentiality classes (queries), image types (images) and numbers of query images (queries: 1, 2, 3+),
and the primary measure (nDCG@10) of every system broken down by essentiality, with the Essential − Redundant gap, by
image type and by number of query images (what MM-BRIGHT §4.1's first-image protocol leaves unseen); plus a bar chart.

Scores are per-query values of the task's score step (``<domain>.perquery.tsv``), averaged over the queries of each
class (× 100); the ``All`` row pools the queries of every domain of the dataset. A query's image type is the type of
its first image that has one (the image Task 2's ``image_mode: first`` encodes). Unlabelled queries (a failed or
unparsable LLM reply) are left out of every breakdown and counted, never given a label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mmir.benchmarks.mmbright.essentiality import ESSENTIALITY, IMAGE_TYPES
from mmir.core.io import atomic_path, write_text
from mmir.reporting.tables import FAILED_MARK, label_tags

ALL = "All"
GAP = "Essential − Redundant"
#: classes of the number of images a query has (the rows its label frame has: every image the topic lists)
N_IMAGES = ["1", "2", "3+"]
FACETS = {"essentiality": list(ESSENTIALITY), "image_type": list(IMAGE_TYPES), "n_images": N_IMAGES}


def n_images_class(n: int) -> str | None:
    """``"1"``, ``"2"``, ``"3+"`` for a query with ``n`` images (None for none)."""
    return None if n < 1 else "3+" if n >= 3 else str(n)


def query_classes(labels: pd.DataFrame) -> pd.DataFrame:
    """``qid, essentiality, image_type, n_images`` per query of a label frame (one row per image, see
    :data:`~mmir.benchmarks.mmbright.essentiality.LABEL_COLUMNS`): the query's essentiality (None = unlabelled),
    the type of its first image (lowest ``image_index``) that has one (None when none has) and its number of images
    (:func:`n_images_class` of its rows)."""
    if labels.empty:
        return pd.DataFrame(columns=["qid", "essentiality", "image_type", "n_images"])
    lab = labels.sort_values(["qid", "image_index"], kind="stable")
    ess = lab.groupby("qid", sort=False)["essentiality"].first()
    typ = lab.dropna(subset=["image_type"]).groupby("qid", sort=False)["image_type"].first()
    out = pd.DataFrame({"qid": ess.index, "essentiality": ess.to_numpy()})
    out["image_type"] = out["qid"].map(typ)
    out["n_images"] = out["qid"].map(lab.groupby("qid", sort=False)["image_path"].size()).map(n_images_class)
    return out.astype(object).where(out.notna(), None)


def distribution(labels: dict[tuple[str, str], pd.DataFrame]) -> pd.DataFrame:
    """Counts per class: long frame ``dataset, domain, facet, class, count, share`` (share = % of the labelled units
    of the row; ``unlabelled`` rows have no share). Essentiality and numbers of images count queries, image types
    count images; ``All`` rows sum a dataset's domains."""
    rows = []
    for (ds, dom), lab in labels.items():
        q = lab.drop_duplicates("qid")
        n = lab.groupby("qid", sort=False)["image_path"].size().map(n_images_class)
        for facet, series in (("essentiality", q["essentiality"]), ("image_type", lab["image_type"]), ("n_images", n)):
            for c in FACETS[facet]:
                rows.append({"dataset": ds, "domain": dom, "facet": facet, "class": c, "count": int((series == c).sum())})
            rows.append({"dataset": ds, "domain": dom, "facet": facet, "class": "unlabelled", "count": int(series.isna().sum())})
    df = pd.DataFrame(rows, columns=["dataset", "domain", "facet", "class", "count"])
    if df.empty:
        return df.assign(share=pd.Series(dtype=float))
    tot = df.groupby(["dataset", "facet", "class"], sort=False)["count"].sum().reset_index().assign(domain=ALL)
    df = pd.concat([df, tot[df.columns]], ignore_index=True)
    labelled = df[df["class"] != "unlabelled"].groupby(["dataset", "domain", "facet"])["count"].transform("sum")
    df["share"] = (df["count"] / labelled.reindex(df.index)).mul(100)
    df.loc[df["class"] == "unlabelled", "share"] = float("nan")
    return df


def scores_by_class(units: Sequence[dict]) -> pd.DataFrame:
    """Mean per-query score by class.

    Args:
        units: ``{"dataset", "domain", "system", "classes": query_classes frame, "perquery": Series qid -> value}``,
            one per (dataset, domain, system).

    Returns:
        Long frame ``dataset, system, domain, facet, class, queries, value`` (value = mean × 100; ``queries`` = the
        labelled queries of the class that have a score), a row per class with at least one query, ``domain`` =
        ``All`` rows pooling the dataset's domains, and per (dataset, system, domain) a ``facet == "essentiality"``
        row of class :data:`GAP` (Essential mean − Redundant mean; absent unless both classes have queries).
        Labelled queries without a per-query score (no judgments) are not counted.
    """
    joined = []
    for u in units:
        c = u["classes"]
        pq = u["perquery"]
        j = c[c["qid"].isin(pq.index)]
        j = j.assign(value=j["qid"].map(pq).astype(float), dataset=u["dataset"], domain=u["domain"], system=u["system"])
        joined.append(j)
    cols = ["dataset", "system", "domain", "facet", "class", "queries", "value"]
    if not joined:
        return pd.DataFrame(columns=cols)
    j = pd.concat(joined, ignore_index=True)
    j = pd.concat([j, j.assign(domain=ALL)], ignore_index=True)
    rows = []
    for facet in FACETS:
        sub = j.dropna(subset=[facet])
        g = sub.groupby(["dataset", "system", "domain", facet], sort=False)["value"].agg(["size", "mean"]).reset_index()
        rows.append(pd.DataFrame({"dataset": g["dataset"], "system": g["system"], "domain": g["domain"], "facet": facet,
                                  "class": g[facet], "queries": g["size"].astype(int), "value": g["mean"] * 100}))
    out = pd.concat(rows, ignore_index=True)
    ess = out[out["facet"] == "essentiality"].pivot_table(index=["dataset", "system", "domain"], columns="class",
                                                          values="value", aggfunc="first")
    if {"Essential", "Redundant"} <= set(ess.columns):
        gap = (ess["Essential"] - ess["Redundant"]).dropna().reset_index(name="value")
        gap = gap.assign(facet="essentiality", **{"class": GAP, "queries": 0})
        out = pd.concat([out, gap[cols]], ignore_index=True)
    order = {d: i for i, d in enumerate(dict.fromkeys(j["domain"]))}
    rank = {c: i for i, c in enumerate([*ESSENTIALITY, GAP, *IMAGE_TYPES, *N_IMAGES])}
    sysorder = {s: i for i, s in enumerate(dict.fromkeys(j["system"]))}
    out = out.sort_values(by=["dataset", "system", "domain", "facet", "class"],
                          key=lambda s: s.map(sysorder) if s.name == "system" else s.map(order) if s.name == "domain"
                          else s.map(rank) if s.name == "class" else s, kind="stable")
    return out[cols].reset_index(drop=True)


def _cell(v: float | None, n: int | None = None) -> str:
    if v is None or pd.isna(v):
        return "–"
    return f"{v:.1f}" + (f" (n={n})" if n is not None else "")


@dataclass(frozen=True)
class EssentialityFiles:
    """Where :func:`write_essentiality` writes: the markdown and CSV tables, the bar chart and its plot data CSV."""

    md: str | Path
    csv: str | Path
    png: str | Path
    plot_csv: str | Path


def write_essentiality(dist: pd.DataFrame, scores: pd.DataFrame, failures: dict[tuple[str, str], dict], measure: str,
                       task: str, notes: Sequence[str], files: EssentialityFiles, labels: dict[str, str] | None = None) -> None:
    """Write the markdown and CSV tables, the plot data CSV and the bar chart.

    Args:
        dist: :func:`distribution`.
        scores: :func:`scores_by_class`.
        failures: ``{(dataset, domain): {"llm_calls", "llm_failures", "essentiality_failed", "image_type_failed"}}``;
            domains with failures get :data:`~mmir.reporting.tables.FAILED_MARK` and a footnote with the counts.
        measure, task: what the scores are (e.g. ``nDCG@10`` of ``task2``).
        notes: lines under the title (where the labels come from, which queries, skipped domains).
        labels: ``{system: row label}`` (e.g. ``(untrained)``).

    The CSV is one long table: ``table`` (``distribution`` or ``scores``), ``dataset, domain, system, facet, class,
    count, share, queries, value``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_md, out_csv, out_png, out_plot_csv = files.md, files.csv, files.png, files.plot_csv

    label = labels or {}
    parts = [f"# Image essentiality and image types — {task} {measure} (×100) by class", "",
             "MM-BRIGHT §3.3–3.4 (Figures 3, 4, 6; Appendix Tables 16–23).", "", *notes, ""]
    datasets = list(dict.fromkeys([*dist["dataset"], *scores["dataset"]]))
    for ds in datasets:
        parts += [f"## {ds}", ""]
        d = dist[dist["dataset"] == ds]
        for facet, title, unit in (("essentiality", "Essentiality", "queries"), ("image_type", "Image types", "images"),
                                   ("n_images", "Images per query", "queries")):
            names = FACETS[facet]
            shown = [IMAGE_TYPES.get(c, c) for c in names]
            parts += [f"### {title} ({unit}; % of the labelled)", "",
                      "| domain | " + " | ".join(shown) + " | unlabelled |", "|---|" + "---:|" * (len(names) + 1)]
            for dom, g in d[d["facet"] == facet].groupby("domain", sort=False):
                f = failures.get((ds, dom), {})
                bad = f.get("essentiality_failed" if facet == "essentiality" else "image_type_failed", 0) if dom != ALL else 0
                cnt = dict(zip(g["class"], g["count"]))
                shr = dict(zip(g["class"], g["share"]))
                cells = [f"{cnt.get(c, 0)}" + ("" if pd.isna(shr.get(c)) else f" ({shr[c]:.1f}%)") for c in names]
                parts.append(f"| {dom}{FAILED_MARK if bad else ''} | " + " | ".join(cells) + f" | {cnt.get('unlabelled', 0)} |")
            parts.append("")
        s = scores[scores["dataset"] == ds]
        for facet, title in (("essentiality", "by essentiality"), ("image_type", "by image type (the query's first typed image)"),
                             ("n_images", "by number of query images")):
            sub = s[s["facet"] == facet]
            names = [*ESSENTIALITY, GAP] if facet == "essentiality" else \
                [c for c in FACETS[facet] if c in set(sub["class"])]
            shown = [IMAGE_TYPES.get(c, c) for c in names]
            parts += [f"### {measure} {title}", "", "| system | domain | " + " | ".join(shown) + " |",
                      "|---|---|" + "---:|" * len(names)]
            for (system, dom), g in sub.groupby(["system", "domain"], sort=False):
                val, n = dict(zip(g["class"], g["value"])), dict(zip(g["class"], g["queries"]))
                cells = [(f"{val[c] + 0.0:+.1f}" if c in val else "–") if c == GAP else _cell(val.get(c), n.get(c))
                         for c in names]
                parts.append(f"| {label.get(system, system)} | {dom} | " + " | ".join(cells) + " |")
            parts.append("")
        bad = {k: v for k, v in failures.items() if k[0] == ds and v.get("llm_failures")}
        if bad:
            parts += [f"{FAILED_MARK} LLM labelling calls failed (no reply, or no label in it): the query or image stays "
                      "unlabelled, is left out of the breakdowns and is retried on the next run: " + "; ".join(
                          f"{dom}: {v['llm_failures']} of {v['llm_calls']} calls ({v.get('essentiality_failed', 0)} "
                          f"queries without essentiality, {v.get('image_type_failed', 0)} images without type)"
                          for (_, dom), v in bad.items()), ""]
    write_text(out_md, "\n".join(parts))
    csv = pd.concat([dist.assign(table="distribution", system="", queries=pd.NA, value=pd.NA),
                     scores.assign(table="scores", count=pd.NA, share=pd.NA)], ignore_index=True)
    csv["label"] = csv["system"].map(lambda x: label_tags(x, label.get(x, x)))  # the plain name stays in system (joins)
    cols = ["table", "dataset", "domain", "system", "label", "facet", "class", "count", "share", "queries", "value"]
    write_text(out_csv, csv[cols].round(4).to_csv(index=False))
    plot = scores[(scores["domain"] == ALL) & (scores["class"] != GAP)].copy()
    plot["label"] = plot["system"].map(lambda x: label_tags(x, label.get(x, x)))
    plot["class"] = plot["class"].map(lambda c: IMAGE_TYPES.get(c, c))
    write_text(out_plot_csv, plot[["dataset", "system", "label", "facet", "class", "queries", "value"]].round(4).to_csv(index=False))
    _plot(plot.assign(system=plot["system"].map(lambda x: label.get(x, x))), datasets, measure, out_png, plt)


def _plot(plot: pd.DataFrame, datasets: list[str], measure: str, out_png, plt) -> None:
    """Save :func:`essentiality_figure` as a PNG (atomically)."""
    fig = essentiality_figure(plot, datasets, measure, plt)
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def essentiality_figure(plot: pd.DataFrame, datasets: list[str], measure: str, plt):
    """Grouped horizontal bars per dataset: systems × essentiality class (left), systems × image type (right). The
    system names run down the y axis, so long row labels (``clip-untrained (untrained)``) never overlap; each panel's
    legend sits beside it (constrained layout: no text overlaps another or leaves the figure)."""
    datasets = datasets or ["-"]
    n = max([plot["system"].nunique(), 1])
    fig, axes = plt.subplots(len(datasets), 2, figsize=(13, (1.6 + 0.45 * n) * len(datasets)), squeeze=False,
                             layout="constrained")
    for row, ds in zip(axes, datasets):
        for ax, facet, order in ((row[0], "essentiality", list(ESSENTIALITY)), (row[1], "image_type", list(IMAGE_TYPES.values()))):
            sub = plot[(plot["dataset"] == ds) & (plot["facet"] == facet)]
            ax.set_title(f"{ds}: {measure} by {facet.replace('_', ' ')} (all domains)", fontsize=10)
            if sub.empty:
                ax.text(0.5, 0.5, "no labelled queries", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()
                continue
            piv = sub.pivot(index="system", columns="class", values="value")
            piv = piv[[c for c in order if c in piv.columns]].reindex(list(dict.fromkeys(sub["system"])))
            piv.plot.barh(ax=ax, width=0.8)
            ax.invert_yaxis()  # the first system on top
            ax.set_ylabel("")
            ax.set_xlabel(f"{measure} (×100)")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig
