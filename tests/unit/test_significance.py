"""Significance tests, intervals and corrections (mmir.evaluation.significance) against independent computations:
hand-written permutation / bootstrap loops, scipy's permutation_test and bootstrap, Holm and BH by hand, and the
exact (enumerated) distribution of the two-level bootstrap on a tiny fixture."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from mmir.core.errors import ConfigError
from mmir.evaluation import significance as S


def _mc_tol(p: float, b: int) -> float:
    """4 standard errors of a Monte-Carlo p-value estimated from ``b`` draws (plus a small floor)."""
    return 4 * math.sqrt(max(p * (1 - p), 1e-4) / b) + 1e-3


@pytest.fixture
def three_domains():
    rng = np.random.default_rng(7)
    sizes = (8, 12, 5)
    a = [rng.random(n) for n in sizes]
    b = [x - 0.06 + rng.normal(0, 0.15, x.size) for x in a]
    return a, b


def test_stratified_permutation_test_matches_a_hand_written_loop():
    """The macro (Avg.) test: flip signs within each domain, average the domain means; same p-value as a plain
    Python loop that does exactly that, within Monte-Carlo error, for a fixed seed (55 differences: sampled)."""
    rng = np.random.default_rng(7)
    a = [rng.random(n) for n in (20, 25, 10)]
    b = [x - 0.03 + rng.normal(0, 0.15, x.size) for x in a]
    ours = S.sign_flip_test(a, b, resamples=20000, rng=S.rng_for(0, "t"))
    assert not ours.exact and ours.resamples == 20000
    diffs = [[x - y for x, y in zip(da, db)] for da, db in zip(a, b)]
    observed = sum(sum(d) / len(d) for d in diffs) / len(diffs)
    r = random.Random(123)
    n_hand, hits = 20000, 0
    for _ in range(n_hand):
        t = sum(sum(v if r.random() < 0.5 else -v for v in d) / len(d) for d in diffs) / len(diffs)
        hits += abs(t) >= abs(observed) - 1e-12
    p_hand = (1 + hits) / (n_hand + 1)
    print(f"stratified sign-flip p: ours {ours.p:.4f}, hand loop {p_hand:.4f}, observed diff {observed:.4f}")
    assert ours.statistic == pytest.approx(observed)
    assert abs(ours.p - p_hand) < _mc_tol(p_hand, n_hand)
    # ... and it really is stratified: pooling the queries into one domain gives another statistic
    pooled = S.sign_flip_test(np.concatenate(a), np.concatenate(b), resamples=2000)
    assert pooled.statistic != pytest.approx(ours.statistic)


def test_exact_enumeration_equals_a_hand_enumeration():
    a = [np.array([0.9, 0.5, 0.4]), np.array([0.7, 0.2])]
    b = [np.array([0.1, 0.5, 0.3]), np.array([0.3, 0.1])]
    res = S.sign_flip_test(a, b, resamples=10000)
    assert res.exact and res.resamples == 2 ** 4  # the zero difference is not flipped
    diffs = [[x - y for x, y in zip(da, db)] for da, db in zip(a, b)]
    obs = sum(sum(d) / len(d) for d in diffs) / 2
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=5):
        s1, s2 = signs[:3], signs[3:]
        t = (sum(s * d for s, d in zip(s1, diffs[0])) / 3 + sum(s * d for s, d in zip(s2, diffs[1])) / 2) / 2
        hits += abs(t) >= abs(obs) - 1e-12
        total += 1
    print(f"exact p: ours {res.p:.5f}, hand {hits / total:.5f}")
    assert res.p == pytest.approx(hits / total)


def _brute_force_p(diffs: list[np.ndarray]) -> float:
    """Every sign pattern of the stratified statistic, enumerated as bit patterns in blocks (no halves, no sorting)."""
    w = np.concatenate([d / (d.size * len(diffs)) for d in diffs])
    obs = w.sum()
    w = w[w != 0]
    hits, block = 0, 1 << 16
    for start in range(0, 2 ** w.size, block):
        codes = np.arange(start, min(start + block, 2 ** w.size))
        t = (1 - 2 * ((codes[:, None] >> np.arange(w.size)) & 1)) @ w
        hits += int((np.abs(t) >= abs(obs) - 1e-12 * max(1.0, abs(obs))).sum())
    return hits / 2 ** w.size


def test_exact_test_beyond_2_20_patterns_equals_a_brute_force_enumeration_and_scipy():
    """N = 21 and 22 non-zero differences (2**21, 2**22 patterns; the test was sampled above 10,000 before issue 38):
    exact p equal to a plain enumeration, also with many equal |differences| (per-query values on a grid, as nDCG@1
    or P@5 give) where T* equals |T| on many patterns; and to scipy's exact permutation_test at N = 16."""
    rng = np.random.default_rng(11)
    a = rng.random(21)
    b = a - 0.05 + rng.normal(0, 0.2, 21)
    ours = S.sign_flip_test(a, b)
    assert ours.exact and ours.resamples == 2 ** 21
    print(f"exact p (N=21): ours {ours.p!r}")
    assert ours.p == pytest.approx(_brute_force_p([a - b]), abs=1e-15)
    grid_a = [rng.choice([0, 0.2, 0.4, 1.0], size=n) for n in (12, 10)]
    grid_b = [x - rng.choice([-0.4, -0.2, 0.2, 0.4, 0.6], size=x.size) for x in grid_a]
    got = S.sign_flip_test(grid_a, grid_b)
    assert got.exact and got.resamples == 2 ** 22
    assert got.p == pytest.approx(_brute_force_p([x - y for x, y in zip(grid_a, grid_b)]), abs=1e-15)
    ref = stats.permutation_test((a[:16], b[:16]), lambda x, y, axis: np.mean(x - y, axis=axis),
                                 permutation_type="samples", vectorized=True, n_resamples=np.inf)
    assert S.sign_flip_test(a[:16], b[:16]).p == pytest.approx(ref.pvalue, abs=1e-12)


def test_one_domain_permutation_test_agrees_with_scipy():
    rng = np.random.default_rng(3)
    a = rng.random(40)
    b = a - 0.04 + rng.normal(0, 0.12, 40)
    a, b = np.concatenate([a, a[:5]]), np.concatenate([b, b[:5] + 0.01])  # 45 differences: sampled
    ours = S.sign_flip_test(a, b, resamples=20000, rng=S.rng_for(1))
    assert not ours.exact
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                 vectorized=True, n_resamples=20000, rng=np.random.default_rng(5))
    print(f"one-domain sign-flip p: ours {ours.p:.4f}, scipy.stats.permutation_test {ref.pvalue:.4f}")
    assert abs(ours.p - ref.pvalue) < _mc_tol(ref.pvalue, 20000) * 1.5


def test_paired_bootstrap_test_matches_a_hand_written_loop(three_domains):
    a, b = three_domains
    ours = S.paired_bootstrap_test(a, b, resamples=20000, rng=S.rng_for(0))
    diffs = [[x - y for x, y in zip(da, db)] for da, db in zip(a, b)]
    obs = sum(sum(d) / len(d) for d in diffs) / len(diffs)
    centred = [[v - sum(d) / len(d) for v in d] for d in diffs]
    r = random.Random(9)
    n_hand, hits = 20000, 0
    for _ in range(n_hand):
        t = sum(sum(r.choice(c) for _ in c) / len(c) for c in centred) / len(centred)
        hits += abs(t) >= abs(obs) - 1e-12
    p_hand = (1 + hits) / (n_hand + 1)
    print(f"stratified paired bootstrap p: ours {ours.p:.4f}, hand loop {p_hand:.4f}")
    assert abs(ours.p - p_hand) < _mc_tol(p_hand, n_hand)


def test_identical_systems_give_p_one_and_seeds_repeat(three_domains):
    a, _ = three_domains
    assert S.sign_flip_test(a, a).p == 1.0 and S.paired_bootstrap_test(a, a).p == 1.0
    _, b = three_domains
    p1 = S.paired_test(a, b, test="bootstrap", resamples=3000, rng=S.rng_for(0, "x")).p
    p2 = S.paired_test(a, b, test="bootstrap", resamples=3000, rng=S.rng_for(0, "x")).p
    assert p1 == p2
    with pytest.raises(ValueError, match="unknown test"):
        S.paired_test(a, b, test="t-test")
    with pytest.raises(ValueError, match="same strata"):
        S.sign_flip_test(a, b[:2])


def test_holm_and_bh_against_hand_computed_values():
    p = [0.01, 0.04, 0.03, float("nan"), 0.005]
    # Holm, m = 4: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005=0.02, 3*0.01=0.03, 2*0.03=0.06, 1*0.04 -> max(0.06, 0.04)
    holm = S.adjust_pvalues(p, "holm")
    assert np.allclose(holm, [0.03, 0.06, 0.06, np.nan, 0.02], equal_nan=True)
    # BH: p_(i) * m / i then the running minimum from the top: 0.02, 0.02, 0.04, 0.04
    bh = S.adjust_pvalues(p, "bh")
    assert np.allclose(bh, [0.02, 0.04, 0.04, np.nan, 0.02], equal_nan=True)
    assert np.allclose(S.adjust_pvalues(p, "none"), p, equal_nan=True)
    assert np.allclose(S.adjust_pvalues([0.5, 0.9], "holm"), [1.0, 1.0])
    print("holm", holm, "bh", bh)
    with pytest.raises(ValueError):
        S.adjust_pvalues([1.5], "holm")
    with pytest.raises(ValueError, match="unknown correction"):
        S.adjust_pvalues([0.1], "bonferroni-ish")


def test_intervals_contain_the_mean_shrink_with_n_and_agree_with_scipy():
    rng = np.random.default_rng(11)
    small, large = rng.random(25), rng.random(2500)
    widths = {}
    for name, x in (("small", small), ("large", large)):
        ci = S.bootstrap_interval(x, resamples=5000, rng=S.rng_for(0, name))
        assert ci.low <= x.mean() <= ci.high and ci.estimate == pytest.approx(x.mean())
        widths[name] = ci.high - ci.low
        ref = stats.bootstrap((x,), np.mean, n_resamples=5000, method="percentile", rng=np.random.default_rng(1))
        assert ci.low == pytest.approx(ref.confidence_interval.low, abs=0.25 * widths[name] / 4)
        assert ci.high == pytest.approx(ref.confidence_interval.high, abs=0.25 * widths[name] / 4)
    print(f"95% interval widths: n=25 {widths['small']:.4f}, n=2500 {widths['large']:.4f}")
    assert widths["large"] < widths["small"] / 5  # ~1/sqrt(100) = 1/10
    # stratified (macro) interval: centred on the mean of domain means; BCa through scipy, percentile fallback
    doms = [rng.random(30), rng.random(4) * 0.2, np.array([0.5])]
    ci = S.bootstrap_interval(doms, resamples=4000)
    assert ci.low <= np.mean([d.mean() for d in doms]) <= ci.high
    assert S.bootstrap_interval(doms, method="bca").method == "percentile"  # a one-query domain: BCa undefined
    bca = S.bootstrap_interval(doms[:2], method="bca", resamples=4000)
    assert bca.method == "bca" and bca.low <= bca.estimate <= bca.high
    const = S.bootstrap_interval(np.full(10, 0.3))
    assert const.low == const.high == pytest.approx(0.3)
    with pytest.raises(ValueError, match="finite"):
        S.bootstrap_interval(np.array([0.1, np.nan]))


def _exact_two_level(answers: list[np.ndarray], repeats: str):
    """Brute force: every equally likely outcome of one replicate (answers drawn, then judgings), its probability."""
    n = len(answers)
    atoms: dict[float, float] = {}
    for draw in itertools.product(range(n), repeat=n):
        if repeats == "one":
            for picks in itertools.product(*[range(answers[i].size) for i in draw]):
                t = np.mean([answers[i][j] for i, j in zip(draw, picks)])
                w = n ** -n * np.prod([1 / answers[i].size for i in draw])
                atoms[round(t, 12)] = atoms.get(round(t, 12), 0) + w
        else:
            per = []
            for i in draw:
                r = answers[i].size
                per.append([(np.mean([answers[i][j] for j in js]), r ** -r) for js in itertools.product(range(r), repeat=r)])
            for combo in itertools.product(*per):
                t = np.mean([v for v, _ in combo])
                w = n ** -n * np.prod([p for _, p in combo])
                atoms[round(t, 12)] = atoms.get(round(t, 12), 0) + w
    values = np.array(sorted(atoms))
    probs = np.array([atoms[v] for v in values])
    return values, probs


@pytest.mark.parametrize("repeats", ["one", "all"])
def test_two_level_interval_against_brute_force(repeats):
    """Tiny fixture: 3 answers, judged twice (one judging of the third failed). The Monte-Carlo replicates have the
    exact distribution's mean and variance, and the interval ends are its 2.5% / 97.5% quantiles."""
    judged = [[60.0, 80.0], [20.0, 30.0], [90.0, float("nan")]]
    answers = [np.array([v for v in a if v == v]) for a in judged]
    values, probs = _exact_two_level(answers, repeats)
    assert probs.sum() == pytest.approx(1.0)
    mean = float((values * probs).sum())
    var = float(((values - mean) ** 2 * probs).sum())
    est = S.judged_estimate([judged])
    assert est == pytest.approx(np.mean([70, 25, 90])) == pytest.approx(mean)
    # the variance formula of the docstring, B + W (one) or B + W/r (all), over n, with 1/n and 1/r divisors
    means = np.array([a.mean() for a in answers])
    within = np.array([a.var() for a in answers])
    formula = (means.var() + (within.mean() if repeats == "one" else (within / [a.size for a in answers]).mean())) / 3
    assert var == pytest.approx(formula)
    reps = S.two_level_replicates([judged], resamples=200_000, repeats=repeats, rng=S.rng_for(0))
    print(f"two-level ({repeats}): exact mean {mean:.3f} var {var:.3f}; Monte-Carlo mean {reps.mean():.3f} var {reps.var():.3f}")
    assert reps.mean() == pytest.approx(mean, abs=4 * math.sqrt(var / reps.size))
    assert reps.var() == pytest.approx(var, rel=0.02)
    ci = S.two_level_interval([judged], resamples=50_000, repeats=repeats, rng=S.rng_for(1))
    cdf = np.cumsum(probs)
    for end, q in ((ci.low, 0.025), (ci.high, 0.975)):
        below = cdf[values < end - 1e-9][-1] if (values < end - 1e-9).any() else 0.0
        upto = cdf[values <= end + 1e-9][-1]
        assert below <= q + 0.01 and upto >= q - 0.01, (end, below, upto)
    assert ci.low <= est <= ci.high


def test_one_judging_per_answer_is_the_plain_bootstrap():
    rng = np.random.default_rng(2)
    x = rng.random(50) * 100
    a = S.two_level_replicates([[[v] for v in x]], resamples=20000, rng=S.rng_for(0))
    assert a.std() == pytest.approx(x.std() / math.sqrt(x.size), rel=0.03)


def _scores(rows: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, pd.Series]]:
    return {s: {d: pd.Series(v, index=[f"q{i}" for i in range(len(v))]) for d, v in doms.items()} for s, doms in rows.items()}


def test_table_statistics_baseline_family_and_independent_seeds():
    rng = np.random.default_rng(4)
    base = {"d1": rng.random(30).tolist(), "d2": rng.random(20).tolist()}
    better = {d: [min(1, v + 0.3) for v in vals] for d, vals in base.items()}
    same = {d: [v + rng.normal(0, 0.01) for v in vals] for d, vals in base.items()}
    settings = S.Settings(resamples=2000)
    t = S.table_statistics(_scores({"bm25": base, "dense": better, "other": same}), settings)
    assert t.columns.tolist() == S.COLUMNS
    assert set(t["baseline"]) == {"bm25"} and t[t.system == "bm25"]["p"].isna().all()
    avg = t[t.column == "Avg."].set_index("system")
    assert avg.at["dense", "significant"] and not avg.at["other", "significant"]
    assert avg.at["dense", "mean"] == pytest.approx(np.mean([np.mean(better["d1"]), np.mean(better["d2"])]))
    # Holm within each column: 2 tests per column
    col = t[(t.column == "d1") & t.p.notna()]
    assert np.allclose(col["p_adj"], S.adjust_pvalues(col["p"].to_numpy(), "holm"))
    assert S.family_size(t, settings) == 2 and S.family_size(t, S.Settings(family="table")) == 6
    # adding a system changes no other cell (seeds per cell)
    t2 = S.table_statistics(_scores({"bm25": base, "dense": better, "other": same, "x": same}), settings)
    keep = ["system", "column", "mean", "ci_low", "ci_high", "p"]
    merged = t[keep].merge(t2[keep], on=["system", "column"], suffixes=("", "_2"))
    assert np.allclose(merged["p"], merged["p_2"], equal_nan=True) and np.allclose(merged["ci_low"], merged["ci_low_2"])
    # a named baseline; a system missing a domain has no Avg.
    t3 = S.table_statistics(_scores({"bm25": base, "dense": better, "half": {"d1": base["d1"]}}),
                            S.Settings(baseline="dense", resamples=500))
    assert set(t3["baseline"]) == {"dense"}
    assert t3[(t3.system == "half") & (t3.column == "Avg.")]["mean"].isna().all()
    with pytest.raises(ConfigError, match="significance.test") as exc:
        S.Settings.from_config({"test": "wilcoxon"})
    assert exc.value.key == "significance.test"


def test_judged_table_statistics_pairs_answers_and_counts_only_valid_ones():
    scores = {"none": {"d": {"q1": [10, 20], "q2": [30, np.nan], "q3": [np.nan, np.nan]}},
              "oracle": {"d": {"q1": [80, 90], "q2": [70, 75], "q3": [60, 65]}}}
    t = S.judged_table_statistics(scores, S.Settings(resamples=1000))
    none = t[(t.system == "none") & (t.column == "d")].iloc[0]
    assert none["n"] == 2 and none["mean"] == pytest.approx((15 + 30) / 2)
    oracle = t[(t.system == "oracle") & (t.column == "Avg.")].iloc[0]
    # paired on q1, q2 (both scored): per-answer means 85, 72.5 vs 15, 30 -> exact test over 4 patterns
    assert oracle["exact"] and oracle["diff"] == pytest.approx(((85 - 15) + (72.5 - 30)) / 2) and oracle["p"] == 0.5
    assert oracle["mean"] == pytest.approx((85 + 72.5 + 62.5) / 3)


@pytest.mark.parametrize("test", ["permutation", "bootstrap"])
def test_the_same_data_draw_the_same_resamples_in_a_cell_its_avg_and_mmir_compare(test):
    """Issue 38 item 8: with one domain a cell and its Avg. are the same data and print the same interval and p; the
    table and `mmir compare` print the same p for the same pair (queries given in another order, or A and B swapped).
    60 queries: the sign-flip test samples (N > 40), so only shared draws make the numbers equal."""
    from mmir.evaluation.compare import compare

    rng = np.random.default_rng(5)
    qids = [f"q{i:02d}" for i in range(60)]
    base = pd.Series(rng.random(60), index=qids)
    other = pd.Series(np.clip(base.to_numpy() + rng.normal(0.03, 0.2, 60), 0, 1), index=qids)
    settings = S.Settings(resamples=2000, test=test)
    t = S.table_statistics({"bm25": {"d": base}, "dense": {"d": other.iloc[::-1]}}, settings).set_index(["system", "column"])
    for k in ("mean", "ci_low", "ci_high", "p"):
        assert t.at[("dense", "d"), k] == t.at[("dense", "Avg."), k], k
    assert not t.at[("dense", "d"), "exact"]
    shuffled = rng.permutation(qids).tolist()
    c = compare({q: other[q] for q in shuffled}, base.to_dict(), settings)
    assert c.test.p == t.at[("dense", "d"), "p"]
    assert compare(base.to_dict(), other.to_dict(), settings).test.p == c.test.p
