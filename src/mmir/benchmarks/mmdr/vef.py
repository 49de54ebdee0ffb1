"""VEF, Visual Evidence Fidelity (spec §5.5): a pass/fail check of the report against the task's
textualised visual ground truth. VEF is 0 or 100 per task and enters TRACE with weight 0.4.

* No ground truth: VEF = 0, no call.
* The judge sees the task **text only** (no title), the ground truth and the **entire** report
  (untruncated), and returns ``{score, reason, verdict}``; segment ``DAILY`` for daily profiles, else
  ``ACADEMIC``. The task's local images are attached before the prompt when ``attach_images`` (the
  published code does this on Gemini only).
* Code threshold (default): ``VEF = 100 if int(raw score) >= 6 else 0``; the judge's verdict is ignored
  (spec §10.4). ``strict=True`` (the paper's reading) also requires verdict PASS.
* An unparseable reply gives raw score 0, hence FAIL, and is a recorded fallback.

Our prompt fixes the raw scale to 0-10 and states that identity errors force a score below 6.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.judge import Judge, as_number
from mmir.benchmarks.mmdr.tasks import normalize_report_type
from mmir.llm.records import CallRecord

PROMPT = "mmdr_vef_v1"


@dataclass(frozen=True)
class VEFConfig:
    """VEF settings (spec §5.5).

    Attributes:
        threshold: pass at raw score >= 6 (0-10 scale).
        pass_score, fail_score: exported values (100 / 0).
        temperature: ``judge_temperature`` (0.1 in the code; the README's example uses 0.2).
        strict: also require verdict == PASS (paper reading; off for parity).
        attach_images: attach the task's local images (needs a vision judge).
    """

    threshold: int = 6
    pass_score: float = 100.0
    fail_score: float = 0.0
    temperature: float = 0.1
    strict: bool = False
    attach_images: bool = True


@dataclass
class VEFResult:
    """VEF outcome of one task.

    Attributes:
        score: 100 (pass) or 0 (fail or no GT).
        raw_score: the judge's integer score (0 when unparseable or no GT), stored for audit only.
        verdict: judge verdict upper-cased (``"FAIL"`` forced below the threshold), ``"N/A"`` without GT.
        has_gt: the task had ground truth; fallback_used: the reply was unusable.
    """

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
    """VEF for one task (spec §5.5).

    Args:
        question: the task **text** (without its title).
        ground_truth: textualised visual GT; empty -> VEF 0 with no call.
        report: the entire report (not truncated).
        profile: scoring profile (sets the segment).
        images: the task's images; only local paths that exist are attached (when ``cfg.attach_images``).
        load_image: optional loader for image entries (default: read local files).
    """
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
