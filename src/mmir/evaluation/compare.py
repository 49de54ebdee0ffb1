"""Two systems query by query: wins, ties and losses, the largest differences, the paired test and the interval of
the mean difference (``python -m mmir compare``, the report's query pages and summary).

The test and the interval are :mod:`mmir.evaluation.significance`'s, with the settings of the tables
(``significance`` config): :func:`~mmir.evaluation.significance.paired_test` on the per-query values paired by qid
and :func:`~mmir.evaluation.significance.bootstrap_interval` of the per-query differences ``a - b``. Per-query values
of any two TREC runs come from pytrec_eval (:func:`mmir.evaluation.measures.evaluate`) after the evaluation protocol's
exclusions and top-k cut (:func:`mmir.retrieval.external.apply_protocol`, as the pipeline treats a ``kind: run``
system), so a run made outside mmir is scored exactly as its row in the tables.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mmir.core.errors import DataError
from mmir.evaluation.measures import DEFAULT_TIE_ORDER
from mmir.evaluation.significance import Interval, Settings, TestResult, bootstrap_interval, data_rng, paired_test, test_rng

#: |a - b| at most this is a tie (pytrec_eval computes equal rankings to the same float; this absorbs the last bit of
#: a sum taken in another order)
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Record:
    """Wins, ties and losses of system A against system B over ``wins + ties + losses`` paired queries."""

    wins: int
    ties: int
    losses: int

    @property
    def n(self) -> int:
        return self.wins + self.ties + self.losses

    def __str__(self) -> str:
        return f"{self.wins} / {self.ties} / {self.losses}"


def paired(a: Mapping[Hashable, float], b: Mapping[Hashable, float]) -> list[Hashable]:
    """The keys (qids, or (domain, qid)) both ``a`` and ``b`` score, in ``a``'s order."""
    return [k for k in a if k in b]


def record(a: Mapping[Hashable, float], b: Mapping[Hashable, float], tolerance: float = TIE_TOLERANCE) -> Record:
    """Wins / ties / losses of ``a`` against ``b`` over their paired keys (a tie: ``|a - b| <= tolerance``)."""
    w = t = lo = 0
    for k in paired(a, b):
        d = float(a[k]) - float(b[k])
        if abs(d) <= tolerance:
            t += 1
        elif d > 0:
            w += 1
        else:
            lo += 1
    return Record(w, t, lo)


@dataclass(frozen=True)
class Difference:
    """One query of :func:`largest_differences`: its key, both values and ``a - b``."""

    key: Hashable
    a: float
    b: float

    @property
    def diff(self) -> float:
        return self.a - self.b


def largest_differences(a: Mapping[Hashable, float], b: Mapping[Hashable, float], k: int = 10,
                        tolerance: float = TIE_TOLERANCE) -> list[Difference]:
    """The ``k`` paired keys with the largest ``|a - b|`` (ties: no entry), largest first; sizes equal to 9 decimals
    (0.5 - 0.2 and 0.4 - 0.1 differ in the last bit) keep ``a``'s order."""
    diffs = [Difference(q, float(a[q]), float(b[q])) for q in paired(a, b)]
    diffs = [d for d in diffs if abs(d.diff) > tolerance]
    order = sorted(range(len(diffs)), key=lambda i: (-round(abs(diffs[i].diff), 9), i))
    return [diffs[i] for i in order[:k]]


@dataclass(frozen=True)
class Coverage:
    """A run's queries against the judged ones (qrels queries with at least one row): ``judged`` in all,
    ``missing`` judged queries the run has no ranking for (scored 0, as in the tables) and ``unjudged`` run
    queries the qrels do not judge (not scored)."""

    judged: int
    missing: int
    unjudged: int

    def __str__(self) -> str:
        return (f"lacks {self.missing} of the {self.judged} judged queries (scored 0); "
                f"{self.unjudged} of its queries are unjudged (not scored)")


def coverage(run: Mapping[str, Sequence], judged: Collection[str], path: str | Path) -> Coverage:
    """How ``run`` (``{qid: ranking}``) covers the ``judged`` qids.

    Raises:
        DataError: naming ``path``, when the run ranks none of the judged queries (every value would be 0).
    """
    ranked = {q for q, r in run.items() if r}
    missing = sum(1 for q in judged if q not in ranked)
    if judged and missing == len(judged):
        some = ", ".join(sorted(ranked)[:3]) or "none"
        raise DataError(str(path), f"none of the {len(judged)} judged queries of the qrels is in this run "
                        f"({len(ranked)} ranked queries, e.g. {some}): wrong run or qrels (task, dataset, domain)?")
    return Coverage(len(judged), missing, sum(1 for q in ranked if q not in judged))


@dataclass(frozen=True)
class Comparison:
    """System A against system B on one query set: ``n`` paired queries, the means, the paired test
    (``test.statistic`` = mean of ``a - b``), the interval of the mean difference, the record and the largest
    differences. ``only_a`` / ``only_b``: queries one side scores and the other lacks (left out). ``removed``: the
    excluded items :func:`compare_runs` removed from run A and run B. ``coverage``: per run, how :func:`compare_runs`
    found its queries against the qrels."""

    n: int
    mean_a: float
    mean_b: float
    test: TestResult
    interval: Interval
    record: Record
    largest: list[Difference]
    settings: Settings
    only_a: list[Hashable] = field(default_factory=list)
    only_b: list[Hashable] = field(default_factory=list)
    removed: tuple[int, int] = (0, 0)
    coverage: tuple[Coverage, Coverage] | None = None


def compare(a: Mapping[Hashable, float], b: Mapping[Hashable, float], settings: Settings | None = None,
            k: int = 10) -> Comparison:
    """Compare per-query values ``a`` and ``b`` (``{qid: value}``, paired by qid).

    The test and the interval take the pairs in qid order and draw from the
    :func:`~mmir.evaluation.significance.data_rng` of the data, as the task tables do: the same pair of systems gets
    the same p-value here and in its table.

    Args:
        settings: the ``significance`` config (test, resamples, seed, confidence, interval method); None = defaults.

    Raises:
        ValueError: no query is scored by both.
    """
    s = settings or Settings()
    common = sorted(paired(a, b))
    if not common:
        raise ValueError(f"no query is scored by both runs ({len(a)} and {len(b)} scored queries, none shared)")
    x = np.array([float(a[q]) for q in common])
    y = np.array([float(b[q]) for q in common])
    test = paired_test(x, y, test=s.test, resamples=s.resamples, rng=test_rng(s.seed, s.test, [(x, y)]))
    ci = bootstrap_interval(x - y, confidence=s.confidence, resamples=s.resamples, method=s.interval,
                            rng=data_rng(s.seed, "interval", x - y))
    return Comparison(len(common), float(x.mean()), float(y.mean()), test, ci, record(a, b), largest_differences(a, b, k),
                      s, [q for q in a if q not in b], [q for q in b if q not in a])


def compare_runs(run_a: str | Path, run_b: str | Path, qrels: str | Path, measure: str = "nDCG@10",
                 settings: Settings | None = None, k: int = 10, tie_order: str = DEFAULT_TIE_ORDER, binary: bool = False,
                 excluded: Mapping[str, Collection[str]] | None = None, top_k: int | None = None) -> Comparison:
    """Score two TREC run files against ``qrels`` with pytrec_eval and :func:`compare` them on ``measure`` (every judged
    query; one a run leaves out scores 0, as in the tables).

    Args:
        excluded: ``{qid: item ids}`` removed from both runs before scoring (the protocol's,
            :func:`mmir.retrieval.exclusions.exclusions`); None removes nothing. ``Comparison.removed`` counts them.
        top_k: each ranking is cut to its first ``top_k`` after the removal (``evaluation.top_k``); None keeps all.

    Raises:
        DataError: a malformed run or qrels file, or a run that ranks none of the judged queries (:func:`coverage`);
            ValueError: an unknown measure, or no judged query.
    """
    from mmir.evaluation.measures import evaluate
    from mmir.evaluation.scoring import read_scored
    from mmir.retrieval.external import apply_protocol

    per, removed, covered = [], [], []
    for path in (run_a, run_b):
        run, judged = read_scored(path, qrels, binary)
        covered.append(coverage(run, [q for q, v in judged.items() if v], path))
        run, counts = apply_protocol(run, excluded or {}, top_k or max(map(len, run.values()), default=0))
        removed.append(counts["excluded_removed"])
        per.append({q: v[measure] for q, v in evaluate(judged, run, [measure], tie_order).items()})
    return replace(compare(*per, settings, k), removed=(removed[0], removed[1]), coverage=(covered[0], covered[1]))


def _short(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def format_comparison(c: Comparison, name_a: str, name_b: str, measure: str, texts: Mapping[Hashable, str] | None = None,
                      width: int = 100) -> str:
    """The comparison as the text ``mmir compare`` prints: means, the paired test, the interval of the mean difference,
    wins / ties / losses and the largest differences with their query texts (``texts``: ``{qid: query}``)."""
    s = c.settings
    test = ("paired randomization test (sign flips)" if c.test.test == "permutation" else "paired bootstrap test (shift method)")
    draws = f"all {c.test.resamples} sign patterns" if c.test.exact else f"{c.test.resamples} resamples"
    lines = [f"A = {name_a}", f"B = {name_b}",
             f"{measure} over {c.n} paired queries: A {c.mean_a:.4f}, B {c.mean_b:.4f}, mean difference A - B {c.test.statistic:+.4f}",
             f"{s.confidence:.0%} interval of the mean difference ({c.interval.method} bootstrap, {s.resamples} resamples, "
             f"seed {s.seed}): [{c.interval.low:+.4f}, {c.interval.high:+.4f}]",
             f"{test}: p = {c.test.p:.4g} ({draws})",
             f"wins / ties / losses of A against B: {c.record} (tie: |A - B| <= {TIE_TOLERANCE:g})"]
    if c.coverage:
        lines += [f"run A {c.coverage[0]}", f"run B {c.coverage[1]}"]
    if c.only_a or c.only_b:
        lines.append(f"left out: {len(c.only_a)} queries only A scores, {len(c.only_b)} only B scores")
    if c.largest:
        lines += ["", f"largest differences ({len(c.largest)}):", f"{'A - B':>8}  {'A':>6}  {'B':>6}  qid  query"]
        for d in c.largest:
            text = _short((texts or {}).get(d.key, ""), width)
            lines.append(f"{d.diff:+8.4f}  {d.a:6.4f}  {d.b:6.4f}  {d.key}  {text}")
    return "\n".join(lines)
