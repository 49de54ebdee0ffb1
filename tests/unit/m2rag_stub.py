"""The scripted backend the M2RAG unit tests share (no model)."""

from __future__ import annotations

from types import SimpleNamespace


class Stub:
    """Backend stub: ``reply(prompt_text) -> str`` (an Exception it returns is raised).

    Records every message list in ``calls`` and every first-message content in ``prompts``.
    """

    def __init__(self, reply):
        self.reply, self.calls, self.prompts = reply, [], []

    def generate(self, messages, *, temperature, max_tokens, seed, n):
        self.calls.append(messages)
        content = messages[0]["content"]
        self.prompts.append(content)
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        out = self.reply(text)
        if isinstance(out, Exception):
            raise out
        return SimpleNamespace(texts=[out])
