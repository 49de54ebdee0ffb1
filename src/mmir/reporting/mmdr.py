"""The MMDeepResearch-Bench table (``mmdr.md`` / ``mmdr.csv``), with bootstrap intervals of the main scores over
tasks (:func:`task_intervals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.results import TABLE_COLUMNS, model_label
from mmir.config.models import MMDREvaluatorConfig
from mmir.core.io import write_text
from mmir.evaluation.significance import Settings, bootstrap_interval, data_rng
from mmir.reporting.tables import FAILED_MARK

INTERVAL_COLUMNS = ("Overall", "FLAE", "TRACE", "MOSAIC")


def task_intervals(task_rows: Sequence[Mapping[str, Any]], settings: Settings,
                   columns: Sequence[str] = INTERVAL_COLUMNS) -> dict[str, dict[str, tuple[float, float]]]:
    """``{row name: {column: (low, high)}}``: the bootstrap interval (``settings.interval``, ``confidence``,
    ``resamples``, seed per cell) of each column's mean over the complete tasks, per domain (``<dataset>/<domain>``,
    from the task id) and for ``All`` (tasks pooled, as the table's All row). Each task is judged once, so the
    two-level bootstrap of :mod:`mmir.evaluation.significance` reduces to resampling tasks. A column with no value
    gets no interval."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in task_rows:
        if r.get("Complete"):
            groups.setdefault(str(r["Task ID"]).rsplit("/", 1)[0], []).append(r)
    groups["All"] = [r for g in list(groups.values()) for r in g]
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for name, rows in groups.items():
        for c in columns:
            vals = [float(r[c]) for r in rows if r.get(c) not in ("", None)]
            if vals:
                ci = bootstrap_interval(vals, confidence=settings.confidence, resamples=settings.resamples,
                                        method=settings.interval, rng=data_rng(settings.seed, "interval", vals))
                out.setdefault(name, {})[c] = (ci.low, ci.high)
    return out


def alpha_note(mmdr: Mapping[str, Any]) -> str:
    """The caption sentence naming FLAE's alpha protocol (``mmdr.evaluator.flae.alpha_protocol``) and its research alpha."""
    flae = MMDREvaluatorConfig.from_mapping(mmdr.get("evaluator")).flae
    what = {"spec": "the spec and the paper's code", "reference-run": "reproduces the authors' published reference outputs"}
    return (f"FLAE α protocol `{flae.alpha_protocol}` ({what[flae.alpha_protocol]}): formula weight "
            + ", ".join(f"{p} {flae.alpha_for(p):g}" for p in ("research", "daily_easy", "daily_medium", "daily_hard")) + ".")


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.2f}"


@dataclass(frozen=True)
class JudgeCalls:
    """The call accounting of the MMDR table: ``fallbacks`` = ``{row: {module: {calls, parse_failures, fallbacks,
    example_copies}}}``; ``cut`` = replies cut at the judge's output limit per module (None = not reported); ``llm``
    maps a row name to its ``llm_calls`` / ``llm_failures`` (writer and judge together)."""

    fallbacks: Mapping[str, Mapping[str, Mapping[str, int]]]
    cut: Mapping[str, int] | None = None
    llm: Mapping[str, Mapping[str, int]] | None = None


@dataclass(frozen=True)
class TaskIntervals:
    """``intervals`` (:func:`task_intervals`) and the ``settings`` they were made with (None = the defaults)."""

    intervals: Mapping[str, Mapping[str, tuple[float, float]]] | None = None
    settings: Settings | None = None


def write_table(rows: Sequence[tuple[str, dict]], calls: JudgeCalls, baselines: Mapping[str, Mapping[str, Any]],
                mmdr: Mapping[str, Any], judge: Mapping[str, Any], out_md: str | Path, out_csv: str | Path,
                ci: TaskIntervals = TaskIntervals()) -> None:
    """``mmdr.md`` (scores per domain and over all tasks, judge-call accounting per module, what the baseline
    did) and ``mmdr.csv`` (the score rows). A row with failures in ``calls.llm`` gets
    :data:`~mmir.reporting.tables.FAILED_MARK` and a footnote. ``ci.intervals`` add an interval table to the markdown and
    ``<column> ci_low`` / ``<column> ci_high`` columns to the CSV."""
    fallbacks, cut, llm = calls.fallbacks, calls.cut, calls.llm
    intervals, settings = ci.intervals, ci.settings
    import pandas as pd

    from mmir.core.io import atomic_path

    head = ["Domain", "Tasks", "Complete", *TABLE_COLUMNS]
    lines = [
        f"# MMDeepResearch-Bench: {model_label(mmdr)}", "",
        f"Judge: `{judge.get('model')}` ({judge.get('backend')}"
        f"{', images shown to it as text: ' + judge['image_input'].split(':', 1)[-1] if judge.get('image_input') else ''}). "
        "Scores 0-100; means over complete tasks (every component present). Overall = 0.2 FLAE + 0.5 TRACE + 0.3 MOSAIC; "
        "TRACE = 0.6 EVI + 0.4 VEF; Vef. = pass rate x 100; Read./Insh./Stru. are FLAE parts, Con./Cov./Fid. EVI parts, "
        "Sem./Acc./VQA MOSAIC diagnostics (blank: no task had that item type). " + alpha_note(mmdr), "",
        "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
    ]
    llm = llm or {}
    for name, b in rows:
        mark = FAILED_MARK if llm.get(name, {}).get("llm_failures") else ""
        lines.append("| " + " | ".join([name + mark, str(b["n"]), str(b["complete"]), *(_fmt(b[c]) for c in TABLE_COLUMNS)]) + " |")
    bad = {n: c for n, c in llm.items() if c.get("llm_failures")}
    if bad:
        lines += ["", f"{FAILED_MARK} rows with failed LLM calls (no reply, or a reply the parser rejected: the evaluator's "
                  "fallback stands in; retried on the next run): "
                  + "; ".join(f"{n}: {c['llm_failures']} of {c['llm_calls']}" for n, c in bad.items())]
    if intervals:
        st = settings or Settings()
        cols = [c for c in INTERVAL_COLUMNS if any(c in iv for iv in intervals.values())]
        lines += ["", f"{st.confidence:.0%} intervals of the means over complete tasks ({st.interval} bootstrap over tasks, "
                  f"{st.resamples} resamples, seed {st.seed}; one judging per task):", "",
                  "| Domain | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for name, _ in rows:
            iv = intervals.get(name, {})
            lines.append(f"| {name} | " + " | ".join(f"[{iv[c][0]:.2f}, {iv[c][1]:.2f}]" if c in iv else "" for c in cols) + " |")
    modules = sorted({m for f in fallbacks.values() for m in f})
    lines += ["", "Judge calls per module (calls / parse failures / fallbacks / example copies): a fallback is the "
              "evaluator's fixed default replacing an unusable reply (spec §3); an example copy is a reply that parsed "
              "but repeats the answer-format example of the prompt (e.g. every number 0.0), which a small judge often "
              "writes instead of judging. Both are counted rather than hidden.", "",
              "| Domain | " + " | ".join(modules) + " |", "|---|" + "---|" * len(modules)]
    for name, f in fallbacks.items():
        cells = [f"{f[m]['calls']} / {f[m]['parse_failures']} / {f[m]['fallbacks']} / {f[m].get('example_copies', 0)}"
                 if m in f else "" for m in modules]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if cut is not None:
        lines += ["", f"Replies cut at the judge's output limit (judge_max_tokens = {mmdr['judge_max_tokens']}), all domains: "
                  + (", ".join(f"{k} {v}" for k, v in cut.items() if v) or "none") + "."]
    keys = [("reports", "reports"), ("failed", "failed generations"), ("under_min_chars", "under min_report_chars"),
            ("mean_citation_markers_by_model", "mean markers by the model"),
            ("without_valid_citation", "no valid model citation"), ("with_invalid_citations", "invalid citation numbers"),
            ("posthoc_sources", "post-hoc source citations"), ("posthoc_figures", "post-hoc figure citations"),
            ("model_wrote_references", "model wrote references (cut)"), ("figures_cited_by_model", "figures cited by the model"),
            ("urls_written_by_model", "URLs written by the model"), ("mean_report_chars", "mean characters"),
            ("mean_citations_valid", "mean valid citations"), ("mean_sources_cited", "mean sources cited")]
    lines += ["", f"What the baseline did (k = {mmdr['k']} sources from `{mmdr['task']}/{mmdr['system']}`):", "",
              "| Domain | " + " | ".join(lab for _, lab in keys) + " |", "|---|" + "---|" * len(keys)]
    for name, s in baselines.items():
        lines.append(f"| {name} | " + " | ".join("" if s.get(k) is None else (f"{s[k]:.1f}" if isinstance(s[k], float) else str(s[k]))
                                                for k, _ in keys) + " |")
    write_text(out_md, "\n".join(lines) + "\n")
    frame = pd.DataFrame([{"Domain": n, "Tasks": b["n"], "Complete": b["complete"],
                           **{c: None if b[c] is None else round(float(b[c]), 2) for c in TABLE_COLUMNS},
                           **({f"{c} {k}": (round(v[i], 2) if (v := (intervals.get(n) or {}).get(c)) else None)
                               for c in INTERVAL_COLUMNS for i, k in enumerate(("ci_low", "ci_high"))} if intervals else {})}
                          for n, b in rows])
    with atomic_path(out_csv) as tmp:
        frame.to_csv(tmp, index=False)
