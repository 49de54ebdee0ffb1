"""The LLM layer's errors: a call without usable output, input a backend cannot take, a stage whose calls all failed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmir.core.errors import MmirError


class GenerationFailure(MmirError):
    """A call that produced no usable generation (after any retries).

    Attributes:
        kind: ``"timeout"``, ``"connection"``, ``"rate_limited"``, ``"server_error"``, ``"http_error"``,
            ``"malformed_response"``, ``"empty_content"``, ``"n_mismatch"`` or ``"backend_error"``.
        history: outcome of each attempt, in order (``["timeout", "http 429", "malformed_response"]``).
    """

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        status_code: int | None = None,
        retries: int = 0,
        latency_s: float = 0.0,
        history: Sequence[str] = (),
        backend: str | None = None,
        model: str | None = None,
    ):
        self.kind, self.detail, self.status_code = kind, detail, status_code
        self.retries, self.latency_s, self.history = retries, latency_s, list(history)
        self.backend, self.model = backend, model
        super().__init__(kind, detail)

    def __str__(self) -> str:
        where = f"{self.backend}:{self.model}: " if self.backend else ""
        r = self.retries
        tries = f" after {r} retr{'y' if r == 1 else 'ies'}" if r else ""
        return f"{where}generation failed ({self.kind}){tries}: {self.detail}"

    def to_record(self) -> dict[str, Any]:
        """JSON-serialisable description of the failure, for caches and reports."""
        return {
            "error_kind": self.kind,
            "error": str(self),
            "status_code": self.status_code,
            "retries": self.retries,
            "latency_s": self.latency_s,
            "history": list(self.history),
        }


class UnsupportedInputError(MmirError, ValueError):
    """The messages hold something this backend cannot take (e.g. images for a text-only model)."""


class LLMStageError(MmirError):
    """Every model call of a stage failed (``stage``, ``unit``, ``calls``, ``first_error``): it stops before writing."""

    def __init__(self, stage: str, unit: str, calls: int, first_error: str):
        self.stage, self.unit, self.calls, self.first_error = stage, unit, calls, first_error
        super().__init__(f"stage '{stage}', unit {unit}: all {calls} LLM call(s) failed; nothing was written "
                         f"(failures are kept in the generation cache and retried on the next run). "
                         f"First error: {first_error}")
