"""VEF, Visual Evidence Fidelity (spec §5.5): pass/fail (100 / 0) of the report against the textualised visual
ground truth; enters TRACE with weight 0.4.

No ground truth: 0, no call. Code threshold (default): ``100 if int(raw score) >= 6``, verdict ignored (spec
§10.4); ``strict=True`` also requires PASS. An unparseable reply is raw 0 (a recorded fallback).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.judge import Judge, as_number
from mmir.benchmarks.mmdr.tasks import normalize_report_type
from mmir.config.models.mmdr_evaluator import VEFConfig
from mmir.llm.records import CallRecord

PROMPT = "mmdr_vef_v1"


@dataclass
class VEFResult:
    """VEF outcome of one task: ``score`` 100/0, ``raw_score`` (audit only), ``verdict`` (``"N/A"`` without GT)."""

    score: float
    raw_score: int
    verdict: str
    reason: str
    has_gt: bool
    fallback_used: bool = False
    call: CallRecord | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        """VEF is the pass score."""
        return self.score > 0


def segment_for(profile: str) -> str:
    """``"DAILY"`` if the profile starts with daily, else ``"ACADEMIC"``."""
    return "DAILY" if normalize_report_type(profile).startswith("daily") else "ACADEMIC"


def parse_vef(obj: Mapping[str, Any] | None, call: CallRecord | None = None, cfg: VEFConfig = VEFConfig()) -> VEFResult:
    """VEF from a parsed reply. ``None`` -> raw 0, FAIL, recorded fallback. The raw score is
    ``int(number)`` (truncation, as the code); a missing or non-numeric score counts as 0 (recorded)."""
    if obj is None:
        if call is not None:
            call.use_fallback("unparseable or empty reply: raw score 0 (FAIL)")
        return VEFResult(cfg.fail_score, 0, "FAIL", "judge reply could not be parsed", True, True, call)
    n = as_number(obj.get("score"))
    if n is None and call is not None:
        (call.missing_fields if "score" not in obj else call.invalid_fields).append("score")
    raw = int(n) if n is not None else 0
    verdict = str(obj.get("verdict") or "FAIL").strip().upper()
    passed = raw >= cfg.threshold and (not cfg.strict or verdict == "PASS")
    if raw < cfg.threshold:
        verdict = "FAIL"
    return VEFResult(cfg.pass_score if passed else cfg.fail_score, raw, verdict, str(obj.get("reason") or ""), True, False, call)


def run_vef(
    judge: Judge,
    question: str,
    ground_truth: str,
    report: str,
    profile: str,
    *,
    images: Sequence[str | Path] = (),
    load_image: Callable[[str], bytes | None] | None = None,
    cfg: VEFConfig = VEFConfig(),
    context: Mapping[str, Any] | None = None,
) -> VEFResult:
    """VEF for one task (spec §5.5): the task text (no title), the GT and the entire report go to the judge."""
    if not (ground_truth or "").strip():
        return VEFResult(cfg.fail_score, 0, "N/A", "no ground truth", False)
    blobs: list[bytes] = []
    if cfg.attach_images:
        for p in images:
            data = load_image(str(p)) if load_image is not None else (Path(p).read_bytes() if os.path.isfile(p) else None)
            if data:
                blobs.append(data)
    obj, call = judge.complete_json(
        "vef", PROMPT,
        {"segment": segment_for(profile), "question": question, "ground_truth": ground_truth, "report": report},
        temperature=cfg.temperature, images=blobs, context=context,
    )
    return parse_vef(obj, call, cfg)
