"""Reading M2RAG generator replies the way the M2RAG code does (spec §4); judge parse rules are in :mod:`mmir.llm.parsers`."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"\d+")
_FENCE_OPEN = "```markdown"
_FENCE = "```"
_MD_IMAGE = re.compile(r"!\[(.*?)\]\((.*?)\)")
_MD_LINK = re.compile(r"\[(.*?)\]\((.*?)\)")


def unwrap_markdown(reply: str) -> str:
    """The answer inside a ```` ```markdown ```` fence (spec §4), stripped; unchanged without the opening fence.

    The closing fence is ignored when missing or in the first half of ``reply`` (as the released code).
    """
    start = reply.find(_FENCE_OPEN)
    if start < 0:
        return reply
    body = start + len(_FENCE_OPEN)
    close = reply.rfind(_FENCE)
    end: int | None = close
    if close < body or len(reply) - (close + len(_FENCE)) > 0.5 * len(reply):
        end = None
    return reply[body:end].strip()


def strip_images(text: str) -> str:
    """Markdown images ``![alt](url)`` replaced by their alt text."""
    return _MD_IMAGE.sub(lambda m: m.group(1), text)


def strip_links(text: str) -> str:
    """Markdown links ``[text](url)`` replaced by their anchor text."""
    return _MD_LINK.sub(lambda m: m.group(1), text)


__all__ = ["strip_images", "strip_links", "unwrap_markdown"]
