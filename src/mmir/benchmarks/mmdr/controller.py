"""The task controller (spec §4.5): an LLM call that shifts the FLAE and EVI weights per task.

Returns ``v_general`` (R, I, C, S), ``v_evidence`` (Con, Cov, Fid, Div) and ``lambda_final``, unbounded (spec
§10.12); fallback all zeros, ``lambda_final`` 0.55. Called twice per task as in the code (``mode="separate"``,
distinct seed offsets) or once (``"shared"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.judge import CallOptions, Judge, as_number, clamp01
from mmir.config.models.mmdr_evaluator import ControllerConfig
from mmir.llm.records import CallRecord

PROMPT = "mmdr_controller_v1"
USES = {"flae": 0, "trace": 1}  # seed offsets of the two controller uses


@dataclass
class ControllerOutput:
    """Parsed controller reply: ``v_general`` (R, I, C, S) and ``v_evidence`` (Con, Cov, Fid, Div) logit shifts."""

    task_family: str = "other"
    v_general: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    v_evidence: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    lambda_final: float = 0.55
    rationale: str = ""
    fallback_used: bool = False
    call: CallRecord | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (without the audit record)."""
        return {
            "task_family": self.task_family, "v_general": list(self.v_general), "v_evidence": list(self.v_evidence),
            "lambda_final": self.lambda_final, "rationale": self.rationale, "fallback_used": self.fallback_used,
        }


def _vector(obj: Mapping[str, Any], key: str, call: CallRecord | None, clip: float | None) -> tuple[float, float, float, float]:
    v = obj.get(key)
    if v is None:
        if call is not None:
            call.missing_fields.append(key)
        return (0.0, 0.0, 0.0, 0.0)
    if not isinstance(v, list):
        if call is not None:
            call.invalid_fields.append(key)
        return (0.0, 0.0, 0.0, 0.0)
    out = []
    for j, x in enumerate((list(v) + [0, 0, 0, 0])[:4]):  # short lists are zero-padded, as in the code
        n = as_number(x)
        if n is None:
            if call is not None:
                call.invalid_fields.append(f"{key}[{j}]")
            n = 0.0
        if clip is not None:
            n = max(-clip, min(clip, n))
        out.append(n)
    if len(v) != 4 and call is not None:
        call.invalid_fields.append(f"{key} (length {len(v)}, padded/truncated to 4)")
    return tuple(out)  # type: ignore[return-value]


def parse_controller(obj: Mapping[str, Any] | None, call: CallRecord | None = None,
                     cfg: ControllerConfig = ControllerConfig()) -> ControllerOutput:
    """Controller output from a parsed reply (``None`` = unusable reply -> the all-zero fallback).

    Missing or non-numeric v entries become 0 and are recorded on ``call``.
    """
    if obj is None:
        if call is not None:
            call.use_fallback("unparseable or empty reply")
        return ControllerOutput(lambda_final=cfg.fallback_lambda, rationale="fallback", fallback_used=True, call=call)
    lam = as_number(obj.get("lambda_final"))
    if lam is None:
        if call is not None:
            (call.missing_fields if "lambda_final" not in obj else call.invalid_fields).append("lambda_final")
        lam = cfg.fallback_lambda
    return ControllerOutput(
        task_family=str(obj.get("task_family") or "other"),
        v_general=_vector(obj, "v_general", call, cfg.v_clip),
        v_evidence=_vector(obj, "v_evidence", call, cfg.v_clip),
        lambda_final=clamp01(lam),
        rationale=str(obj.get("rationale") or ""),
        call=call,
    )


def run_controller(
    judge: Judge,
    task_text: str,
    profile: str,
    *,
    use: str = "flae",
    cfg: ControllerConfig = ControllerConfig(),
    context: Mapping[str, Any] | None = None,
) -> ControllerOutput:
    """One controller call (spec §4.5) for ``use`` ``"flae"`` or ``"trace"``.

    Raises:
        ValueError: unknown ``use``.
    """
    if use not in USES:
        raise ValueError(f"controller use must be one of {sorted(USES)}, got {use!r}")
    offset = USES[use] if cfg.mode == "separate" else 0
    obj, call = judge.complete_json(
        "controller", PROMPT, {"task": task_text, "report_type": profile},
        temperature=cfg.temperature, options=CallOptions(seed_offset=offset), context={**(context or {}), "use": use},
    )
    return parse_controller(obj, call, cfg)
