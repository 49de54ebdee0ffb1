"""What a task table says about a cell besides its value: the other tie order's value and the tied items (ties:
McSherry & Najork, ECIR 2008; :mod:`mmir.evaluation.ties`), and why a cell has no number (no scorable query).

Read from the score step's metrics JSON (:func:`mmir.evaluation.scoring.score_run`: ``tie_order``, ``tie_orders``,
``ties``, ``unscored``) through :func:`mmir.reporting.tables.collect`'s long frame; files written before these keys
existed give no tie columns and no reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

AVG = "Avg."
#: the name of each tie order in captions and cells
ORDER_NAMES = {"run": "run order", "pytrec_eval": "trec_eval order", "expected": "tie-aware"}


@dataclass(frozen=True)
class CellExtras:
    """One dataset's table, one measure: systems × columns (domains, then Avg.) of

    Attributes:
        run_order, tie_aware: the value under the run's order and the tie-aware one (×100; Avg. the mean of the
            domains, NaN where a domain has none). Empty frames when the metrics files predate them.
        tied: items of the top ``depth`` sharing their score with another retrieved item, summed over queries
            (Avg.: the mean over domains, tied items per domain).
        depth: the measure's cut-off (None: the whole run).
        tie_order: the tie order of the table's values (``evaluation.tie_order``).
        unscored: ``{(system, domain): reason}`` of the cells without a number.
    """

    run_order: pd.DataFrame
    tie_aware: pd.DataFrame
    tied: pd.DataFrame
    depth: int | None
    tie_order: str
    unscored: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def alternate(self) -> tuple[str, pd.DataFrame]:
        """The other value shown beside a cell: ``(name, ×100 frame)``: the tie-aware one, or the run order's when the
        table's values are tie-aware."""
        return ("run order", self.run_order) if self.tie_order == "expected" else ("tie-aware", self.tie_aware)


def _pivot(sub: pd.DataFrame, column: str, systems: list[str], domains: list[str]) -> pd.DataFrame:
    """systems x (domains, Avg.) of ``column``; Avg. = the mean over the domains, as every Avg. of the table."""
    if column not in sub or sub[column].isna().all():
        return pd.DataFrame(index=systems, columns=[*domains, AVG], dtype=float)
    t = sub.pivot(index="system", columns="domain", values=column).reindex(index=systems, columns=domains).astype(float)
    t[AVG] = t[domains].mean(axis=1, skipna=False)
    return t


def cell_extras(long: pd.DataFrame, measure: str, dataset: str, systems: list[str], domains: list[str]) -> CellExtras:
    """The :class:`CellExtras` of one dataset's table (rows ``systems``, columns ``domains`` + Avg.)."""
    sub = long[(long["dataset"] == dataset) & (long["measure"] == measure)]
    run_order = _pivot(sub, "run_order", systems, domains) * 100
    tie_aware = _pivot(sub, "tie_aware", systems, domains) * 100
    tied = _pivot(sub, "tied_items", systems, domains)
    depths = sub["tie_depth"].dropna() if "tie_depth" in sub else pd.Series(dtype=float)
    orders = sub["tie_order"].dropna() if "tie_order" in sub else pd.Series(dtype=str)
    unscored = {(r.system, r.domain): r.unscored for r in sub.itertuples() if isinstance(getattr(r, "unscored", None), str)
                and r.unscored}
    return CellExtras(run_order, tie_aware, tied, int(depths.iloc[0]) if len(depths) else None,
                      str(orders.iloc[0]) if len(orders) else "run", unscored)


def differs(a: float, b: float, digits: int) -> bool:
    """Whether two ×100 values print differently at ``digits`` decimals (NaN never differs)."""
    return pd.notna(a) and pd.notna(b) and f"{a:.{digits}f}" != f"{b:.{digits}f}"


def alternate_text(extras: CellExtras | None, system: str, column: str, value: float, digits: int) -> str:
    """`` (tie-aware 57.8)`` when the other tie order's value of the cell prints differently, else ``""``."""
    if extras is None:
        return ""
    name, alt = extras.alternate
    if system not in alt.index or column not in alt.columns:
        return ""
    a = alt.at[system, column]
    return f" ({name} {a:.{digits}f})" if differs(value, a, digits) else ""


def md_ties(extras: CellExtras, table: pd.DataFrame, digits: int) -> list[str]:
    """The markdown under a dataset's table: where the ties change a cell, and the tied items per cell."""
    depth = f"top {extras.depth}" if extras.depth else "whole ranking"
    if extras.tied.isna().all().all():
        return []
    name, alt = extras.alternate
    changed = sum(differs(table.at[s, c], alt.at[s, c], digits) for s in table.index for c in table.columns
                  if s in alt.index and c in alt.columns)
    aware = "tie-aware = the mean over every order of each group of equal scores, McSherry & Najork 2008"
    head = (f"Ties: scored in {ORDER_NAMES.get(extras.tie_order, extras.tie_order)} (`evaluation.tie_order: {extras.tie_order}`). "
            + (f"{changed} cell{'s' if changed != 1 else ''} print{'s' if changed == 1 else ''} differently with the ties "
               f"ordered otherwise: the {name} value follows in brackets ({aware})." if changed else
               f"The {name} values print the same ({aware})."))
    if not (extras.tied.fillna(0) > 0).any().any():
        return [head + f" No item of the {depth} shares its score with another.", ""]
    lines = ["| system | " + " | ".join(extras.tied.columns) + " |", "|---|" + "---:|" * len(extras.tied.columns)]
    for s, row in extras.tied.iterrows():
        lines.append(f"| {s} | " + " | ".join("–" if pd.isna(v) else _count(v) for v in row) + " |")
    return [head, "", f"Tied items (items of each query's {depth} that share their score with another retrieved item, "
                      "summed over the queries; Avg.: the mean over the domains, tied items per domain):", "", *lines, ""]


def _count(v: float) -> str:
    """A count, or a mean of counts to 1 decimal."""
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def unscored_note(extras: CellExtras) -> list[str]:
    """The footnote of the cells without a number: which, and why; Avg. has none where a domain has none."""
    if not extras.unscored:
        return []
    by_reason: dict[str, list[str]] = {}
    for (s, d), why in extras.unscored.items():
        by_reason.setdefault(why, []).append(f"{s} on {d}")
    return ["– = no number: " + "; ".join(f"{', '.join(cells)}: {why}" for why, cells in by_reason.items())
            + ". The Avg. of a row with such a domain is – too; no interval or test is computed for these cells.", ""]


def csv_columns(extras: CellExtras, systems: list[str]) -> dict[str, list]:
    """Per column ``<col> run_order``, ``<col> tie_aware`` (×100, 4 decimals) and ``<col> tied_items`` (Avg.: the mean
    over the domains); none when the metrics files predate them."""
    out: dict[str, list] = {}
    if extras.tied.isna().all().all():
        return out
    for col in extras.tied.columns:
        for key, frame in (("run_order", extras.run_order), ("tie_aware", extras.tie_aware), ("tied_items", extras.tied)):
            vals = [frame.at[s, col] if s in frame.index else float("nan") for s in systems]
            out[f"{col} {key}"] = [None if pd.isna(v) else (int(v) if key == "tied_items" and float(v).is_integer()
                                                            else round(float(v), 4)) for v in vals]
    return out


#: the CSV statistics columns this module adds, by suffix
CSV_SUFFIXES = ("run_order", "tie_aware", "tied_items")
