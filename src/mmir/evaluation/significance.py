"""Paired significance tests, bootstrap confidence intervals and multiple-comparison corrections for the tables.

Pure functions of numbers on the measure's own scale (nDCG@10 in [0, 1]; judge scores 0-100). Sources:

- :func:`sign_flip_test`: Fisher's paired randomization test (Fisher 1935; Smucker, Allan & Carterette, CIKM
  2007). Exact over all ``2**N`` sign patterns when ``N <=`` :data:`EXACT_MAX_DIFFS` (counted by meeting in the
  middle: the sums of each half's patterns, sorted, then counted against each other), else
  ``p = (1 + #{|T*| >= |T|}) / (resamples + 1)`` (Phipson & Smyth 2010); equals
  ``scipy.stats.permutation_test(permutation_type="samples")``.
- :func:`paired_bootstrap_test`: shift method (Efron & Tibshirani 1993 §16.4; Sakai, SIGIR 2006).
- Stratified macro versions (the paper's Avg. = mean of the domain means): resampling within each domain
  (Davison & Hinkley 1997 §3.7).
- :func:`bootstrap_interval`: percentile bootstrap (Efron & Tibshirani §13.3) or BCa (Efron 1987,
  ``scipy.stats.bootstrap``), stratified by domain.
- :func:`two_level_interval`: two-stage bootstrap of judged scores (Davison & Hinkley §2.4.2; Field & Welsh 2007).
- :func:`adjust_pvalues`: Holm 1979 (FWER) and Benjamini-Hochberg 1995 (FDR).

Every random draw of a table or ``mmir compare`` comes from :func:`data_rng`: PCG64 seeded by the seed, the purpose
and the data themselves (per-query values in qid order), so the same data draw the same resamples wherever they are
computed (a cell and its one-domain Avg.; a table's test and ``mmir compare``'s of the same pair), and no result
depends on the other cells or on the order of the calls. README: "Significance and the reproduction check".
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pandas as pd

from mmir.config.models import SignificanceConfig

TESTS, CORRECTIONS, INTERVALS, FAMILIES = (get_args(SignificanceConfig.model_fields[k].annotation)
                                           for k in ("test", "correction", "interval", "family"))
_DEFAULT = SignificanceConfig()  # keyword defaults below = the config's
AVG = "Avg."
_MAX_CELLS = 4_000_000  # floats per resampling block (bounds memory: ~32 MB)
#: the sign-flip test is exact up to this many non-zero differences (2**40 patterns; about 1 s and 50 MB at 40)
EXACT_MAX_DIFFS = 40


#: the ``significance`` config section (:class:`mmir.config.models.SignificanceConfig`), under its old name
Settings = SignificanceConfig


def rng_for(seed: int, *key: object) -> np.random.Generator:
    """A numpy Generator seeded by ``seed`` and a stable hash (CRC-32) of ``key`` (e.g. dataset, system, domain)."""
    return np.random.default_rng([int(seed), zlib.crc32("\x1f".join(map(str, key)).encode("utf-8"))])


def data_rng(seed: int, purpose: str, *arrays: Any) -> np.random.Generator:
    """A numpy Generator seeded by ``seed``, ``purpose`` (``interval``, ``permutation``, ``bootstrap``) and the data:
    the sha256 of each array's length and float64 bytes, in order. Equal data give equal draws, whatever the caller."""
    h = hashlib.sha256(purpose.encode("utf-8"))
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=np.float64).ravel()
        h.update(a.size.to_bytes(8, "little") + a.tobytes())
    return np.random.default_rng([int(seed), *np.frombuffer(h.digest()[:16], dtype=np.uint32).tolist()])


# ------------------------------------------------------------------------------------------------ input shapes
def _as_strata(x: Any) -> list[np.ndarray]:
    """1-D array-like or sequence of them (one per domain) -> list of float64 arrays; ValueError if empty/non-finite/not 1-D."""
    if isinstance(x, np.ndarray | pd.Series) or (isinstance(x, Sequence) and len(x) and np.ndim(x[0]) == 0):
        x = [x]
    strata = [np.asarray(s, dtype=np.float64) for s in x]
    if not strata:
        raise ValueError("no data: at least one stratum (domain) is needed")
    for s in strata:
        if s.ndim != 1 or s.size == 0:
            raise ValueError(f"each stratum must be a non-empty 1-D array, got shape {s.shape}")
        if not np.all(np.isfinite(s)):
            raise ValueError("values must be finite (no NaN or inf)")
    return strata


def _paired_strata(a: Any, b: Any) -> list[np.ndarray]:
    sa, sb = _as_strata(a), _as_strata(b)
    if len(sa) != len(sb) or any(x.shape != y.shape for x, y in zip(sa, sb)):
        raise ValueError("paired samples must have the same strata and the same length in each stratum")
    return [x - y for x, y in zip(sa, sb)]


def _reaches(t: np.ndarray, observed: float) -> np.ndarray:
    """|t| >= |observed|, with a relative tolerance for equal statistics computed in another order."""
    return np.abs(t) >= abs(observed) - 1e-12 * max(1.0, abs(observed))


def _blocks(total: int, per_row: int):
    """Row counts of resampling blocks holding at most :data:`_MAX_CELLS` floats."""
    step = max(1, _MAX_CELLS // max(1, per_row))
    for start in range(0, total, step):
        yield min(step, total - start)


# ------------------------------------------------------------------------------------------------------- tests
@dataclass(frozen=True)
class TestResult:
    """A paired test. ``statistic``: observed (macro) mean of a - b; ``p``: two-sided p-value; ``resamples``:
    patterns or resamples evaluated (``2**N`` when ``exact``)."""

    statistic: float
    p: float
    test: str
    resamples: int
    exact: bool


def sign_flip_test(a: Any, b: Any, *, resamples: int = _DEFAULT.resamples, rng: np.random.Generator | None = None) -> TestResult:
    """Two-sided paired randomization test of mean(a - b) = 0, stratified when given strata (Fisher; module docstring).

    Args:
        a, b: paired scores: 1-D arrays of equal length (one domain), or equal-length sequences of such arrays (one
            per domain; the statistic is the mean over domains of the domain mean differences).
        resamples: random sign patterns when the N non-zero differences are more than :data:`EXACT_MAX_DIFFS`.

    Returns:
        :class:`TestResult`; ``p = 1`` when every difference is 0; exact: ``p = #{|T*| >= |T|} / 2**N``.

    Raises:
        ValueError: mismatched or empty samples, non-finite values.
    """
    diffs = _paired_strata(a, b)
    k = len(diffs)
    # T = sum_i s_i w_i with w_i = d_i / (n_domain * k): the macro mean difference is linear in the signs
    w = np.concatenate([d / (d.size * k) for d in diffs])
    observed = float(w.sum())
    w = w[w != 0]
    if w.size == 0:
        return TestResult(observed, 1.0, "permutation", 1, True)
    if w.size <= EXACT_MAX_DIFFS:
        return TestResult(observed, _exact_count(w, observed) / 2 ** w.size, "permutation", 2 ** w.size, True)
    rng = rng if rng is not None else rng_for(0)
    hits = 0
    for n in _blocks(resamples, w.size):
        signs = rng.integers(0, 2, size=(n, w.size), dtype=np.int8) * 2 - 1
        hits += int(_reaches(signs @ w, observed).sum())
    return TestResult(observed, (1 + hits) / (resamples + 1), "permutation", resamples, False)


def _pattern_sums(w: np.ndarray) -> np.ndarray:
    """``sum_i s_i w_i`` for every sign pattern ``s`` of ``w``: float64 ``(2**len(w),)``."""
    out = np.zeros(1)
    for x in w:
        out = np.concatenate([out + x, out - x])
    return out


def _exact_count(w: np.ndarray, observed: float) -> int:
    """How many of the ``2**len(w)`` sign patterns reach ``|T| >= |observed|`` (:func:`_reaches`' tolerance): the sums
    of the first half's patterns against the sorted sums of the second half's (meet in the middle, vectorised)."""
    half = w.size // 2
    first, second = _pattern_sums(w[:half]), np.sort(_pattern_sums(w[half:]))
    c = abs(observed) - 1e-12 * max(1.0, abs(observed))
    if c <= 0:
        return 2 ** w.size
    upper = second.size - np.searchsorted(second, c - first, side="left")  # first + second >= c
    lower = np.searchsorted(second, -c - first, side="right")  # first + second <= -c
    return int(upper.sum() + lower.sum())


def _stratified_bootstrap_means(strata: list[np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` macro means, each from one with-replacement resample of every stratum (shape ``(resamples,)``)."""
    out = np.zeros(resamples)
    for s in strata:
        done = 0
        for n in _blocks(resamples, s.size):
            idx = rng.integers(0, s.size, size=(n, s.size))
            out[done:done + n] += s[idx].mean(axis=1)
            done += n
    return out / len(strata)


def paired_bootstrap_test(a: Any, b: Any, *, resamples: int = _DEFAULT.resamples, rng: np.random.Generator | None = None) -> TestResult:
    """Two-sided paired bootstrap test of mean(a - b) = 0 (shift method, Efron & Tibshirani 1993 §16.4; stratified).

    Args and raises as :func:`sign_flip_test`; ``p = (1 + #{|T*| >= |T|}) / (resamples + 1)``.
    """
    diffs = _paired_strata(a, b)
    observed = float(np.mean([d.mean() for d in diffs]))
    if all(not d.any() for d in diffs):
        return TestResult(observed, 1.0, "bootstrap", 0, True)
    rng = rng if rng is not None else rng_for(0)
    t = _stratified_bootstrap_means([d - d.mean() for d in diffs], resamples, rng)
    return TestResult(observed, (1 + int(_reaches(t, observed).sum())) / (resamples + 1), "bootstrap", resamples, False)


def paired_test(a: Any, b: Any, *, test: str = _DEFAULT.test, resamples: int = _DEFAULT.resamples,
                rng: np.random.Generator | None = None) -> TestResult:
    """:func:`sign_flip_test` (``test="permutation"``) or :func:`paired_bootstrap_test` (``"bootstrap"``).

    Raises:
        ValueError: an unknown test, or as those functions.
    """
    if test == "permutation":
        return sign_flip_test(a, b, resamples=resamples, rng=rng)
    if test == "bootstrap":
        return paired_bootstrap_test(a, b, resamples=resamples, rng=rng)
    raise ValueError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")


# --------------------------------------------------------------------------------------------------- intervals
@dataclass(frozen=True)
class Interval:
    """A confidence interval: ``estimate`` (the sample's (macro) mean), ``low``, ``high``, the ``method`` used."""

    estimate: float
    low: float
    high: float
    method: str


def _percentile(t: np.ndarray, confidence: float) -> tuple[float, float]:
    lo, hi = np.quantile(t, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(lo), float(hi)


def bootstrap_interval(x: Any, *, confidence: float = _DEFAULT.confidence, resamples: int = _DEFAULT.resamples,
                       method: str = _DEFAULT.interval, rng: np.random.Generator | None = None) -> Interval:
    """Bootstrap confidence interval of a mean, or of the macro mean over strata (domains resampled separately).

    Args:
        x: 1-D array (one domain's per-query values) or a sequence of them (one per domain).
        method: ``percentile`` (Efron & Tibshirani §13.3) or ``bca`` (Efron 1987, ``scipy.stats.bootstrap``; the
            percentile interval where BCa is undefined: the returned ``method`` says which was used).

    Returns:
        :class:`Interval`; a constant sample gives ``low == high == estimate``.

    Raises:
        ValueError: empty strata, non-finite values, an unknown method.
    """
    strata = _as_strata(x)
    est = float(np.mean([s.mean() for s in strata]))
    rng = rng if rng is not None else rng_for(0)
    if method == "bca":
        from scipy import stats

        if all(s.size >= 2 for s in strata) and any(np.ptp(s) > 0 for s in strata):

            def macro(*samples, axis=-1):
                return np.mean([np.mean(s, axis=axis) for s in samples], axis=0)

            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ci = stats.bootstrap(tuple(strata), macro, n_resamples=resamples, confidence_level=confidence,
                                     method="BCa", vectorized=True, rng=rng).confidence_interval
            if np.isfinite(ci.low) and np.isfinite(ci.high):
                return Interval(est, float(ci.low), float(ci.high), "bca")
        method = "percentile"  # BCa undefined here (degenerate or one-query domain)
    if method != "percentile":
        raise ValueError(f"unknown interval method {method!r}; use one of {', '.join(INTERVALS)}")
    lo, hi = _percentile(_stratified_bootstrap_means(strata, resamples, rng), confidence)
    return Interval(est, lo, hi, "percentile")


def _judged_strata(scores: Any) -> list[list[np.ndarray]]:
    """Domains ``[[answer judgings, ...], ...]`` -> list of domains, each a list of non-empty float arrays (failed
    judgings (NaN) and answers without a valid judging dropped; domains left without an answer dropped)."""
    out = []
    for dom in scores:
        answers = [np.asarray(a, dtype=np.float64) for a in dom]
        answers = [a[np.isfinite(a)] for a in answers]
        answers = [a for a in answers if a.size]
        if answers:
            out.append(answers)
    if not out:
        raise ValueError("no answer with a valid judging")
    return out


def judged_estimate(scores: Any) -> float:
    """Mean over domains of (mean over answers of the mean of its valid judgings).

    ``scores``: per domain, per answer a 1-D array of judgings (NaN = failed, ignored). Raises ValueError when no
    answer has a valid judging.
    """
    return float(np.mean([np.mean([a.mean() for a in dom]) for dom in _judged_strata(scores)]))


def two_level_replicates(scores: Any, *, resamples: int = _DEFAULT.resamples, repeats: str = _DEFAULT.repeats,
                         rng: np.random.Generator | None = None) -> np.ndarray:
    """The bootstrap replicates behind :func:`two_level_interval`: float64 ``(resamples,)``.

    Raises:
        ValueError: no valid judging, an unknown ``repeats``.
    """
    if repeats not in ("one", "all"):
        raise ValueError(f"repeats must be 'one' or 'all', got {repeats!r}")
    domains = _judged_strata(scores)
    rng = rng if rng is not None else rng_for(0)
    total = np.zeros(resamples)
    for dom in domains:
        n, rmax = len(dom), max(a.size for a in dom)
        mat = np.zeros((n, rmax))
        for i, a in enumerate(dom):
            mat[i, :a.size] = a
        r = np.array([a.size for a in dom])
        done = 0
        for m in _blocks(resamples, n * (rmax if repeats == "all" else 1)):
            idx = rng.integers(0, n, size=(m, n))  # answers drawn with replacement
            if repeats == "one":  # one of the drawn answer's r_i judgings, uniformly
                vals = mat[idx, np.floor(rng.random((m, n)) * r[idx]).astype(np.int64)]
            else:  # r_i judgings drawn with replacement, averaged
                j = np.floor(rng.random((m, n, rmax)) * r[idx][..., None]).astype(np.int64)
                keep = np.arange(rmax)[None, None, :] < r[idx][..., None]
                vals = np.where(keep, mat[idx[..., None], j], 0.0).sum(axis=2) / r[idx]
            total[done:done + m] += vals.mean(axis=1)
            done += m
    return total / len(domains)


def two_level_interval(scores: Any, *, confidence: float = _DEFAULT.confidence, resamples: int = _DEFAULT.resamples,
                       repeats: str = _DEFAULT.repeats, rng: np.random.Generator | None = None) -> Interval:
    """Bootstrap interval of a judged score with answer-to-answer and judge-repeat variance (two-stage bootstrap).

    One replicate, within each domain: draw ``n`` answers with replacement; per drawn answer take one of its
    ``r_i`` judgings (``repeats="one"``) or the mean of ``r_i`` judgings drawn with replacement (``"all"``);
    average, then average the domains. Variance per domain: ``(B + W / r) / n`` for ``all``, ``(B + W) / n``
    for ``one`` (B = between-answer variance, W = mean within-answer judge variance, 1/n divisors, equal ``r``).

    Raises:
        ValueError: no valid judging, an unknown ``repeats``.

    Source: Davison & Hinkley 1997 §2.4.2 (two-stage resampling).
    """
    est = judged_estimate(scores)
    lo, hi = _percentile(two_level_replicates(scores, resamples=resamples, repeats=repeats, rng=rng), confidence)
    return Interval(est, lo, hi, f"two-level bootstrap ({repeats} judging{'s' if repeats == 'all' else ''} per answer)")


# ------------------------------------------------------------------------------------------------- corrections
def adjust_pvalues(p: Any, method: str = _DEFAULT.correction) -> np.ndarray:
    """Adjusted p-values of one family; NaN entries stay NaN and are not counted. Same shape as ``p``, float64.

    ``holm``: ``p_(i) -> max_{j<=i} min(1, (m - j + 1) p_(j))`` (Holm 1979); ``bh``: Benjamini-Hochberg
    (``scipy.stats.false_discovery_control``); ``none``: unchanged.

    Raises:
        ValueError: an unknown method, a p-value outside [0, 1].
    """
    p = np.asarray(p, dtype=np.float64)
    out = p.copy()
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    q = p[ok]
    if method == "none" or q.size == 0:
        pass
    elif method == "holm":
        order = np.argsort(q, kind="stable")
        m = q.size
        adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
        q = np.empty_like(q)
        q[order] = adj
    elif method == "bh":
        from scipy.stats import false_discovery_control

        q = false_discovery_control(q, method="bh")
    else:
        raise ValueError(f"unknown correction {method!r}; use one of {', '.join(CORRECTIONS)}")
    out[ok] = q
    return out


# ------------------------------------------------------------------------------------------------------ tables
def read_perquery(path: str | Path, measure: str) -> pd.Series:
    """One measure of a ``qid<TAB>measure<TAB>value`` file as a float Series indexed by qid (str), in file order.

    Raises:
        ValueError: the file lacks the columns or the measure.
    """
    df = pd.read_csv(path, sep="\t", dtype={"qid": str, "measure": str}, keep_default_na=False)
    if not {"qid", "measure", "value"} <= set(df.columns):
        raise ValueError(f"{path}: expected columns qid, measure, value")
    sub = df[df["measure"] == measure]
    if sub.empty and len(df):
        raise ValueError(f"{path}: no per-query values of {measure!r} (has {', '.join(sorted(set(df['measure'])))})")
    return pd.Series(sub["value"].astype(float).to_numpy(), index=sub["qid"].to_numpy(), name=measure)


COLUMNS = ["system", "column", "n", "mean", "ci_low", "ci_high", "interval", "baseline", "diff", "p", "p_adj",
           "significant", "test_resamples", "exact"]


def _compare(scores: Mapping[str, Mapping[str, Any]], settings: Settings, per_query, interval) -> pd.DataFrame:
    """The loop both table functions share. ``per_query(row, domain) -> {qid: value}`` (what is tested, paired by
    qid; empty when the row lacks the domain; computed once per cell); ``interval(row, domains) -> Interval``, drawing
    from the :func:`data_rng` of the data it resamples. Tests pair queries in qid order and draw from the
    :func:`data_rng` of the absolute differences (so A against B and B against A draw alike)."""
    rows = list(scores)
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    domains = list(dict.fromkeys(d for r in rows for d in scores[r]))
    cache: dict[tuple[str, str], dict[str, float]] = {}

    def values(r, d):
        if (r, d) not in cache:
            cache[r, d] = per_query(r, d)
        return cache[r, d]

    s_ = settings
    base = s_.baseline if s_.baseline in rows else rows[0]
    out = []
    for r in rows:
        have = [d for d in domains if values(r, d)]
        for col in [*domains, AVG]:
            row: dict[str, Any] = {"system": r, "column": col, "baseline": base, "n": 0, "mean": np.nan, "ci_low": np.nan,
                                   "ci_high": np.nan, "interval": "", "diff": np.nan, "p": np.nan, "test_resamples": 0,
                                   "exact": False}
            cols = (have if len(have) == len(domains) else []) if col == AVG else ([col] if col in have else [])
            if cols:
                ci = interval(r, cols)
                row |= {"n": sum(len(values(r, d)) for d in cols), "mean": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
                        "interval": ci.method}
                pairs = []
                for d in cols:
                    a, b = values(r, d), values(base, d)
                    common = sorted(q for q in a if q in b)
                    pairs.append((np.array([a[q] for q in common]), np.array([b[q] for q in common])))
                if r != base and all(len(x) for x, _ in pairs):
                    t = paired_test([x for x, _ in pairs], [y for _, y in pairs], test=s_.test, resamples=s_.resamples,
                                    rng=test_rng(s_.seed, s_.test, pairs))
                    row |= {"diff": t.statistic, "p": t.p, "test_resamples": t.resamples, "exact": t.exact}
            out.append(row)
    frame = pd.DataFrame(out, columns=[c for c in COLUMNS if c not in ("p_adj", "significant")])
    frame["p_adj"] = np.nan
    groups = [frame.index] if s_.family == "table" else [g.index for _, g in frame.groupby("column", sort=False)]
    for idx in groups:
        frame.loc[idx, "p_adj"] = adjust_pvalues(frame.loc[idx, "p"].to_numpy(dtype=float), s_.correction)
    frame["significant"] = frame["p_adj"].lt(s_.alpha) & frame["p_adj"].notna()
    return frame[COLUMNS]


def test_rng(seed: int, test: str, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.random.Generator:
    """The :func:`data_rng` of a paired test: ``|a - b|`` of each domain's pairs (in qid order)."""
    return data_rng(seed, test, *[np.abs(np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)) for x, y in pairs])


def table_statistics(scores: Mapping[str, Mapping[str, pd.Series]], settings: Settings) -> pd.DataFrame:
    """Intervals of every cell and tests of every system against the baseline, for one table (one dataset).

    Args:
        scores: ``{system: {domain: per-query values (Series indexed by qid)}}``, in table order; resampled in qid
            order, with draws seeded by the data (:func:`data_rng`).

    Returns:
        One row per (system, column) with :data:`COLUMNS`; tests pair queries by qid, the Avg. interval and test
        are stratified by domain; test columns NaN for the baseline and where a test cannot run.
    """
    def per_query(r, d):
        s = scores[r].get(d)
        return {} if s is None else dict(zip(map(str, s.index), s.to_numpy(dtype=float)))

    def interval(r, cols):
        strata = [scores[r][d].sort_index(kind="stable").to_numpy(dtype=float) for d in cols]
        return bootstrap_interval(strata, confidence=settings.confidence, resamples=settings.resamples,
                                  method=settings.interval, rng=data_rng(settings.seed, "interval", *strata))

    return _compare(scores, settings, per_query, interval)


def judged_table_statistics(scores: Mapping[str, Mapping[str, Mapping[str, Any]]], settings: Settings) -> pd.DataFrame:
    """:func:`table_statistics` for judged scores (RAG settings; M2RAG / MMDR rows).

    Args:
        scores: ``{row: {domain: {qid: 1-D array of judgings (NaN = failed)}}}``.

    Returns:
        :data:`COLUMNS`; ``mean`` is :func:`judged_estimate`, the interval :func:`two_level_interval`, the tests
        :func:`paired_test` on per-answer means.
    """
    def per_query(r, d):
        means = {}
        for q, v in scores[r].get(d, {}).items():
            v = np.asarray(v, dtype=float).ravel()
            v = v[np.isfinite(v)]
            if v.size:
                means[str(q)] = float(v.mean())
        return means

    def interval(r, cols):
        domains = [[scores[r][d][q] for q in sorted(scores[r][d])] for d in cols]
        return two_level_interval(domains, confidence=settings.confidence, resamples=settings.resamples, repeats=settings.repeats,
                                  rng=data_rng(settings.seed, "interval", *[a for dom in domains for a in dom]))

    return _compare(scores, settings, per_query, interval)


def family_size(stats: pd.DataFrame, settings: Settings) -> int:
    """Tests in one correction family of a table-statistics frame (the largest one for ``family="column"``)."""
    tested = stats[stats["p"].notna()]
    if settings.family == "table" or tested.empty:
        return int(len(tested))
    return int(tested.groupby("column").size().max())


def finite_or_none(v: Any) -> float | None:
    """``v`` as a float, or None when it is NaN/None (JSON has no NaN)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
