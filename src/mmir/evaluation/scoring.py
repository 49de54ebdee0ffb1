"""Score one run file against its qrels: per-query values (TSV) and the domain means (JSON)."""

from __future__ import annotations

from pathlib import Path

from mmir.core.io import write_json, write_text
from mmir.data.trec import read_qrels
from mmir.evaluation.measures import evaluate, mean
from mmir.retrieval.runs import Run, read_run


def score_run_file(run_path: str | Path, qrels_path: str | Path, measures: list[str], binary: bool = False,
                   tie_order: str = "run") -> tuple[dict[str, dict[str, float]], Run, dict[str, dict[str, int]]]:
    """``(per_query, run, qrels)``: pytrec_eval's ``{qid: {measure: value}}`` for every judged query of ``qrels_path``
    (:func:`mmir.evaluation.measures.evaluate`), with the run and qrels as read. ``binary``: rel > 0 → 1.

    Raises:
        DataError: a malformed run or qrels line (file and line named).
    """
    qrels = read_qrels(qrels_path)
    if binary:
        qrels = {q: {d: int(r > 0) for d, r in v.items()} for q, v in qrels.items()}
    run = read_run(run_path)
    return evaluate(qrels, run, measures, tie_order), run, qrels


def score_run(run_path: str | Path, qrels_path: str | Path, measures: list[str], out_json: str | Path,
              out_perquery: str | Path, meta: dict | None = None, binary: bool = False, tie_order: str = "run") -> dict:
    """Evaluate ``run_path``; write ``out_json`` (means, counts, meta) and ``out_perquery`` (``qid<TAB>measure<TAB>value``).

    ``binary``: rel > 0 → 1. Returns the JSON dict; its counts: ``queries``, ``queries_without_results`` (scored 0),
    ``run_queries_without_qrels`` (ignored).
    """
    per_query, run, qrels = score_run_file(run_path, qrels_path, measures, binary, tie_order)
    lines = ["qid\tmeasure\tvalue"] + [f"{q}\t{m}\t{v[m]!r}" for q in sorted(per_query) for m in measures for v in [per_query[q]]]
    write_text(out_perquery, "\n".join(lines) + "\n")
    summary = {
        **(meta or {}),
        "measures": mean(per_query, measures),
        "queries": len(per_query),
        "queries_without_results": sum(1 for q in per_query if not run.get(q)),
        "run_queries_without_qrels": sum(1 for q in run if q not in qrels),
        "tie_order": tie_order,
    }
    write_json(out_json, summary)
    return summary
