"""Model calls for the M2RAG modules: versioned prompt files, message assembly, one cached call.

Prompts live in ``mmir/m2rag/prompts/<name>_v<N>.txt`` (our own paraphrases of the authors' prompts, spec
§2, §4, §6) and use :class:`string.Template` fields (``$query``). A new wording is a new file; the text hash
is in every cache key anyway (:mod:`mmir.llm.cache`).

A prompt that carries images is assembled from *segments*: strings and :class:`ImagePart` s, in order.
With no image the message content is one string (any text-only backend takes it); otherwise it is a list of
``{"type": "text"}`` / ``{"type": "image"}`` parts (:mod:`mmir.llm.backends`).

:class:`Caller` runs one message list through a :class:`~mmir.llm.backends.Backend` (or any object
with the same ``generate`` method, e.g. a test stub), through a
:class:`~mmir.llm.cache.GenerationCache` when one is given, and keeps a :class:`CallRecord` per call.
A call that yields no text raises :class:`~mmir.llm.backends.GenerationFailure`; it is never turned
into an empty reply.
"""

from __future__ import annotations

import functools
import string
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mmir.llm.backends import GenerationFailure, Message
from mmir.llm.cache import GenerationCache, PromptTemplate, load_prompt

PROMPTS_DIR = Path(__file__).parent / "prompts"


@functools.cache
def prompt(name: str) -> PromptTemplate:
    """The M2RAG prompt template ``name`` (e.g. ``"judge_fluency_v1"``) from this package's ``prompts/``.

    Raises:
        FileNotFoundError: no such template (the message lists those available).
    """
    return load_prompt(name, PROMPTS_DIR)


#: Where an image (or its description) goes in a prompt template.
IMAGE_SLOT = "[[IMAGE]]"


def render_around_slot(template: PromptTemplate, **fields: Any) -> tuple[str, str]:
    """The template text before and after its :data:`IMAGE_SLOT`, each rendered with ``fields``.

    The two halves are rendered separately, so slot-like text inside a field value cannot move the image.

    Raises:
        ValueError: the template has no slot, or ``fields`` misses or adds a placeholder.
    """
    if IMAGE_SLOT not in template.text:
        raise ValueError(f"prompt '{template.id}' has no {IMAGE_SLOT} slot")
    wanted = set(template.fields)
    missing, extra = sorted(wanted - set(fields)), sorted(set(fields) - wanted)
    if missing or extra:
        raise ValueError(f"prompt '{template.id}' takes fields {sorted(wanted)}; missing {missing}, unknown {extra}")
    before, after = template.text.split(IMAGE_SLOT, 1)
    values = {k: str(v) for k, v in fields.items()}
    return string.Template(before).substitute(values), string.Template(after).substitute(values)


@dataclass(frozen=True)
class ImagePart:
    """An image inside a prompt: encoded bytes (already thumbnailed by the caller)."""

    data: bytes


Segment = str | ImagePart


def user_messages(segments: Sequence[Segment]) -> list[dict[str, Any]]:
    """One user message from ``segments``; adjacent strings are merged.

    Returns:
        ``[{"role": "user", "content": str}]`` when there is no image, else the list-of-parts form.
    """
    parts: list[dict[str, Any]] = []
    for seg in segments:
        if isinstance(seg, ImagePart):
            parts.append({"type": "image", "image": seg.data})
        elif parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += seg
        elif seg:
            parts.append({"type": "text", "text": seg})
    if all(p["type"] == "text" for p in parts):
        return [{"role": "user", "content": "".join(p["text"] for p in parts)}]
    return [{"role": "user", "content": parts}]


@dataclass(frozen=True)
class CallSettings:
    """Sampling settings of every call a :class:`Caller` makes.

    The authors call the APIs with provider defaults (spec §4.4, §6); our backends need explicit values, so
    the defaults here are greedy decoding (``temperature=0``), ``seed=0`` and ``max_tokens`` per call kind
    (long for answers, short for judges) -- record them with the results.
    """

    temperature: float = 0.0
    max_tokens: int = 2048
    seed: int | None = 0


@dataclass
class CallRecord:
    """What one call did: ``stage`` (e.g. ``"multi_stage.place[3]"``), ``template_id``, ``ok``, ``cached``,
    the reply ``text`` (or ``None``) and the failure ``error`` (or ``None``)."""

    stage: str
    template_id: str
    ok: bool
    cached: bool
    text: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class Caller:
    """Runs prompts through one backend, optionally cached, and records each call.

    Args:
        backend: a :class:`~mmir.llm.backends.Backend` or any object with
            ``generate(messages, *, temperature, max_tokens, seed, n) -> obj with .texts``.
        cache: a :class:`~mmir.llm.cache.GenerationCache`; needs a real Backend (``cache_identity``).
        settings: :class:`CallSettings`.
    """

    backend: Any
    cache: GenerationCache | None = None
    settings: CallSettings = field(default_factory=CallSettings)
    records: list[CallRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[Message], template: PromptTemplate, *, stage: str,
                 max_tokens: int | None = None) -> str:
        """The first completion for ``messages``.

        Args:
            messages: chat messages (see :func:`user_messages`).
            template: the template they were rendered from (its id and text enter the cache key).
            stage: label stored in the :class:`CallRecord`.
            max_tokens: overrides ``settings.max_tokens`` for this call.

        Raises:
            GenerationFailure: the backend produced no usable text (also when a cached failure is replayed
                and the retry fails).
        """
        mt = int(max_tokens or self.settings.max_tokens)
        s = self.settings
        try:
            if self.cache is not None:
                rec = self.cache.cached_generate(self.backend, messages, template.id, template.text,
                                                 temperature=s.temperature, max_tokens=mt, seed=s.seed, n=1)
                if rec.get("status") != "ok":
                    raise GenerationFailure(str(rec.get("error_kind", "backend_error")), str(rec.get("error", "")),
                                            retries=int(rec.get("retries") or 0))
                text, cached = rec["texts"][0], bool(rec.get("cached"))
            else:
                gen = self.backend.generate(messages, temperature=s.temperature, max_tokens=mt, seed=s.seed, n=1)
                text, cached = gen.texts[0], False
            if not isinstance(text, str) or not text.strip():
                raise GenerationFailure("empty_content", f"{stage}: the backend returned no text")
        except GenerationFailure as f:
            with self._lock:
                self.records.append(CallRecord(stage, template.id, ok=False, cached=False, error=str(f)))
            raise
        with self._lock:
            self.records.append(CallRecord(stage, template.id, ok=True, cached=cached, text=text))
        return text

    def mark(self) -> int:
        """Position in ``records`` now; pass it to :meth:`records_since` to get the calls made after it."""
        with self._lock:
            return len(self.records)

    def records_since(self, mark: int) -> list[CallRecord]:
        """The records appended after :meth:`mark` returned ``mark`` (calls made concurrently through the
        same caller by other threads are included: use one caller per thread to keep them apart)."""
        with self._lock:
            return list(self.records[mark:])

    def take_records(self) -> list[CallRecord]:
        """The records so far, emptying the list (one answer's or evaluation's calls at a time)."""
        with self._lock:
            out, self.records = self.records, []
        return out


__all__ = ["CallRecord", "CallSettings", "Caller", "IMAGE_SLOT", "ImagePart", "PROMPTS_DIR", "Segment", "prompt",
           "render_around_slot", "user_messages"]
