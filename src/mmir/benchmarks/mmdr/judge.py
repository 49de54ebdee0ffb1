"""Judge calls for the MMDR-Bench evaluator: one cached client, strict parsing, an audit log.

Every LLM call of the evaluator (FLAE features, task controller, evidence pairs, VEF, MOSAIC engines) goes
through :meth:`Judge.complete`, which

* renders a versioned prompt file from ``prompts/`` (``mmdr_*_v1.txt``, our own wording);
* calls the :class:`~mmir.llm.backends.Backend` through a
  :class:`~mmir.llm.cache.GenerationCache` when one is given (key: backend, model, revision,
  prompt id and sha256, rendered messages with image hashes, temperature, max tokens, seed) or directly;
* appends a :class:`JudgeCall` to the :class:`JudgeAudit`: raw reply, parse success and method, fields
  missing or invalid, whether the module's fixed fallback was used and why.

The published evaluator parses leniently (the whole reply as JSON, else the first ``{...}`` span, spec
§3) and falls back to fixed defaults when that yields nothing. We keep that behaviour for score parity,
but a reply that cannot be parsed is never silent: it is a counted failure in the audit
(:meth:`JudgeAudit.counts`, :meth:`JudgeAudit.fallback_counts`) that the exporter writes into the
manifest.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mmir.llm.backends import Backend, GenerationFailure
from mmir.llm.cache import GenerationCache, PromptTemplate, load_prompt

PROMPTS_DIR = Path(__file__).parent / "prompts"
DEFAULT_MAX_TOKENS = 4096  # spec §3: judge max output tokens

#: Audit module names (one per kind of judge call).
MODULES = (
    "flae_features", "controller", "evidence_pair", "vef",
    "mm_type", "mm_vqa", "mm_chart", "mm_ocr_chart", "mm_imgpair",
)


# ------------------------------------------------------------------------------------------------ parsing
_OBJ_SPAN = re.compile(r"\{.*\}", re.DOTALL)


def parse_json_object(text: str | None) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Lenient JSON-object parse of a judge reply (spec §3, "JSON robustness").

    Tries the whole (stripped) reply, then the span from the first ``{`` to the last ``}``.

    Returns:
        ``(obj, method, error)``: ``obj`` a non-empty dict or ``None``; ``method`` ``"whole"``/``"span"``
        or ``None``; ``error`` why parsing failed (``None`` on success). An empty object ``{}`` counts as
        a failure (the published code falls back on it).
    """
    if not text or not text.strip():
        return None, None, "empty reply"
    s = text.strip()
    err = "no JSON object in reply"
    try:
        obj = json.loads(s)
        if isinstance(obj, dict):
            return (obj, "whole", None) if obj else (None, None, "empty JSON object")
        err = f"reply is JSON {type(obj).__name__}, not an object"
    except json.JSONDecodeError as e:
        err = f"reply is not JSON ({e.msg})"
    m = _OBJ_SPAN.search(s)
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError as e:
            return None, None, f"{err}; first {{...}} span is not JSON ({e.msg})"
        if isinstance(obj, dict) and obj:
            return obj, "span", None
        return None, None, f"{err}; first {{...}} span is empty or not an object"
    return None, None, err


def parse_json_array(text: str | None) -> tuple[list[dict[str, Any]] | None, str | None, str | None]:
    """Lenient parse of a reply holding a JSON array of objects (MOSAIC chart engines).

    Code fences are dropped; the span from the first ``[`` to the last ``]`` is tried, then the whole
    reply. Non-object entries are dropped.

    Returns:
        ``(items, method, error)``; ``items`` is ``None`` when no array could be read (an empty array is a
        successful parse with no items).
    """
    if not text or not text.strip():
        return None, None, "empty reply"
    s = text.strip().replace("```json", "").replace("```", "")
    start, end = s.find("["), s.rfind("]")
    if start != -1 and end > start:
        try:
            data = json.loads(s[start : end + 1])
            if isinstance(data, list):
                return [d for d in data if isinstance(d, dict)], "span", None
        except json.JSONDecodeError:
            pass
    try:
        data = json.loads(s)
    except json.JSONDecodeError as e:
        return None, None, f"reply is not a JSON array ({e.msg})"
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)], "whole", None
    return None, None, f"reply is JSON {type(data).__name__}, not an array"


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


# -------------------------------------------------------------------------------------------------- audit
@dataclass
class JudgeCall:
    """Audit record of one judge call (spec §11: raw reply, parse success, fallback use).

    Attributes:
        module: one of :data:`MODULES`.
        prompt_id, prompt_sha256: the prompt template and the sha256 of its text.
        context: what the call was about (``task_id``, ``pair``, ``item``, ...).
        status: ``"ok"`` (the backend produced text), ``"generation_failed"``, or ``"skipped"`` (no call
            was possible, e.g. no logprobs for VQA; the fallback value is recorded).
        cached: served from the generation cache.
        raw_reply: the text the judge returned (``None`` when generation failed).
        parse_ok: the reply held the expected JSON; ``parse_method`` ``"whole"``/``"span"``.
        missing_fields, invalid_fields: expected fields absent, or present with an unusable value (the
            module then applies the published per-field default, recorded here).
        fallback_used, fallback_reason: the module's fixed fallback replaced the reply.
    """

    module: str
    prompt_id: str
    prompt_sha256: str
    model: str
    temperature: float
    max_tokens: int
    seed: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    cached: bool = False
    cache_key: str | None = None
    raw_reply: str | None = None
    error: str | None = None
    parse_ok: bool = False
    parse_method: str | None = None
    parse_error: str | None = None
    missing_fields: list[str] = field(default_factory=list)
    invalid_fields: list[str] = field(default_factory=list)
    fallback_used: bool = False
    fallback_reason: str | None = None
    latency_s: float = 0.0

    def set_parse(self, ok: bool, method: str | None, error: str | None) -> None:
        """Record the outcome of parsing ``raw_reply``."""
        self.parse_ok, self.parse_method, self.parse_error = ok, method, error

    def use_fallback(self, reason: str) -> None:
        """Record that the module's fixed fallback replaced this reply."""
        self.fallback_used, self.fallback_reason = True, reason

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


class JudgeAudit:
    """Thread-safe list of :class:`JudgeCall` records with per-module counts."""

    def __init__(self) -> None:
        self.records: list[JudgeCall] = []
        self._lock = threading.Lock()

    def add(self, call: JudgeCall) -> JudgeCall:
        """Append ``call`` and return it (modules keep updating the same object)."""
        with self._lock:
            self.records.append(call)
        return call

    def __len__(self) -> int:
        return len(self.records)

    def for_context(self, **match: Any) -> list[JudgeCall]:
        """Records whose context holds every ``key=value`` of ``match``."""
        return [r for r in self.records if all(r.context.get(k) == v for k, v in match.items())]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per module: ``calls`` (records), ``cached``, ``skipped`` (no call made, a fallback value used),
        ``generation_failures``, ``parse_failures``, ``partial`` (parsed, but fields missing/invalid) and
        ``fallbacks``."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            for r in self.records:
                c = out.setdefault(r.module, dict.fromkeys(
                    ("calls", "cached", "skipped", "generation_failures", "parse_failures", "partial", "fallbacks"), 0))
                c["calls"] += 1
                c["cached"] += int(r.cached)
                c["skipped"] += int(r.status == "skipped")
                c["generation_failures"] += int(r.status == "generation_failed")
                c["parse_failures"] += int(r.status == "ok" and not r.parse_ok)
                c["partial"] += int(r.parse_ok and bool(r.missing_fields or r.invalid_fields))
                c["fallbacks"] += int(r.fallback_used)
        return out

    def fallback_counts(self) -> dict[str, int]:
        """``{module: number of calls answered by the fixed fallback}`` (every module that made calls)."""
        return {m: c["fallbacks"] for m, c in self.counts().items()}

    def to_jsonl(self) -> str:
        """All records as JSON lines."""
        with self._lock:
            return "".join(json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n" for r in self.records)

    def write_jsonl(self, path: str | Path) -> None:
        """Write :meth:`to_jsonl` to ``path`` atomically."""
        from mmir.core.io import write_text

        write_text(path, self.to_jsonl())


# -------------------------------------------------------------------------------------------------- judge
@dataclass
class Reply:
    """Text of one judge call (``None`` when generation failed) and its audit record."""

    text: str | None
    call: JudgeCall


class Judge:
    """The evaluator's single LLM client.

    Args:
        backend: any :class:`~mmir.llm.backends.Backend` (a scripted stub in unit tests).
        cache: optional :class:`~mmir.llm.cache.GenerationCache`; without one every call hits the backend.
        audit: where call records go (a new :class:`JudgeAudit` by default).
        max_tokens: output limit per call (spec §3: 4096).
        seed: base sampling seed passed to the backend (``None``: the backend's default).
        prompts_dir: folder of the prompt files (default: this package's ``prompts/``).
        provider: free-form provider label for the manifest (``"openai"``, ``"llama_cpp"``, ...).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        cache: GenerationCache | None = None,
        audit: JudgeAudit | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        seed: int | None = None,
        prompts_dir: str | Path | None = None,
        provider: str | None = None,
    ):
        self.backend, self.cache = backend, cache
        self.audit = audit if audit is not None else JudgeAudit()
        self.max_tokens, self.seed = max_tokens, seed
        self.prompts_dir = Path(prompts_dir) if prompts_dir is not None else PROMPTS_DIR
        self.provider = provider or getattr(backend, "name", None)
        self._templates: dict[str, PromptTemplate] = {}
        self._lock = threading.Lock()

    # identity -----------------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """The judge model name."""
        return self.backend.model_id

    def identity(self) -> dict[str, Any]:
        """``{"provider", "backend", "model", "revision"}`` for the manifest."""
        ident = dict(self.backend.cache_identity())
        return {"provider": self.provider, **ident}

    def template(self, name: str) -> PromptTemplate:
        """The prompt template ``<prompts_dir>/<name>.txt`` (read once).

        Raises:
            FileNotFoundError: no such template.
        """
        with self._lock:
            if name not in self._templates:
                self._templates[name] = load_prompt(name, self.prompts_dir)
            return self._templates[name]

    def prompt_hashes(self) -> dict[str, str]:
        """``{template id: sha256}`` of every template used so far."""
        with self._lock:
            return {k: t.sha256 for k, t in sorted(self._templates.items())}

    # calls --------------------------------------------------------------------------------------------
    def complete(
        self,
        module: str,
        prompt: str,
        fields: Mapping[str, Any],
        *,
        temperature: float,
        images: Sequence[bytes] = (),
        system: str | None = None,
        seed_offset: int = 0,
        context: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Reply:
        """Render ``prompt`` with ``fields``, call the judge once and record the call.

        Args:
            module: audit module name (:data:`MODULES`).
            prompt: template name, e.g. ``"mmdr_evidence_pair_v1"``.
            fields: values for the template's ``$placeholders``.
            temperature: sampling temperature (the spec's per-judge value).
            images: encoded images placed before the text in the user message.
            system: optional system message.
            seed_offset: added to the base seed (used to make the two controller calls independent).
            context: stored in the audit record (task id, pair index, ...).
            max_tokens: override of the judge's output limit.

        Returns:
            A :class:`Reply`; ``text`` is ``None`` when the backend failed (the failure is recorded with
            ``status="generation_failed"``). Parsing is left to the caller, who records it on ``reply.call``.

        Raises:
            ValueError: the template's placeholders and ``fields`` differ.
            UnsupportedInputError: the backend cannot take the messages (e.g. images on a text-only model).
        """
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
        mt = max_tokens or self.max_tokens
        call = JudgeCall(
            module=module, prompt_id=tpl.id, prompt_sha256=tpl.sha256, model=self.model_id,
            temperature=float(temperature), max_tokens=mt, seed=seed, context=dict(context or {}),
        )
        t0 = time.monotonic()
        if self.cache is not None:
            rec = self.cache.cached_generate(
                self.backend, messages, tpl.id, tpl.text, temperature=temperature, max_tokens=mt, seed=seed, n=1,
            )
            call.cached, call.cache_key = bool(rec.get("cached")), rec.get("key")
            if rec.get("status") == "ok" and rec.get("texts"):
                call.raw_reply = rec["texts"][0]
            else:
                call.status, call.error = "generation_failed", str(rec.get("error") or rec.get("error_kind"))
        else:
            try:
                gen = self.backend.generate(messages, temperature=temperature, max_tokens=mt, seed=seed, n=1)
                call.raw_reply = gen.texts[0]
            except GenerationFailure as f:
                call.status, call.error = "generation_failed", str(f)
        call.latency_s = time.monotonic() - t0
        self.audit.add(call)
        return Reply(call.raw_reply, call)

    def record_skipped(self, module: str, reason: str, context: Mapping[str, Any] | None = None) -> JudgeCall:
        """Record that a judge value came from a fallback without any call (counted as a fallback)."""
        call = JudgeCall(module=module, prompt_id="", prompt_sha256="", model=self.model_id, temperature=0.0,
                         max_tokens=0, context=dict(context or {}), status="skipped")
        call.set_parse(False, None, "not called")
        call.use_fallback(reason)
        return self.audit.add(call)

    def complete_json(self, module: str, prompt: str, fields: Mapping[str, Any], **kw: Any) -> tuple[dict[str, Any] | None, JudgeCall]:
        """:meth:`complete`, then :func:`parse_json_object`; the parse outcome is recorded on the call.

        Returns:
            ``(obj, call)``; ``obj`` is ``None`` when generation or parsing failed (the caller decides the
            fallback and records it with :meth:`JudgeCall.use_fallback`).
        """
        reply = self.complete(module, prompt, fields, **kw)
        if reply.text is None:
            reply.call.set_parse(False, None, "no reply (generation failed)")
            return None, reply.call
        obj, method, err = parse_json_object(reply.text)
        reply.call.set_parse(obj is not None, method, err)
        return obj, reply.call
