"""Measures checked against an independent computation: nDCG by hand, and ir_measures on random runs."""

import math
import random

import ir_measures
import pytest

from mmir.evaluation.measures import evaluate, mean, trec_measure


def ndcg_by_hand(qrels: dict[str, int], ranking: list[str], k: int) -> float:
    dcg = sum(qrels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((r for r in qrels.values() if r > 0), reverse=True)
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal[:k]))
    return dcg / idcg if idcg else 0.0


def test_ndcg_graded_by_hand():
    qrels = {"q": {"a": 2, "b": 1, "c": 0, "d": 1}}
    run = {"q": [("c", 9.0), ("b", 8.0), ("x", 7.0), ("a", 6.0)]}
    got = evaluate(qrels, run, ["nDCG@10", "nDCG@2", "P@2", "Recall@2", "MRR", "MAP"])["q"]
    assert got["nDCG@10"] == pytest.approx(ndcg_by_hand(qrels["q"], ["c", "b", "x", "a"], 10), abs=1e-6)
    assert got["nDCG@2"] == pytest.approx(ndcg_by_hand(qrels["q"], ["c", "b"], 2), abs=1e-6)
    assert got["P@2"] == pytest.approx(0.5)
    assert got["Recall@2"] == pytest.approx(1 / 3)
    assert got["MRR"] == pytest.approx(0.5)
    assert got["MAP"] == pytest.approx((1 / 2 + 2 / 4) / 3)


def test_query_without_results_scores_zero_and_counts():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": [("a", 1.0)], "q3": [("z", 1.0)]}
    pq = evaluate(qrels, run, ["nDCG@10", "MAP"])
    assert set(pq) == {"q1", "q2"}  # q3 has no judgments: ignored
    assert pq["q2"] == {"nDCG@10": 0.0, "MAP": 0.0}
    assert mean(pq, ["nDCG@10"])["nDCG@10"] == pytest.approx(0.5)


def test_matches_ir_measures_on_random_runs():
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(60)]
    qrels, run = {}, {}
    for q in range(25):
        qid = f"q{q}"
        qrels[qid] = {d: rng.choice([0, 1, 1, 2]) for d in rng.sample(docs, 8)}
        scores = rng.sample(range(10_000), 40)  # distinct scores: no tie-order ambiguity
        run[qid] = sorted(zip(rng.sample(docs, 40), map(float, scores)), key=lambda x: -x[1])
    names = ["nDCG@10", "nDCG@5", "Recall@10", "P@5", "MAP", "MRR"]
    ours = mean(evaluate(qrels, run, names), names)
    ref_measures = [ir_measures.parse_measure(m) for m in ["nDCG@10", "nDCG@5", "R@10", "P@5", "AP", "RR"]]
    ref_qrels = [ir_measures.Qrel(q, d, r) for q, v in qrels.items() for d, r in v.items()]
    ref_run = [ir_measures.ScoredDoc(q, d, s) for q, v in run.items() for d, s in v]
    ref = ir_measures.calc_aggregate(ref_measures, ref_qrels, ref_run)
    for name, m in zip(names, ref_measures):
        assert ours[name] == pytest.approx(ref[m], abs=1e-9), name
    # and nDCG@10 per query by hand
    for q in qrels:
        assert evaluate({q: qrels[q]}, {q: run[q]}, ["nDCG@10"])[q]["nDCG@10"] == pytest.approx(
            ndcg_by_hand(qrels[q], [d for d, _ in run[q]], 10), abs=1e-6)


def test_measure_names():
    assert trec_measure("nDCG@10") == ("ndcg_cut.10", "ndcg_cut_10")
    assert trec_measure("R@100") == ("recall.100", "recall_100")
    assert trec_measure("MRR") == ("recip_rank", "recip_rank")
    with pytest.raises(ValueError, match="unknown measure"):
        trec_measure("F1@3")
