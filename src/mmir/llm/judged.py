"""Judged metrics as declarations: a prompt file, a reply parser, a divisor and (optionally) a stricter retry
prompt. :func:`judge` runs one through an :class:`~mmir.llm.client.LLMClient`, so a new judged metric needs a
prompt file in the benchmark's ``prompts/`` folder and one :class:`JudgedMetric` line, nothing else."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmir.llm.client import LLMClient
from mmir.llm.parsers import ReplyParser
from mmir.llm.prompts import PromptLibrary, PromptTemplate
from mmir.llm.records import CallRecord

#: ``(template, fields) -> messages``; the default renders the template as one user message.
MessageBuilder = Callable[[PromptTemplate, Mapping[str, Any]], list[dict[str, Any]]]


def single_user_message(template: PromptTemplate, fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``[{"role": "user", "content": template.render(**fields)}]``."""
    return [{"role": "user", "content": template.render(**fields)}]


@dataclass(frozen=True)
class JudgedMetric:
    """A judged metric: a prompt file, a parser, ``value = raw / divisor``, and an optional ``retry_prompt``."""

    name: str
    prompt: str
    parser: ReplyParser
    divisor: float = 1.0
    retry_prompt: str | None = None

    @property
    def prompts(self) -> tuple[str, ...]:
        """The prompt, then the retry prompt if any."""
        return (self.prompt,) if self.retry_prompt is None else (self.prompt, self.retry_prompt)


@dataclass
class JudgedValue:
    """The outcome of :func:`judge`: ``value`` (``raw / divisor``; ``None`` = a counted failure), ``raw`` (the
    parser's value), ``status`` (``ok``, ``retried_ok`` -- the retry prompt gave it --, ``failed``: no usable
    reply, see the records for why) and the ``records`` of every call made, in order."""

    value: float | None
    raw: Any
    status: str
    records: list[CallRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A usable value."""
        return self.value is not None

    @property
    def reply(self) -> str | None:
        """The last reply text (``None`` when no call produced text)."""
        return next((r.text for r in reversed(self.records) if r.text is not None), None)


def judge(client: LLMClient, metric: JudgedMetric, prompts: PromptLibrary, fields: Mapping[str, Any], *,
          build: MessageBuilder = single_user_message, context: Mapping[str, Any] | None = None,
          **sampling: Any) -> JudgedValue:
    """Judge once (and once more with ``metric.retry_prompt`` when the first reply is unusable).

    Returns:
        :class:`JudgedValue`; never raises for a failed call or a rejected reply.

    Raises:
        ValueError: ``fields`` do not match the prompt's placeholders; FileNotFoundError: no such prompt file.
    """
    records: list[CallRecord] = []
    for attempt, name in enumerate(metric.prompts):
        tpl = prompts.get(name)
        r = client.call(build(tpl, fields), tpl, label=metric.name, parser=metric.parser, context=context, **sampling)
        records.append(r)
        if r.ok:
            return JudgedValue(r.value / metric.divisor, r.value, "ok" if attempt == 0 else "retried_ok", records)
    return JudgedValue(None, None, "failed", records)
