"""The RAG QA table (MM-BRIGHT Table 7): rows = settings (None, Oracle, each retriever), columns = domains and
Avg. of the judge's 0–100 score, the gap to Oracle, the judge failure count and how many queries each cell used.

With the judgments, every cell also gets a two-level bootstrap interval (answers, then judge repeats) and each
setting a paired test against the baseline setting (:func:`mmir.evaluation.significance.judged_table_statistics`):
a marker (†) where the corrected p < alpha, a footnote, an interval table, and the numbers in the CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mmir.core.io import write_text
from mmir.evaluation.significance import Settings, family_size, judged_table_statistics
from mmir.reporting.tables import FAILED_MARK, MARK, significance_note

NAMES = {"none": "None", "oracle": "Oracle"}


def rag_baseline(settings: Settings, rows: list[str]) -> Settings:
    """The settings with ``baseline`` resolved for a RAG table: a setting name as given, a system ``s`` as
    ``topk:s`` when that setting exists; anything else: the first setting (None = first, as for every table)."""
    b = settings.baseline
    if b is not None and b not in rows and f"topk:{b}" in rows:
        return settings.model_copy(update={"baseline": f"topk:{b}"})
    return settings


def rag_statistics(summary_files: list[str | Path], judgment_files: list[str | Path],
                   settings: Settings) -> dict[str, pd.DataFrame]:
    """``{dataset: judged_table_statistics frame}`` (rows = settings) from the judgments of each summary's unit
    (``judgment_files[i]`` belongs to ``summary_files[i]``); skipped units are left out.

    Raises:
        ValueError: the lists differ in length.
    """
    if len(summary_files) != len(judgment_files):
        raise ValueError(f"{len(summary_files)} summaries but {len(judgment_files)} judgment files")
    scores: dict[str, dict[str, dict[str, dict[str, list[float]]]]] = {}
    for sf, jf in zip(summary_files, judgment_files):
        d = json.loads(Path(sf).read_text(encoding="utf-8"))
        if d.get("skipped"):
            continue
        j = pd.read_parquet(jf)
        per = {str(q): g["score"].astype(float).tolist() for q, g in j.groupby("qid", sort=False)}
        scores.setdefault(d["dataset"], {}).setdefault(d["setting"], {})[d["domain"]] = per
    out = {}
    for ds, rows in scores.items():
        out[ds] = judged_table_statistics(rows, rag_baseline(settings, list(rows)))
    return out


def collect_rag(summary_files: list[str | Path]) -> pd.DataFrame:
    """Long frame ``dataset, domain, setting, score, queries, scored, judge_failures, skipped, within10, llm_calls,
    llm_failures`` from summaries."""
    rows = []
    for f in summary_files:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        rows.append({"dataset": d["dataset"], "domain": d["domain"], "setting": d["setting"], "score": d.get("score"),
                     "queries": d.get("queries", 0), "scored": d.get("answers_scored", 0),
                     "judge_failures": d.get("judge_failures", 0), "skipped": d.get("skipped"),
                     "within10": (d.get("agreement") or {}).get("within_tolerance"),
                     "llm_calls": d.get("llm_calls", 0), "llm_failures": d.get("llm_failures", 0)})
    return pd.DataFrame(rows)


def write_rag_table(long: pd.DataFrame, generator: str, judge: str, repeats: int, out_md, out_csv,
                    stats: dict[str, pd.DataFrame] | None = None, settings: Settings | None = None) -> None:
    """Markdown (a section per dataset; skipped datasets listed with their reason) and a tidy CSV. ``stats``
    (:func:`rag_statistics`) adds markers, the footnote, an interval table and, per CSV row, ``ci_low, ci_high, p,
    p_adj, significant`` of the cell and ``avg_ci_low, avg_ci_high, avg_p, avg_p_adj, avg_significant`` of the
    setting's Avg., with ``baseline``."""
    settings = settings or Settings()
    parts = ["# RAG QA — judge score 0–100 against the reference answer", "",
             f"Generator: `{generator}`; judge: `{judge}` ({repeats} judging(s) per answer; an answer's score is the "
             "mean of its valid judgings). Judge replies without a valid 0–100 score, even after one stricter retry, "
             "are failures: excluded from the mean and counted. Cells: score (scored answers / queries).", ""]
    skipped = long[long["skipped"].notna()]
    for ds, reason in skipped.groupby("dataset")["skipped"].first().items():
        parts += [f"## {ds}", "", f"Skipped: {reason}", ""]
    live = long[long["skipped"].isna()]
    csv_rows = []
    for ds, sub in live.groupby("dataset", sort=False):
        domains = list(dict.fromkeys(sub["domain"]))
        settings_ = list(dict.fromkeys(sub["setting"]))
        st = (stats or {}).get(ds)
        cell = st.set_index(["system", "column"]) if st is not None and len(st) else None

        def stat(s, col, key, cell=cell):
            return cell.at[(s, col), key] if cell is not None and (s, col) in cell.index else None

        def mark(s, col):
            return MARK if stat(s, col, "significant") else ""

        head = "| setting | " + " | ".join(domains) + " | Avg. | gap to Oracle | judge failures | agreement ±10 |"
        lines = [head, "|---|" + "---:|" * (len(domains) + 4)]
        avg = {s: sub[sub["setting"] == s]["score"].astype(float).mean() for s in settings_}
        for s in settings_:
            g = sub[sub["setting"] == s].set_index("domain")
            cells = [(f"{g.at[d, 'score']:.1f}{mark(s, d)} ({g.at[d, 'scored']}/{g.at[d, 'queries']})" if pd.notna(g.at[d, "score"])
                      else f"– (0/{g.at[d, 'queries']})") + (FAILED_MARK if g.at[d, "llm_failures"] else "") for d in domains]
            gap = avg[s] - avg["oracle"] if "oracle" in avg and pd.notna(avg.get("oracle")) else float("nan")
            agree = g["within10"].dropna()
            lines.append(f"| {NAMES.get(s, s)} | " + " | ".join(cells) + f" | {avg[s]:.1f}{mark(s, 'Avg.')} | {gap:+.1f} | "
                         f"{int(g['judge_failures'].sum())} | " + (f"{agree.mean():.0%}" if len(agree) else "–") + " |")
            for d in domains:
                row = {"dataset": ds, "setting": s, "domain": d, "score": g.at[d, "score"], "queries": g.at[d, "queries"],
                       "scored": g.at[d, "scored"], "judge_failures": g.at[d, "judge_failures"], "avg": avg[s],
                       "gap_to_oracle": gap, "llm_calls": g.at[d, "llm_calls"],
                       "llm_failures": g.at[d, "llm_failures"]}
                if cell is not None:
                    row["baseline"] = st["baseline"].iloc[0]
                    for col, prefix in ((d, ""), ("Avg.", "avg_")):
                        for k in ("ci_low", "ci_high", "p", "p_adj", "significant"):
                            row[prefix + k] = stat(s, col, k)
                csv_rows.append(row)
        parts += [f"## {ds}", "", *lines, ""]
        bad = sub[sub["llm_failures"] > 0]
        if len(bad):
            parts += [f"{FAILED_MARK} units with failed LLM calls (no reply, or a reply the parser rejected; retried on the "
                      "next run): " + "; ".join(f"{NAMES.get(s_, s_)} / {d_}: {f} of {c}" for s_, d_, f, c in
                                               zip(bad["setting"], bad["domain"], bad["llm_failures"], bad["llm_calls"])), ""]
        if cell is not None:
            methods = [m for m in st["interval"] if m]
            parts += [significance_note(settings, NAMES.get(st["baseline"].iloc[0], st["baseline"].iloc[0]),
                                        family_size(st, settings), "score", judged=True), "",
                      f"{settings.confidence:.0%} intervals: {methods[0] if methods else 'bootstrap'}, "
                      f"{settings.resamples} resamples, seed {settings.seed} (answers resampled within each domain; Avg.: "
                      "domain means averaged):", "",
                      "| setting | " + " | ".join(domains) + " | Avg. |", "|---|" + "---:|" * (len(domains) + 1)]
            for s in settings_:
                ivs = []
                for col in [*domains, "Avg."]:
                    lo, hi = stat(s, col, "ci_low"), stat(s, col, "ci_high")
                    ivs.append("–" if lo is None or pd.isna(lo) else f"[{lo:.1f}, {hi:.1f}]")
                parts.append(f"| {NAMES.get(s, s)} | " + " | ".join(ivs) + " |")
            parts.append("")
    write_text(out_md, "\n".join(parts))
    write_text(out_csv, pd.DataFrame(csv_rows).to_csv(index=False))
