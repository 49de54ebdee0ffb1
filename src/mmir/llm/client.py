""":class:`LLMClient`, the one call path of every stage: backend + generation cache + named parser -> ``CallRecord``.

Failure policy: a call without usable text is ``failed``, a reply the parser rejects ``rejected`` (text kept);
both are failure records in the cache (retried next run), never raised; :mod:`mmir.llm.policy` stops a stage
whose calls all failed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from mmir.llm.audit import CallAudit
from mmir.llm.cache import REJECTED, GenerationCache
from mmir.llm.errors import GenerationFailure
from mmir.llm.messages import Message
from mmir.llm.parsers import ReplyParser
from mmir.llm.prompts import PromptTemplate
from mmir.llm.records import CallRecord

_UNSET: Any = object()


@dataclass(frozen=True)
class Sampling:
    """Sampling of a call: ``temperature`` (0 = greedy), ``max_tokens`` (reply limit), ``seed`` (``None`` = the
    backend's default). Every value comes from the config (``params.schema.yaml``)."""

    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = 0

    def override(self, temperature: Any = _UNSET, max_tokens: Any = _UNSET, seed: Any = _UNSET) -> Sampling:
        """A copy with the given fields replaced; an omitted field (or ``None`` for ``temperature`` and
        ``max_tokens``) keeps its value, ``seed=None`` sets None."""
        kw = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens), ("seed", seed))
              if v is not _UNSET and not (v is None and k != "seed")}
        return replace(self, **kw) if kw else self


class LLMClient:
    """One backend + the generation cache (``None`` = in-memory) + an audit of every call (share one per stage)."""

    def __init__(self, backend: Any, cache: GenerationCache | None = None, *, sampling: Sampling = Sampling(),
                 audit: CallAudit | None = None):
        self.backend = backend
        self.cache = cache if cache is not None else GenerationCache.in_memory()
        self.sampling = sampling
        self.audit = audit if audit is not None else CallAudit()

    def __repr__(self) -> str:
        return f"LLMClient({self.backend!r}, {self.sampling})"

    @property
    def model_id(self) -> str:
        """The backend's model id."""
        return self.backend.model_id

    # ------------------------------------------------------------------------------------------- calls
    def call(self, messages: Sequence[Message], prompt: PromptTemplate, *, label: str, parser: ReplyParser | None = None,
             context: Mapping[str, Any] | None = None, temperature: Any = _UNSET, max_tokens: Any = _UNSET,
             seed: Any = _UNSET, top_logprobs: int | None = None) -> CallRecord:
        """One cached call; the reply parsed by ``parser`` (none: any text is accepted) into ``record.value``.

        Args:
            prompt: the template (its id and text enter the cache key).
            label: what the call is for (the audit groups by it).
            top_logprobs: also ask for the reply tokens' log-probabilities (``record.logprobs``; part of the cache key).

        Returns:
            The :class:`CallRecord` (also appended to :attr:`audit`); status ``ok``, ``failed`` or ``rejected``.

        Raises:
            UnsupportedInputError: malformed messages, or input the backend cannot take (nothing is stored).
        """
        s = self.sampling.override(temperature, max_tokens, seed)
        t0 = time.monotonic()
        lp = {} if top_logprobs is None else {"top_logprobs": top_logprobs}
        rec = self.cache.cached_generate(self.backend, messages, prompt.id, prompt.text, temperature=s.temperature,
                                         max_tokens=s.max_tokens, seed=s.seed, n=1, **lp)
        record = self._record(rec, prompt, label, s, context)
        if record.status == "ok" and rec.get("logprobs"):
            record.logprobs = rec["logprobs"][0]
        record.latency_s = time.monotonic() - t0
        if record.status == "ok" and parser is not None:
            p = parser(record.text)
            record.parser, record.value = parser.name, p.value
            record.set_parse(p.ok, p.method, p.error)
            if not p.ok:
                record.status, record.error_kind, record.error = "rejected", REJECTED, f"{parser.name}: {p.error}"
                self.cache.reject(record.cache_key, record.error)
        elif record.status == "ok":
            record.value = record.text
        else:
            record.parser = parser.name if parser is not None else None
            record.set_parse(False, None, "no reply (generation failed)")
        return self.audit.add(record)

    def call_many(self, items: Sequence[Sequence[Message]], prompt: PromptTemplate, *, label: str,
                  parser: ReplyParser | None = None, contexts: Sequence[Mapping[str, Any] | None] | None = None,
                  **sampling: Any) -> list[CallRecord]:
        """:meth:`call` over many message lists, ``backend.max_concurrency`` at a time, in input order; each
        generation is committed as soon as it finishes."""
        ctx = list(contexts) if contexts is not None else [None] * len(items)

        def one(i: int) -> CallRecord:
            return self.call(items[i], prompt, label=label, parser=parser, context=ctx[i], **sampling)

        workers = max(1, min(int(getattr(self.backend, "max_concurrency", 1) or 1), len(items) or 1))
        if workers == 1:
            return [one(i) for i in range(len(items))]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-call") as pool:
            return list(pool.map(one, range(len(items))))

    def text(self, messages: Sequence[Message], prompt: PromptTemplate, *, label: str, **kw: Any) -> str:
        """The reply of :meth:`call` for a generator whose failure fails the whole output.

        Raises:
            GenerationFailure: the call failed or its reply was rejected (the record is in :attr:`audit`).
        """
        r = self.call(messages, prompt, label=label, **kw)
        if r.status != "ok":
            raise GenerationFailure(r.error_kind or "backend_error", f"{label}: {r.error}")
        return r.text

    def reject(self, record: CallRecord, reason: str) -> CallRecord:
        """Reject an accepted reply after a check the parser cannot make (e.g. a JSON reply without the expected
        structure): ``record`` becomes ``rejected`` and the cache will call again on the next run."""
        if record.status == "ok":
            record.status, record.error_kind, record.error = "rejected", REJECTED, reason
            record.set_parse(False, record.parse_method, reason)
            self.cache.reject(record.cache_key, reason)
        return record

    def skipped(self, label: str, reason: str, context: Mapping[str, Any] | None = None) -> CallRecord:
        """Record that no call was possible and a fallback value stands in (counted as skipped and a fallback)."""
        r = CallRecord(label=label, prompt_id="", prompt_sha256="", model=self.model_id, context=dict(context or {}),
                       status="skipped")
        r.set_parse(False, None, "not called")
        r.use_fallback(reason)
        return self.audit.add(r)

    # the audit's position, for the records of one answer ---------------------------------------------------
    def mark(self) -> int:
        """:meth:`CallAudit.mark` of :attr:`audit`."""
        return self.audit.mark()

    def records_since(self, mark: int) -> list[CallRecord]:
        """:meth:`CallAudit.since` of :attr:`audit`."""
        return self.audit.since(mark)

    # -------------------------------------------------------------------------------------------- plumbing
    def _record(self, rec: Mapping[str, Any], prompt: PromptTemplate, label: str, s: Sampling,
                context: Mapping[str, Any] | None) -> CallRecord:
        """The cache's record dict as a :class:`CallRecord` (the only place that reads that dict)."""
        texts = rec.get("texts") or []
        ok = rec.get("status") == "ok" and bool(texts) and isinstance(texts[0], str) and bool(texts[0].strip())
        reasons = rec.get("finish_reasons") or []
        return CallRecord(
            label=label, prompt_id=prompt.id, prompt_sha256=prompt.sha256, model=self.model_id,
            temperature=float(s.temperature), max_tokens=int(s.max_tokens), seed=s.seed, context=dict(context or {}),
            status="ok" if ok else "failed", text=texts[0] if ok else None, cached=bool(rec.get("cached")),
            cache_key=rec.get("key"), prompt_tokens=rec.get("prompt_tokens") if ok else None,
            completion_tokens=rec.get("completion_tokens") if ok else None,
            finish_reason=reasons[0] if ok and reasons else None,
            error_kind=None if ok else str(rec.get("error_kind") or "empty_content"),
            error=None if ok else str(rec.get("error") or "the backend returned no text"),
        )
