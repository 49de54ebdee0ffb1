"""Score one run file against its qrels: per-query values (TSV) and the domain means (JSON), with the tie-aware means
beside them and the ties counted; a domain with no scorable query gets no number, and the reason."""

from __future__ import annotations

from pathlib import Path

from mmir.core.io import write_json, write_text
from mmir.data.trec import read_qrels
from mmir.evaluation.measures import DEFAULT_TIE_ORDER, evaluate, mean, measure_cutoff
from mmir.evaluation.ties import tie_counts
from mmir.retrieval.runs import Run, read_run


def unscorable(qrels: dict[str, dict[str, int]], qrels_path: str | Path) -> str | None:
    """Why no measure of these qrels would be a measurement, or None when one is: no judged query, or no judged query
    with a relevant item (every label <= 0: every measure is 0 by construction)."""
    judged = [v for v in qrels.values() if v]
    if not judged:
        return f"no scorable query: {qrels_path} judges no query"
    if not any(r > 0 for v in judged for r in v.values()):
        return f"no scorable query: no query of {qrels_path} has a relevant item (all {len(judged)} have only label 0)"
    return None


def tie_summary(qrels: dict[str, dict[str, int]], run: Run, measures: list[str], per_query: dict, other: dict) -> dict:
    """Per measure: ``depth`` (its cut-off; None = the whole run), ``tied_items`` (items of each judged query's top
    ``depth`` sharing their score with another retrieved item, summed), ``queries_with_ties`` and ``queries_changed``
    (queries whose value differs between ``per_query`` and ``other``, the two tie orders)."""
    out = {}
    for m in measures:
        k = measure_cutoff(m)
        counts = [tie_counts(run[q], k) for q in per_query if run.get(q)]
        out[m] = {"depth": k, "tied_items": sum(counts), "queries_with_ties": sum(c > 0 for c in counts),
                  "queries_changed": sum(abs(per_query[q][m] - other[q][m]) > 1e-12 for q in per_query)}
    return out


def read_scored(run_path: str | Path, qrels_path: str | Path, binary: bool = False) -> tuple[Run, dict[str, dict[str, int]]]:
    """``(run, qrels)`` as read (``binary``: rel > 0 → 1).

    Raises:
        DataError: a malformed run or qrels line (file and line named).
    """
    qrels = read_qrels(qrels_path)
    if binary:
        qrels = {q: {d: int(r > 0) for d, r in v.items()} for q, v in qrels.items()}
    return read_run(run_path), qrels


def score_run(run_path: str | Path, qrels_path: str | Path, measures: list[str], out_json: str | Path,
              out_perquery: str | Path, meta: dict | None = None, binary: bool = False,
              tie_order: str = DEFAULT_TIE_ORDER) -> dict:
    """Evaluate ``run_path``; write ``out_json`` (means, counts, meta) and ``out_perquery`` (``qid<TAB>measure<TAB>value``).

    ``binary``: rel > 0 → 1. ``tie_order``: :data:`mmir.evaluation.measures.TIE_ORDERS`. Returns the JSON dict:
    ``measures`` (the means under ``tie_order``), ``tie_orders`` (the means under ``run`` and ``expected``, the
    tie-aware one, whatever ``tie_order`` is), ``ties`` (:func:`tie_summary`: against the tie-aware values, or the run
    order's when ``tie_order`` is ``expected``) and the counts ``queries``, ``queries_without_results`` (scored 0),
    ``run_queries_without_qrels`` (ignored). With no scorable query (:func:`unscorable`) every measure is None,
    ``ties`` is empty, ``unscored`` says why and the per-query file has its header only.
    """
    run, qrels = read_scored(run_path, qrels_path, binary)
    reason = unscorable(qrels, qrels_path)
    by_order = {o: evaluate(qrels, run, measures, o) for o in dict.fromkeys([tie_order, "run", "expected"])}
    per_query = {} if reason else by_order[tie_order]
    lines = ["qid\tmeasure\tvalue"] + [f"{q}\t{m}\t{v[m]!r}" for q in sorted(per_query) for m in measures for v in [per_query[q]]]
    write_text(out_perquery, "\n".join(lines) + "\n")
    judged = by_order["run"]
    other = by_order["run" if tie_order == "expected" else "expected"]
    summary = {
        **(meta or {}),
        "measures": mean(per_query, measures),
        "queries": len(per_query),
        "queries_without_results": sum(1 for q in judged if not run.get(q)),
        "run_queries_without_qrels": sum(1 for q in run if q not in qrels),
        "tie_order": tie_order,
        "tie_orders": {o: mean({} if reason else by_order[o], measures) for o in ("run", "expected")},
        "ties": {} if reason else tie_summary(qrels, run, measures, by_order[tie_order], other),
        **({"unscored": reason} if reason else {}),
    }
    write_json(out_json, summary)
    return summary


def measure_text(summary: dict, digits: int = 4) -> str:
    """Every measure of a :func:`score_run` summary at ``digits`` decimals, the tie-aware value in brackets where it
    prints differently (the run order's when the values are tie-aware): ``nDCG@10 = 0.4210 (tie-aware 0.4187), ...``."""
    other = "run" if summary.get("tie_order") == "expected" else "expected"
    name = "run order" if other == "run" else "tie-aware"
    alt = summary.get("tie_orders", {}).get(other, {})
    parts = []
    for m, v in summary["measures"].items():
        text = "–" if v is None else f"{v:.{digits}f}"
        a = alt.get(m)
        parts.append(f"{m} = {text}" + (f" ({name} {a:.{digits}f})" if v is not None and a is not None
                                        and f"{a:.{digits}f}" != text else ""))
    return ", ".join(parts)
