"""The M2RAG table (``m2rag.md`` / ``m2rag.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.benchmarks.m2rag.aggregate import ALL_METRICS, IMAGE_METRICS
from mmir.benchmarks.m2rag.store import METRIC_LABELS
from mmir.core.io import write_text
from mmir.reporting.tables import FAILED_MARK


def write_table(rows: Sequence[Mapping[str, Any]], out_md: str | Path, out_csv: str | Path) -> None:
    """``m2rag.md`` (value with n and failed judgements per cell; :data:`~mmir.reporting.tables.FAILED_MARK` on rows
    with failed LLM calls, counted per row under the table, and the knowledge-base scoring failures per source) and
    ``m2rag.csv`` (one column each), atomically."""
    import pandas as pd

    write_text(out_csv, pd.DataFrame(rows).to_csv(index=False))
    head = ["dataset", "KB source", "strategy", "generator"] + [METRIC_LABELS[m] for m in ALL_METRICS] + \
        ["Overall", "answers (excluded)"]
    lines = ["# M2RAG (spec §6): eight metrics x100, pooled over domains",
             "",
             "Each cell: value (n scored; failed judgements). Image Coherence/Helpfulness/Reference are pooled over "
             "output images ('no output image': the strategy placed none, nothing to judge), the others over answers; "
             "Image Recall is 1.0 for an answer whose inputs hold no image scored >= the recall threshold (counted "
             "'without important image'); Overall = mean of the eight (n/a when one has no value). "
             "Failed generations are excluded and counted.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["dataset"], r["source"], r["strategy"] + (FAILED_MARK if r.get("llm_failures") else ""), r["generator"]]
        for m in ALL_METRICS:
            n, failed = r[f"{m}_n"], r[f"{m}_failures"]
            if m in IMAGE_METRICS and n == 0 and failed == 0:
                cells.append("no output image")
                continue
            v = "n/a" if r[m] is None else f"{r[m]:.1f}"
            extra = f"; {r['image_recall_vacuous']} without important image" if m == "image_recall" else ""
            cells.append(f"{v} ({n}; {failed} failed{extra})")
        cells += ["n/a" if r["overall"] is None else f"{r['overall']:.1f}", f"{r['answers']} ({r['excluded']})"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    bad = [r for r in rows if r.get("llm_failures")]
    if bad:
        lines += ["", f"{FAILED_MARK} rows with failed LLM calls (no reply, or a reply the parser rejected; a rerun "
                  "retries them until their number stops changing). Per row, generation and every judgement together; "
                  "a cell counts its metric's failed judgements instead: a failed call, or a parsed reply the metric "
                  "cannot use (e.g. fewer faithfulness verdicts than statements), so cells and this count can differ; "
                  "a failed generation is an excluded answer: "
                  + "; ".join(f"{r['dataset']}/{r['source']}/{r['strategy']}: {r['llm_failures']} of {r['llm_calls']} calls"
                              for r in bad)]
    # the knowledge bases are shared by a source's strategies: their scoring calls are counted once per source
    kb = {(r["dataset"], r["source"]): (r.get("kb_llm_failures", 0), r.get("kb_llm_calls", 0)) for r in rows}
    kb_bad = {k: v for k, v in kb.items() if v[0]}
    if kb_bad:
        lines += ["", "Knowledge-base scoring (m2rag_kb: chunk and image relevance, before any answer) had failed calls "
                  "(a rerun retries them until their number stops changing); a failed score leaves its chunk or image "
                  "unscored: "
                  + "; ".join(f"{d}/{s}: {f} of {n} calls" for (d, s), (f, n) in sorted(kb_bad.items()))]
    judges = sorted({r["judge"] for r in rows})
    lines += ["", f"Judge: {', '.join(judges) or 'n/a'}; domains: "
              + "; ".join(f"{r['dataset']}/{r['source']}/{r['strategy']}: {r['domains']}" for r in rows)]
    write_text(out_md, "\n".join(lines) + "\n")
