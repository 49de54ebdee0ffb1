"""Run-level M2RAG scores: per-metric pooling, Text/MM averages and Overall (spec §6.7).

Failed generations are excluded (counted), never scored 0. Text metrics and image recall: mean over answers;
image coherence, helpfulness, reference: micro average over every output image (``None`` when the run has
none). Overall = mean of the eight on [0, 1], ``None`` unless all exist. Inputs need only
``text_value(metric)`` / ``image_values(metric)`` (the :class:`~mmir.benchmarks.m2rag.metrics.QueryEvaluation`
interface).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

TEXT_METRICS = ("fluency", "relevance", "context_precision", "faithfulness")
IMAGE_METRICS = ("image_coherence", "image_helpfulness", "image_reference")
QUERY_METRICS = (*TEXT_METRICS, "image_recall")
ALL_METRICS = (*TEXT_METRICS, *IMAGE_METRICS, "image_recall")


@dataclass
class MetricSummary:
    """One metric over a run: ``value`` in [0, 1] (``None`` when nothing scored), ``n`` answers or images, ``failures``."""

    value: float | None
    n: int
    failures: int
    unit: str


@dataclass
class RunSummary:
    """Scores of a run (spec §6.7): ``metrics`` in the paper's order, ``overall``/``text_avg``/``mm_precision_avg`` on [0, 1]."""

    metrics: dict[str, MetricSummary]
    overall: float | None
    text_avg: float | None
    mm_precision_avg: float | None
    n_queries: int
    n_excluded: int
    missing: list[str] = field(default_factory=list)

    def percent(self) -> dict[str, str]:
        """Every metric, the two averages and Overall as ``f"{x * 100:.1f}"`` (``"n/a"`` when missing)."""
        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v * 100:.1f}"

        out = {m: fmt(s.value) for m, s in self.metrics.items()}
        out.update(text_avg=fmt(self.text_avg), mm_precision_avg=fmt(self.mm_precision_avg), overall=fmt(self.overall))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(evaluations: Iterable[Any], *, failed_generations: int = 0) -> RunSummary:
    """Pool per-answer evaluations into a :class:`RunSummary` (spec §6.7); ``None`` = a failed generation (excluded)."""
    evals = list(evaluations)
    kept = [e for e in evals if e is not None]
    excluded = len(evals) - len(kept) + int(failed_generations)
    metrics: dict[str, MetricSummary] = {}
    for m in ALL_METRICS:
        if m in IMAGE_METRICS:
            vals = [v for e in kept for v in e.image_values(m)]
            unit = "images"
        else:
            vals = [e.text_value(m) for e in kept]
            unit = "queries"
        ok = [float(v) for v in vals if v is not None]
        metrics[m] = MetricSummary(value=_mean(ok), n=len(ok), failures=len(vals) - len(ok), unit=unit)
    missing = [m for m, s in metrics.items() if s.value is None]
    values = {m: s.value for m, s in metrics.items()}
    overall = None if missing else sum(values.values()) / len(ALL_METRICS)
    text = [values[m] for m in TEXT_METRICS]
    mm = [values[m] for m in IMAGE_METRICS]
    return RunSummary(
        metrics=metrics, overall=overall,
        text_avg=None if None in text else sum(text) / len(text),
        mm_precision_avg=None if None in mm else sum(mm) / len(mm),
        n_queries=len(kept), n_excluded=excluded, missing=missing,
    )


__all__ = ["ALL_METRICS", "IMAGE_METRICS", "MetricSummary", "QUERY_METRICS", "RunSummary", "TEXT_METRICS", "aggregate"]
