"""The one scripted backend of the test suite: a real :class:`~mmir.llm.backends.base.Backend` subclass (so every
call goes through the real :class:`~mmir.llm.cache.GenerationCache` and :class:`~mmir.llm.client.LLMClient`)
that answers from a script instead of a model.

A *reply* is a string, an exception to raise (e.g. ``GenerationFailure("timeout", "slow")``), a callable
``(call: ScriptedCall) -> reply`` or a list of replies (consumed in order, the last one repeated). The script:

* ``reply``: one reply for every call;
* ``steps``: ``{MMDR step key or name: reply}`` -- every MMDR judge prompt starts with ``MMDR judge step: <step>``
  (keys of :data:`STEPS` are short names);
* ``contains``: ``{substring: reply}``, the first key found in the prompt text wins;
* ``default``: the reply for anything else (``None``: the call fails with ``backend_error``).

Each call is recorded in :attr:`ScriptedBackend.calls` as a :class:`ScriptedCall`: the prompt text (a ``str``)
with ``step``, ``n_images``, ``messages`` and the sampling arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mmir.llm.backends import Backend, Generation, GenerationFailure

STEP_RE = re.compile(r"^MMDR judge step:\s*(.+?)\s*$", re.MULTILINE)

#: Step names of the MMDR prompts (first line of each file) by short key.
STEPS = {
    "flae": "FLAE writing-quality features",
    "controller": "task controller (metric weighting)",
    "evidence": "claim-source evidence check",
    "vef": "visual evidence fidelity (VEF)",
    "mm_type": "figure type classification",
    "vqa": "does the image show the statement",
    "chart": "table/chart claim check (text)",
    "ocr": "table/chart claim check (image)",
    "imgpair": "claim about two images",
}


class ScriptedCall(str):
    """The text of one call's messages (each message's text parts concatenated, messages joined by newlines), with
    ``step`` (the MMDR step or ""),
    ``n_images``, ``messages`` and ``sampling`` (temperature, max_tokens, seed, n)."""

    step: str
    n_images: int
    messages: list
    sampling: dict

    @classmethod
    def of(cls, messages: Sequence[Mapping[str, Any]], sampling: dict) -> ScriptedCall:
        texts, n_images = [], 0
        for m in messages:
            c = m["content"]
            if isinstance(c, str):
                texts.append(c)
                continue
            texts.append("".join(p["text"] for p in c if p["type"] == "text"))
            n_images += sum(p["type"] != "text" for p in c)
        self = cls("\n".join(texts))
        m = STEP_RE.search(self)
        self.step, self.n_images, self.messages, self.sampling = m.group(1) if m else "", n_images, list(messages), sampling
        return self


Reply = str | BaseException | Callable[[ScriptedCall], Any] | Sequence[Any]


class ScriptedBackend(Backend):
    """A backend answering from a script (see the module docstring).

    Args:
        reply: the reply to every call (checked after ``steps`` and ``contains``).
        steps: MMDR step -> reply.
        contains: prompt substring -> reply.
        default: reply when nothing else matches; ``None`` = fail the call.
        model, revision: the model id and weights revision (both enter cache keys); name: the backend kind;
        max_concurrency: as a real backend.
        finish_reason: reported for every reply.
    """

    name = "scripted"

    def __init__(self, reply: Reply | None = None, *, steps: Mapping[str, Reply] | None = None,
                 contains: Mapping[str, Reply] | None = None, default: Reply | None = None, model: str = "scripted",
                 revision: str | None = None, name: str | None = None, max_concurrency: int = 1,
                 finish_reason: str = "stop"):
        super().__init__()
        self._model, self._revision = model, revision
        if name is not None:
            self.name = name
        self.max_concurrency = max_concurrency
        self.finish_reason = finish_reason
        self.steps = {STEPS.get(k, k): self._queue(v) for k, v in (steps or {}).items()}
        self.contains = {k: self._queue(v) for k, v in (contains or {}).items()}
        self.reply = None if reply is None else self._queue(reply)
        self.default = None if default is None else self._queue(default)
        self.calls: list[ScriptedCall] = []

    @staticmethod
    def _queue(v: Reply) -> list[Any]:
        return list(v) if isinstance(v, (list, tuple)) else [v]

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def model_revision(self) -> str | None:
        return self._revision

    @property
    def prompts(self) -> list[str]:
        """The prompt text of every call, in order."""
        return [str(c) for c in self.calls]

    def steps_called(self) -> list[str]:
        """The MMDR step of every call, in order."""
        return [c.step for c in self.calls]

    def _pick(self, call: ScriptedCall) -> Any:
        queue = self.steps.get(call.step) if call.step else None
        if queue is None:
            queue = next((q for k, q in self.contains.items() if k in call), None)
        if queue is None:
            queue = self.reply if self.reply is not None else self.default
        if queue is None:
            return GenerationFailure("backend_error", f"no scripted reply for {call.step or call[:60]!r}")
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        return reply(call) if callable(reply) else reply

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        call = ScriptedCall.of(messages, {"temperature": temperature, "max_tokens": max_tokens, "seed": seed, "n": n})
        self.calls.append(call)
        out = self._pick(call)
        if isinstance(out, BaseException):
            raise out
        text = str(out)
        return Generation(texts=[text] * n, prompt_tokens=len(call) // 4, completion_tokens=len(text) // 4,
                          latency_s=0.0, finish_reasons=[self.finish_reason] * n, model=self._model)
