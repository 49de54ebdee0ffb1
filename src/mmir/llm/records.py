"""The one typed record of a model call (:class:`CallRecord`), made by :class:`~mmir.llm.client.LLMClient` and
kept by :class:`~mmir.llm.audit.CallAudit`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: ``status`` values: the backend produced text that the parser (if any) accepted; no usable text (timeout,
#: 5xx, empty, ...); text the parser rejected; no call was possible (a fallback value stands in).
STATUSES = ("ok", "failed", "rejected", "skipped")


@dataclass
class CallRecord:
    """What one model call did.

    Attributes:
        label: what the call was for (``"reformulate"``, ``"rag_judge"``, ``"fluency"``, ...).
        status: one of :data:`STATUSES`; ``"failed"`` and ``"rejected"`` are failures (retried on the next run).
        text: the reply (``None`` when the call failed or was skipped; kept when rejected).
        latency_s: wall time of this call (about 0 for a cache hit).
        missing_fields, invalid_fields: fields the benchmark expected but found absent / unusable.
        fallback_used, fallback_reason: the benchmark's fixed fallback replaced the reply.
        value: the parsed value (in memory only, not serialised).
        logprobs: the reply's token log-probabilities when they were asked for
            (:attr:`mmir.llm.backends.base.Generation.logprobs` of the first completion; in memory only).
    """

    label: str
    prompt_id: str
    prompt_sha256: str
    model: str
    temperature: float = 0.0
    max_tokens: int = 0
    seed: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    text: str | None = None
    cached: bool = False
    cache_key: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    error_kind: str | None = None
    error: str | None = None
    parser: str | None = None
    parse_ok: bool = False
    parse_method: str | None = None
    parse_error: str | None = None
    missing_fields: list[str] = field(default_factory=list)
    invalid_fields: list[str] = field(default_factory=list)
    fallback_used: bool = False
    fallback_reason: str | None = None
    value: Any = field(default=None, repr=False, compare=False)
    logprobs: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The call gave an accepted reply."""
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        """A failure: no usable text (``failed``) or a reply the parser rejected (``rejected``)."""
        return self.status in ("failed", "rejected")

    def set_parse(self, ok: bool, method: str | None, error: str | None) -> None:
        """Record the outcome of parsing ``text``."""
        self.parse_ok, self.parse_method, self.parse_error = ok, method, error

    def use_fallback(self, reason: str) -> None:
        """Record that the benchmark's fixed fallback replaced this reply."""
        self.fallback_used, self.fallback_reason = True, reason

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (every field but ``value`` and ``logprobs``)."""
        d = asdict(self)
        d.pop("value")
        d.pop("logprobs")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CallRecord:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)} - {"value", "logprobs"}
        return cls(**{k: v for k, v in d.items() if k in names})
