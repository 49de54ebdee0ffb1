"""The stage-level failure policy: a stage whose calls all failed stops (:class:`~mmir.llm.errors.LLMStageError`)
before it writes anything; otherwise it reports ``llm_calls`` / ``llm_failures`` in its summary JSON."""

from __future__ import annotations

from mmir.llm.audit import CallAudit, summed
from mmir.llm.errors import LLMStageError


def check_stage(stage: str, unit: str, *audits: CallAudit) -> dict[str, int]:
    """The stage's ``{"llm_calls", "llm_failures"}`` (summed over ``audits``, one per role: generator, judge).

    Raises:
        LLMStageError: an audit that made calls saw every one of them fail without any text (status
            ``failed``), naming ``stage``, ``unit`` and the first error. Replies the parser rejected do not stop a
            stage (the benchmark's policy scores them as counted failures or fallbacks).
    """
    for audit in audits:
        made = [r for r in audit.records if r.status != "skipped"]
        if made and all(r.status == "failed" for r in made):
            raise LLMStageError(stage, unit, len(made), str(made[0].error))
    return summed(*(a.summary() for a in audits))
