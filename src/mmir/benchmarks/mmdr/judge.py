"""The MMDR-Bench evaluator's judge: its prompt files (``prompts/mmdr_*_v1.txt``) and how a judge call is made.

Parsing is lenient (:data:`~mmir.llm.parsers.JSON_OBJECT`, spec §3) with the published fixed fallbacks, but an
unusable reply is a counted failure (``parse_failures``, ``fallbacks``) in the manifest and retried next run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.llm.audit import CallAudit
from mmir.llm.backends import Backend
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient, Sampling
from mmir.llm.parsers import JSON_OBJECT, ReplyParser
from mmir.llm.prompts import PromptLibrary, PromptTemplate
from mmir.llm.records import CallRecord

#: The evaluator's prompt files (``prompts/mmdr_*_v1.txt``) and the report writer's (``report_baseline_v1``).
MMDR_PROMPTS = PromptLibrary(Path(__file__).parent / "prompts")
DEFAULT_MAX_TOKENS = 4096  # spec §3: judge max output tokens

#: Audit labels (one per kind of judge call).
MODULES = (
    "flae_features", "controller", "evidence_pair", "vef",
    "mm_type", "mm_vqa", "mm_chart", "mm_ocr_chart", "mm_imgpair",
)


def as_number(value: Any) -> float | None:
    """``value`` as a finite float: ints, floats and numeric strings; ``None`` for anything else
    (booleans, NaN, infinities, non-numeric strings, containers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str):
        try:
            v = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return v if math.isfinite(v) else None


def clamp01(x: float) -> float:
    """``x`` clipped to [0, 1]."""
    return max(0.0, min(1.0, float(x)))


@dataclass(frozen=True)
class CallOptions:
    """Less common settings of one judge call.

    Attributes:
        system: a system message before the user message (``None`` = none).
        seed_offset: added to the base seed (makes the two controller calls independent).
        max_tokens: reply limit (``None`` = the judge's).
    """

    system: str | None = None
    seed_offset: int = 0
    max_tokens: int | None = None


class Judge:
    """The evaluator's single LLM client.

    Args:
        cache: the :class:`~mmir.llm.cache.GenerationCache` (``None``: an in-memory one).
        max_tokens: output limit per call (spec §3: 4096; ``mmdr.judge_max_tokens``).
        provider: free-form provider label for the manifest (``"openai"``, ``"llama_cpp"``, ...).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        cache: GenerationCache | None = None,
        audit: CallAudit | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        seed: int | None = None,
        prompts: PromptLibrary | None = None,
        provider: str | None = None,
    ):
        self.client = LLMClient(backend, cache, sampling=Sampling(0.0, max_tokens, seed), audit=audit)
        self.backend, self.cache, self.audit = backend, self.client.cache, self.client.audit
        self.max_tokens, self.seed = max_tokens, seed
        self.prompts = prompts if prompts is not None else MMDR_PROMPTS
        self.provider = provider or getattr(backend, "name", None)
        self._used: set[str] = set()

    # identity -----------------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """The judge model name."""
        return self.backend.model_id

    def identity(self) -> dict[str, Any]:
        """``{"provider", "backend", "model", "revision"}`` for the manifest."""
        return {"provider": self.provider, **self.backend.cache_identity()}

    def template(self, name: str) -> PromptTemplate:
        """The prompt ``name`` of :attr:`prompts` (remembered for :meth:`prompt_hashes`).

        Raises:
            FileNotFoundError: no such prompt file.
        """
        tpl = self.prompts.get(name)
        self._used.add(name)
        return tpl

    def prompt_hashes(self) -> dict[str, str]:
        """``{prompt id: sha256}`` of every prompt this judge used so far."""
        return {n: self.prompts.get(n).sha256 for n in sorted(self._used)}

    # calls --------------------------------------------------------------------------------------------
    def complete(
        self,
        module: str,
        prompt: str,
        fields: Mapping[str, Any],
        *,
        temperature: float,
        images: Sequence[bytes] = (),
        context: Mapping[str, Any] | None = None,
        parser: ReplyParser | None = None,
        options: CallOptions = CallOptions(),
    ) -> CallRecord:
        """Render ``prompt`` with ``fields``, call the judge once and record the call.

        Args:
            module: audit label (:data:`MODULES`).
            temperature: the spec's per-judge value (``mmdr.evaluator.<module>``).
            images: encoded images placed before the text in the user message.
            parser: the named reply parser (``None``: any text is accepted).
            options: system message, seed offset and reply limit (:class:`CallOptions`).

        Returns:
            The :class:`~mmir.llm.records.CallRecord`: ``status`` ``"ok"``, ``"failed"`` or ``"rejected"``.

        Raises:
            ValueError: the prompt's placeholders and ``fields`` differ.
            UnsupportedInputError: the backend cannot take the messages (e.g. images on a text-only model).
        """
        system, seed_offset, max_tokens = options.system, options.seed_offset, options.max_tokens
        tpl = self.template(prompt)
        text = tpl.render(**fields)
        content: Any = text
        if images:
            content = [{"type": "image", "image": img} for img in images] + [{"type": "text", "text": text}]
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": content})
        seed = None if self.seed is None and not seed_offset else (self.seed or 0) + seed_offset
        return self.client.call(messages, tpl, label=module, parser=parser, context=context,
                                temperature=float(temperature), max_tokens=max_tokens or self.max_tokens, seed=seed)

    def record_skipped(self, module: str, reason: str, context: Mapping[str, Any] | None = None) -> CallRecord:
        """Record that a judge value came from a fallback without any call (counted as skipped and a fallback)."""
        return self.client.skipped(module, reason, context)

    def complete_json(self, module: str, prompt: str, fields: Mapping[str, Any], **kw: Any) -> tuple[dict[str, Any] | None, CallRecord]:
        """:meth:`complete` with the :data:`~mmir.llm.parsers.JSON_OBJECT` parser (spec §3): ``(obj or None, record)``."""
        r = self.complete(module, prompt, fields, parser=JSON_OBJECT, **kw)
        return (r.value if r.ok else None), r
