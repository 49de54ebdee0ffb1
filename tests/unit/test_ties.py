"""Tie-aware measures (McSherry & Najork 2008) against brute force: pytrec_eval on every order of the tied groups,
averaged; and how pytrec_eval itself orders ties."""

import itertools
import math
import random

import numpy as np
import pytest

from mmir.evaluation.measures import evaluate, mean
from mmir.evaluation.ties import score_order, tied_items

MEASURES = ["nDCG@10", "nDCG@5", "nDCG@3", "nDCG@1", "P@5", "P@10", "Recall@10", "Recall@3", "MAP", "MRR"]


def brute_force(qrels: dict[str, int], ranking: list[tuple[str, float]], measures: list[str]) -> dict[str, float]:
    """Mean of pytrec_eval (run order) over every order of every tied group of ``ranking`` (already in score order)."""
    groups = [[d for d, _ in g] for _, g in itertools.groupby(ranking, key=lambda x: x[1])]
    total, n = dict.fromkeys(measures, 0.0), 0
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        flat = [d for g in orders for d in g]
        got = evaluate({"q": qrels}, {"q": [(d, float(len(flat) - i)) for i, d in enumerate(flat)]}, measures, "run")["q"]
        total = {m: total[m] + got[m] for m in measures}
        n += 1
    return {m: v / n for m, v in total.items()}


def test_graded_labels_and_a_group_straddling_the_cutoff():
    """Labels 2/1/0; a 3-item group at the top, a 4-item group over ranks 9-12 (cut-off 10), relevant items unretrieved."""
    qrels = {"a": 2, "b": 0, "c": 1, "e": 1, "h": 2, "i": 1, "j": 0, "k": 0, "u1": 2, "u2": 1}
    scores = [("a", 9), ("b", 9), ("c", 9), ("d", 8), ("e", 7), ("f", 6), ("g", 5), ("z", 4.5),
              ("h", 4), ("i", 4), ("j", 4), ("k", 4), ("l", 3), ("m", 2)]
    ranking = [(d, float(s)) for d, s in scores]
    got = evaluate({"q": qrels}, {"q": ranking}, MEASURES, "expected")["q"]
    want = brute_force(qrels, ranking, MEASURES)
    print({m: (round(got[m], 6), round(want[m], 6)) for m in MEASURES})
    for m in MEASURES:
        assert got[m] == pytest.approx(want[m], abs=1e-12), m
    # the ties matter: run order and trec_eval's order give other values
    run = evaluate({"q": qrels}, {"q": ranking}, ["nDCG@10"], "run")["q"]["nDCG@10"]
    trec = evaluate({"q": qrels}, {"q": ranking}, ["nDCG@10"], "pytrec_eval")["q"]["nDCG@10"]
    assert abs(run - got["nDCG@10"]) > 1e-3 and abs(trec - got["nDCG@10"]) > 1e-3


def test_random_tied_runs_match_brute_force():
    """Small runs with scores drawn from a few values (groups of 1-5 items), graded qrels, several queries."""
    rng = random.Random(3)
    qrels, run, checked = {}, {}, 0
    while checked < 12:
        n = rng.randint(4, 13)
        docs = [f"d{i}" for i in range(n)]
        levels = sorted(rng.sample(range(20), rng.randint(2, 6)), reverse=True)
        ranking = sorted(((d, float(rng.choice(levels))) for d in docs), key=lambda x: -x[1])
        sizes = [len(list(g)) for _, g in itertools.groupby(ranking, key=lambda x: x[1])]
        if math.prod(math.factorial(s) for s in sizes) > 3000:
            continue
        q = {d: rng.choice([0, 0, 1, 2]) for d in rng.sample(docs, rng.randint(1, n))} | {"unretrieved": rng.choice([0, 1, 2])}
        got = evaluate({"q": q}, {"q": ranking}, MEASURES, "expected")["q"]
        want = brute_force(q, ranking, MEASURES)
        for m in MEASURES:
            assert got[m] == pytest.approx(want[m], abs=1e-12), (checked, m, q, ranking)
        qrels[f"q{checked}"], run[f"q{checked}"] = q, ranking
        checked += 1
    # per query through one call, as the score step evaluates a domain
    per_query = evaluate(qrels, run, MEASURES, "expected")
    assert per_query["q5"]["MAP"] == pytest.approx(brute_force(qrels["q5"], run["q5"], ["MAP"])["MAP"], abs=1e-12)


def test_without_ties_every_order_gives_the_same_values():
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(50)]
    qrels = {f"q{i}": {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, 8)} for i in range(10)}
    run = {q: sorted(zip(rng.sample(docs, 30), map(float, rng.sample(range(1000), 30))), key=lambda x: -x[1]) for q in qrels}
    by_order = {o: mean(evaluate(qrels, run, MEASURES, o), MEASURES) for o in ("run", "pytrec_eval", "expected")}
    for m in MEASURES:
        assert by_order["expected"][m] == pytest.approx(by_order["run"][m], abs=1e-12)
        assert by_order["pytrec_eval"][m] == pytest.approx(by_order["run"][m], abs=1e-12)


def test_pytrec_eval_orders_ties_by_document_id_descending():
    """Checked, not assumed: trec_eval sorts equal scores by docno descending, whatever the run's order."""
    qrels = {"q": {"b": 1}}
    for listed in (["a", "b", "c", "d"], ["d", "c", "b", "a"], ["b", "a", "d", "c"]):
        ranking = [(d, 1.0) for d in listed]
        assert evaluate(qrels, {"q": ranking}, ["MRR"], "pytrec_eval")["q"]["MRR"] == pytest.approx(1 / 3)  # d, c, b, a
        assert evaluate(qrels, {"q": ranking}, ["MRR"], "run")["q"]["MRR"] == pytest.approx(1 / (listed.index("b") + 1))
        assert evaluate(qrels, {"q": ranking}, ["MRR"], "expected")["q"]["MRR"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_tied_items_count_the_top_k_items_sharing_a_score():
    ids, group = score_order([("a", 3.0), ("b", 2.0), ("c", 2.0), ("d", 1.0), ("e", 0.5), ("f", 0.5)])
    assert ids == ["a", "b", "c", "d", "e", "f"] and group.tolist() == [0, 1, 1, 2, 3, 3]
    assert [tied_items(group, k) for k in (1, 2, 3, 4, 5, None)] == [0, 1, 2, 2, 3, 4]
    # a run not in score order is ranked by score first, ties kept in run order
    ids, group = score_order([("x", 1.0), ("y", 2.0), ("z", 1.0)])
    assert ids == ["y", "x", "z"] and tied_items(group, 1) == 0 and tied_items(group, 2) == 1
    assert tied_items(np.zeros(0, np.int64), 10) == 0


def test_unknown_tie_order_is_refused():
    with pytest.raises(ValueError, match="tie_order must be one of run, pytrec_eval, expected"):
        evaluate({"q": {"a": 1}}, {"q": [("a", 1.0)]}, ["nDCG@10"], "random")
