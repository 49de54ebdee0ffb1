"""The RAG QA table (MM-BRIGHT Table 7): rows = settings (None, Oracle, each retriever), columns = domains and
Avg. of the judge's 0–100 score, the gap to Oracle, the judge failure count and how many queries each cell used."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mmir.core.io import write_text
from mmir.reporting.tables import FAILED_MARK

NAMES = {"none": "None", "oracle": "Oracle"}


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


def write_rag_table(long: pd.DataFrame, generator: str, judge: str, repeats: int, out_md, out_csv) -> None:
    """Markdown (a section per dataset; skipped datasets listed with their reason) and a tidy CSV."""
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
        settings = list(dict.fromkeys(sub["setting"]))
        head = "| setting | " + " | ".join(domains) + " | Avg. | gap to Oracle | judge failures | agreement ±10 |"
        lines = [head, "|---|" + "---:|" * (len(domains) + 4)]
        avg = {s: sub[sub["setting"] == s]["score"].astype(float).mean() for s in settings}
        for s in settings:
            g = sub[sub["setting"] == s].set_index("domain")
            cells = [(f"{g.at[d, 'score']:.1f} ({g.at[d, 'scored']}/{g.at[d, 'queries']})" if pd.notna(g.at[d, "score"])
                      else f"– (0/{g.at[d, 'queries']})") + (FAILED_MARK if g.at[d, "llm_failures"] else "") for d in domains]
            gap = avg[s] - avg["oracle"] if "oracle" in avg and pd.notna(avg.get("oracle")) else float("nan")
            agree = g["within10"].dropna()
            lines.append(f"| {NAMES.get(s, s)} | " + " | ".join(cells) + f" | {avg[s]:.1f} | {gap:+.1f} | "
                         f"{int(g['judge_failures'].sum())} | " + (f"{agree.mean():.0%}" if len(agree) else "–") + " |")
            csv_rows += [{"dataset": ds, "setting": s, "domain": d, "score": g.at[d, "score"], "queries": g.at[d, "queries"],
                          "scored": g.at[d, "scored"], "judge_failures": g.at[d, "judge_failures"], "avg": avg[s],
                          "gap_to_oracle": gap, "llm_calls": g.at[d, "llm_calls"], "llm_failures": g.at[d, "llm_failures"]}
                         for d in domains]
        parts += [f"## {ds}", "", *lines, ""]
        bad = sub[sub["llm_failures"] > 0]
        if len(bad):
            parts += [f"{FAILED_MARK} units with failed LLM calls (no reply, or a reply the parser rejected; retried on the "
                      "next run): " + "; ".join(f"{NAMES.get(s_, s_)} / {d_}: {f} of {c}" for s_, d_, f, c in
                                               zip(bad["setting"], bad["domain"], bad["llm_failures"], bad["llm_calls"])), ""]
    write_text(out_md, "\n".join(parts))
    write_text(out_csv, pd.DataFrame(csv_rows).to_csv(index=False))
