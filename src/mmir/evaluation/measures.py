"""Retrieval measures by name, computed with pytrec_eval (the trec_eval C code).

Names follow ir_measures: ``nDCG@k`` (Järvelin & Kekäläinen 2002, trec_eval ``ndcg_cut``), ``Recall@k``,
``P@k``, ``MAP``, ``MRR``; rel >= 1 is relevant for the binary measures. Every judged query is scored; one with
no retrieved document scores 0 and counts in the mean (ir_measures / ranx convention; MM-BRIGHT's code drops
it). README: "Evaluation protocol and measures". Tied scores: :data:`TIE_ORDERS`; the tie-aware values come from
:mod:`mmir.evaluation.ties` (McSherry & Najork 2008).
"""

from __future__ import annotations

import ir_measures
import pytrec_eval

from mmir.config.models import EvaluationConfig, default_of
from mmir.evaluation.ties import expected_query

# ir_measures measure name -> trec_eval family (cut-off measures take ``.<k>``)
_TREC = {"nDCG": "ndcg_cut", "R": "recall", "P": "P", "AP": "map", "RR": "recip_rank"}
#: how equal scores are ordered: ``pytrec_eval`` (the default) = trec_eval's own sort (score descending, then document
#: id descending by ``strcmp``: trec_eval 9 ``form_res_rels.c`` ``comp_sim_docno``; as BRIGHT's and MM-BRIGHT's
#: released scripts score, through pytrec_eval); ``run`` = the run file's rank order; ``expected`` = the mean over every
#: order of each tied group (tie-aware, McSherry & Najork 2008), in closed form
TIE_ORDERS = ("run", "pytrec_eval", "expected")
#: ``evaluation.tie_order``'s default
DEFAULT_TIE_ORDER = default_of(EvaluationConfig, "tie_order")


def trec_measure(name: str) -> tuple[str, str]:
    """``(pytrec_eval family, result key)`` for a measure name (``nDCG@10``, ``R@100``, ``P@5``, ``MAP``, ``MRR``).

    Raises:
        ValueError: a name ir_measures cannot parse, or a measure other than those.
    """
    try:
        m = ir_measures.parse_measure(name)
    except (ValueError, NameError, SyntaxError, TypeError) as exc:
        raise ValueError(f"unknown measure {name!r} (use nDCG@k, Recall@k, R@k, P@k, MAP, MRR)") from exc
    params = dict(m.params)
    cutoff = params.pop("cutoff", None)
    if m.NAME not in _TREC or params or (cutoff is None) != (m.NAME in ("AP", "RR")):
        raise ValueError(f"unsupported measure {name!r} (use nDCG@k, Recall@k, R@k, P@k, MAP, MRR)")
    fam = _TREC[m.NAME]
    return (fam, fam) if cutoff is None else (f"{fam}.{cutoff}", f"{fam}_{cutoff}")


def measure_cutoff(name: str) -> int | None:
    """The cut-off k of a measure name (``nDCG@10`` → 10), None for ``MAP`` and ``MRR``. Raises as :func:`trec_measure`."""
    fam = trec_measure(name)[0]
    return int(fam.partition(".")[2]) if "." in fam else None


def evaluate(qrels: dict[str, dict[str, int]], run: dict[str, list[tuple[str, float]]],
             measures: list[str], tie_order: str = DEFAULT_TIE_ORDER) -> dict[str, dict[str, float]]:
    """Per-query values ``{qid: {measure: value}}`` for every judged query.

    Args:
        qrels: ``{qid: {doc_id: rel}}`` (int rel; 0 = judged non-relevant).
        run: ``{qid: [(doc_id, score), ...]}`` in rank order.
        tie_order: one of :data:`TIE_ORDERS`: ``pytrec_eval`` (default: trec_eval re-sorts ties by document id,
            descending, as the released scripts; no value depends on the run file's line order), ``run`` (equal scores
            keep their run ranks) or ``expected`` (the tie-aware mean over all orders of each tied group,
            :func:`mmir.evaluation.ties.expected_query`).

    Raises:
        ValueError: an unknown ``tie_order`` or measure.
    """
    if tie_order not in TIE_ORDERS:
        raise ValueError(f"tie_order must be one of {', '.join(TIE_ORDERS)}, got {tie_order!r}")
    if tie_order == "expected":
        fams = {m: (trec_measure(m)[0].partition(".")[0], measure_cutoff(m)) for m in measures}
        return {q: expected_query(v, run[q], fams) if run.get(q) else dict.fromkeys(measures, 0.0)
                for q, v in qrels.items() if v}
    if tie_order == "run":  # strictly decreasing pseudo-scores: trec_eval then keeps the run's order
        run = {q: [(d, float(len(r) - i)) for i, (d, _) in enumerate(r)] for q, r in run.items()}
    specs = {m: trec_measure(m) for m in measures}
    grouped: dict[str, set[str]] = {}  # pytrec_eval wants "ndcg_cut.10,25" per family
    for fam, _ in specs.values():
        base, _, cut = fam.partition(".")
        grouped.setdefault(base, set()).update([cut] if cut else [])
    req = {f"{b}.{','.join(sorted(c, key=int))}" if c else b for b, c in grouped.items()}
    judged = {q: {d: int(r) for d, r in v.items()} for q, v in qrels.items() if v}
    trec_run = {q: {d: float(s) for d, s in run.get(q, [])} for q in judged}
    present = {q: r for q, r in trec_run.items() if r}
    results = pytrec_eval.RelevanceEvaluator(judged, req).evaluate(present) if present else {}
    out: dict[str, dict[str, float]] = {}
    for q in judged:
        res = results.get(q, {})
        out[q] = {m: float(res.get(key, 0.0)) for m, (_, key) in specs.items()}
    return out


def mean(per_query: dict[str, dict[str, float]], measures: list[str]) -> dict[str, float | None]:
    """Arithmetic mean over queries of each measure; None when there is no query (no number measured)."""
    n = len(per_query)
    return {m: (sum(v[m] for v in per_query.values()) / n if n else None) for m in measures}
