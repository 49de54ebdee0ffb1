"""Final MMDR score, the MOSAIC gate and the per-task results record (spec §3, §6.1, §7).

::

    TRACE      = 0.6*EVI + 0.4*VEF                         (VEF in {0, 100})
    Overall    = 0.2*FLAE + 0.5*TRACE + 0.3*MOSAIC          (the exporter's recomputation)
    FINAL_MMDR = round((2*GEN + 3*EVI + 3*MM + 2*VEF) / 10, 3)   (the pipeline's stored value, MMDR_WEIGHTS 2,3,3,2)

The two differ only by rounding (<= 0.0005). Gate (§6.1, §10.5): ``GEN > 0`` and ``EVI > 0`` (code), or TRACE
instead of EVI (``gate="trace"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmir.config.models.mmdr_evaluator import MMDR_WEIGHTS

#: Leaderboard weights (FLAE, TRACE, MOSAIC).
OVERALL_WEIGHTS: tuple[float, float, float] = (0.2, 0.5, 0.3)
LAMBDA_VEF = 0.4


def trace_value(evi: float, vef: float, lambda_vef: float = LAMBDA_VEF) -> float:
    """``TRACE = (1-lambda)*EVI + lambda*VEF`` (0.6 / 0.4), both on 0-100."""
    return (1.0 - lambda_vef) * float(evi) + lambda_vef * float(vef)


def overall_score(flae: float, trace: float, mosaic: float, weights: Sequence[float] = OVERALL_WEIGHTS) -> float:
    """``Overall = 0.2*FLAE + 0.5*TRACE + 0.3*MOSAIC`` on 0-100, unrounded (spec §7)."""
    wf, wt, wm = weights
    return wf * float(flae) + wt * float(trace) + wm * float(mosaic)


def final_mmdr(gen: float, evi: float, mm: float | None, vef: float, weights: Sequence[float] = MMDR_WEIGHTS,
               digits: int | None = 3) -> float:
    """Stored final score ``(wG*GEN + wE*EVI + wM*MM + wV*VEF) / sum(w)``, rounded to ``digits``; ``mm=None`` counts 0.

    Raises:
        ValueError: ``weights`` does not have four entries.
    """
    if len(weights) != 4:
        raise ValueError(f"MMDR weights need 4 entries (GEN, EVI, MM, VEF), got {list(weights)}")
    wg, we, wm, wv = (float(w) for w in weights)
    total = wg + we + wm + wv
    if total <= 0:
        return 0.0
    s = (wg * float(gen) + we * float(evi) + wm * float(0.0 if mm is None else mm) + wv * float(vef)) / total
    return s if digits is None else round(s, digits)


def mosaic_gate(gen: float, evi: float, vef: float = 0.0, *, gate: str = "evi", tau_f: float = 0.0, tau_t: float = 0.0) -> bool:
    """Whether MOSAIC runs (spec §6.1): ``GEN > tau_F`` and ``EVI > tau_T`` (``gate="evi"``) or ``TRACE > tau_T``.

    Raises:
        ValueError: unknown ``gate``.
    """
    if gate == "evi":
        return gen > tau_f and evi > tau_t
    if gate == "trace":
        return gen > tau_f and trace_value(evi, vef) > tau_t
    raise ValueError(f"gate must be 'evi' or 'trace', got {gate!r}")


@dataclass(frozen=True)
class TaskScores:
    """The four scores of one task (0-100) and VEF's raw judge score (0-10); ``mm`` None = MOSAIC not run (0)."""

    gen: float
    evi: float
    mm: float | None
    vef: float
    vef_raw: int = 0


@dataclass(frozen=True)
class RawScoring:
    """The raw payloads of one task's record: FLAE's ``general``, TRACE's ``evidence`` and MOSAIC's ``mm``
    (``None`` = empty; ``mm`` None = ``{"activated": False}``)."""

    general: Mapping[str, Any] | None = None
    evidence: Mapping[str, Any] | None = None
    mm: Mapping[str, Any] | None = None


def results_record(
    *,
    qid: str,
    report_type: str,
    scores: TaskScores,
    weights: Sequence[float] = MMDR_WEIGHTS,
    raw: RawScoring = RawScoring(),
    report_path: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One line of the results JSONL in the exporter's layout (spec §8 "Input"); ``extra`` merged at the top level."""
    s = scores
    mm_v = 0.0 if s.mm is None else float(s.mm)
    out = {"GEN": float(s.gen), "EVI": float(s.evi), "MM": mm_v, "VEF": float(s.vef), "VEF_Raw": int(s.vef_raw),
           "FINAL_MMDR": final_mmdr(s.gen, s.evi, mm_v, s.vef, weights)}
    rec: dict[str, Any] = {
        "qid": qid,
        "report_type": report_type,
        **dict(extra or {}),
        "scoring": {"scores": dict(out), "raw": {"general": dict(raw.general or {}), "evidence": dict(raw.evidence or {})}},
        "scores": out,
        "mm": dict(raw.mm or {"activated": False}),
    }
    if report_path is not None:
        rec["report_path"] = report_path
    return rec


def too_short_record(qid: str, n_chars: int, min_chars: int) -> dict[str, Any]:
    """Record of a report shorter than ``min_report_chars`` (spec §2): only ``FINAL_MMDR = 0``, so the
    exporter marks the row incomplete."""
    return {"qid": qid, "error": "report_too_short", "report_chars": n_chars, "min_report_chars": min_chars,
            "scores": {"FINAL_MMDR": 0.0}}
