"""A scripted :class:`~mmir.llm.backends.Backend` for unit tests and dry runs: no model, canned replies.

Every MMDR prompt starts with a line ``MMDR judge step: <step>``; :class:`ScriptedBackend` answers by
step name. A reply is a string, a callable ``(prompt_text, n_images) -> str``, a list of those (consumed
in order, the last one repeated), or a :class:`~mmir.llm.backends.GenerationFailure` to raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mmir.llm.backends import Backend, Generation, GenerationFailure

STEP_RE = re.compile(r"^MMDR judge step:\s*(.+?)\s*$", re.MULTILINE)
Reply = str | Callable[[str, int], str] | GenerationFailure

#: Step names of the prompts (first line of each file).
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


class ScriptedBackend(Backend):
    """Backend answering MMDR judge prompts from a script.

    Args:
        replies: ``{step key or step name: reply or [replies]}``; step keys are those of :data:`STEPS`.
        default: reply for unscripted steps (``None``: raise ``GenerationFailure("backend_error")``).
        model: model id reported in cache keys and the manifest.

    Attributes:
        calls: ``(step, prompt_text, n_images)`` of every call, in order.
    """

    name = "scripted"

    def __init__(self, replies: Mapping[str, Reply | Sequence[Reply]] | None = None, *, default: Reply | None = None,
                 model: str = "scripted-judge"):
        super().__init__()
        self._model = model
        self.replies: dict[str, list[Reply]] = {}
        for k, v in (replies or {}).items():
            step = STEPS.get(k, k)
            self.replies[step] = list(v) if isinstance(v, (list, tuple)) else [v]
        self.default = default
        self.calls: list[tuple[str, str, int]] = []

    @property
    def model_id(self) -> str:
        """The configured model id."""
        return self._model

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        texts, n_images = [], 0
        for m in messages:
            c = m["content"]
            if isinstance(c, str):
                texts.append(c)
            else:
                for p in c:
                    if p["type"] == "text":
                        texts.append(p["text"])
                    else:
                        n_images += 1
        prompt = "\n".join(texts)
        m = STEP_RE.search(prompt)
        step = m.group(1) if m else ""
        self.calls.append((step, prompt, n_images))
        queue = self.replies.get(step)
        if queue:
            reply: Any = queue.pop(0) if len(queue) > 1 else queue[0]
        else:
            reply = self.default
        if reply is None:
            raise GenerationFailure("backend_error", f"no scripted reply for step {step!r}")
        if isinstance(reply, GenerationFailure):
            raise reply
        text = reply(prompt, n_images) if callable(reply) else str(reply)
        return Generation(texts=[text] * n, prompt_tokens=len(prompt) // 4, completion_tokens=len(text) // 4,
                          latency_s=0.0, finish_reasons=["stop"] * n, model=self._model)

    def steps_called(self) -> list[str]:
        """Step names of the calls so far, in order."""
        return [c[0] for c in self.calls]
