"""The MMDeepResearch-Bench table (``mmdr.md`` / ``mmdr.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.results import TABLE_COLUMNS, model_label
from mmir.core.io import write_text
from mmir.reporting.tables import FAILED_MARK


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.2f}"


def write_table(rows: Sequence[tuple[str, dict]], fallbacks: Mapping[str, Mapping[str, Mapping[str, int]]],
                baselines: Mapping[str, Mapping[str, Any]], mmdr: Mapping[str, Any], judge: Mapping[str, Any],
                out_md: str | Path, out_csv: str | Path, cut: Mapping[str, int] | None = None,
                llm: Mapping[str, Mapping[str, int]] | None = None) -> None:
    """``mmdr.md`` (scores per domain and over all tasks, judge-call accounting per module, what the baseline
    did) and ``mmdr.csv`` (the score rows). ``llm`` maps a row name to its ``llm_calls`` / ``llm_failures``
    (writer and judge together); a row with failures gets :data:`~mmir.reporting.tables.FAILED_MARK` and a footnote."""
    import pandas as pd

    from mmir.core.io import atomic_path

    head = ["Domain", "Tasks", "Complete", *TABLE_COLUMNS]
    lines = [
        f"# MMDeepResearch-Bench: {model_label(mmdr)}", "",
        f"Judge: `{judge.get('model')}` ({judge.get('backend')}"
        f"{', images shown to it as text: ' + judge['image_input'].split(':', 1)[-1] if judge.get('image_input') else ''}). "
        "Scores 0-100; means over complete tasks (every component present). Overall = 0.2 FLAE + 0.5 TRACE + 0.3 MOSAIC; "
        "TRACE = 0.6 EVI + 0.4 VEF; Vef. = pass rate x 100; Read./Insh./Stru. are FLAE parts, Con./Cov./Fid. EVI parts, "
        "Sem./Acc./VQA MOSAIC diagnostics (blank: no task had that item type).", "",
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
                           **{c: None if b[c] is None else round(float(b[c]), 2) for c in TABLE_COLUMNS}} for n, b in rows])
    with atomic_path(out_csv) as tmp:
        frame.to_csv(tmp, index=False)
