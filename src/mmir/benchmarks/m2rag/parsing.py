"""Reading M2RAG generator replies the way the M2RAG code does (spec §4); the judges' parse rules are named
parsers of :mod:`mmir.llm.parsers` (``last_integer`` §2.1/§6, ``first_integer`` §2.2, ``first_json`` §6.3-6.4).

* :func:`unwrap_markdown` -- the text inside a ```` ```markdown ```` fence (§4).
* :func:`strip_images`, :func:`strip_links` -- markdown images/links replaced by their alt/anchor text (§4.2).
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"\d+")
_FENCE_OPEN = "```markdown"
_FENCE = "```"
_MD_IMAGE = re.compile(r"!\[(.*?)\]\((.*?)\)")
_MD_LINK = re.compile(r"\[(.*?)\]\((.*?)\)")


def unwrap_markdown(reply: str) -> str:
    """The answer inside a ```` ```markdown ```` fence (spec §4).

    If ``reply`` contains ```` ```markdown ````, the text after it is kept up to the last ```` ``` ````; that
    closing fence is ignored when it is missing or lies in the first half of ``reply`` (measured, as in the
    released code, by its distance from the end). The result is stripped. A reply without the opening
    fence is returned unchanged.
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
