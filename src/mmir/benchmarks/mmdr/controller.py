"""The task controller (spec §4.5): an LLM call that shifts the FLAE and EVI weights per task.

It reads the task text and scoring profile and returns ``task_family``, ``v_general`` (R, I, C, S),
``v_evidence`` (Con, Cov, Fid, Div) and ``lambda_final``. The v values enter the softmax logits of
:mod:`mmir.benchmarks.mmdr.flae` and :mod:`mmir.benchmarks.mmdr.trace` unbounded (code behaviour, spec §10.12); the fallback
is all zeros with ``lambda_final`` 0.55.

The published evaluator calls the controller twice per task, once inside FLAE and once inside EVI
(spec §10.12). ``use`` selects the call: with ``ControllerConfig.mode = "separate"`` (default, code
behaviour) the two uses get different seed offsets, so they are independent samples even through the
generation cache; ``"shared"`` lets the caller reuse one output for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.judge import Judge, as_number, clamp01
from mmir.llm.records import CallRecord

PROMPT = "mmdr_controller_v1"
USES = {"flae": 0, "trace": 1}  # seed offsets of the two controller uses


@dataclass(frozen=True)
class ControllerConfig:
    """Controller settings (spec §4.5).

    Attributes:
        temperature: 0.2.
        mode: ``"separate"`` (two independent calls per task, code) or ``"shared"`` (one call reused).
        v_clip: optional bound ``|v| <= v_clip`` (``None`` = unbounded, the code behaviour).
        fallback_lambda: ``lambda_final`` when the reply is unusable (0.55).
    """

    temperature: float = 0.2
    mode: str = "separate"
    v_clip: float | None = None
    fallback_lambda: float = 0.55

    def __post_init__(self) -> None:
        if self.mode not in ("separate", "shared"):
            raise ValueError(f"controller mode must be 'separate' or 'shared', got {self.mode!r}")


@dataclass
class ControllerOutput:
    """Parsed controller reply.

    Attributes:
        v_general: (R, I, C, S) logit shifts.
        v_evidence: (Con, Cov, Fid, Div) logit shifts.
        lambda_final: in [0, 1] (only used by the legacy FINAL score).
        fallback_used: the fixed all-zero fallback was used.
        call: the audit record (``None`` for a hand-made output).
    """

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

    Args:
        judge: the evaluator's judge client.
        task_text: :func:`mmir.benchmarks.mmdr.tasks.format_task_for_llm` of the task.
        profile: scoring profile (research, daily_easy, daily_medium, daily_hard).
        use: which module asks; in ``"separate"`` mode it sets the seed offset.

    Raises:
        ValueError: unknown ``use``.
    """
    if use not in USES:
        raise ValueError(f"controller use must be one of {sorted(USES)}, got {use!r}")
    offset = USES[use] if cfg.mode == "separate" else 0
    obj, call = judge.complete_json(
        "controller", PROMPT, {"task": task_text, "report_type": profile},
        temperature=cfg.temperature, seed_offset=offset, context={**(context or {}), "use": use},
    )
    return parse_controller(obj, call, cfg)
