"""Parsing model replies the way the M2RAG code does (spec §2.1, §2.2, §4, §6).

* :func:`last_int` -- the last run of digits (regex ``\\d+``), clamped to ``[0, upper]``; the rule of the
  text-chunk scorer (§2.1) and of every GPT-4o 0-10 judge (§6). Like the released code, ``"8/10"`` reads as
  10 and ``"-3"`` as 3.
* :func:`first_int` -- the first run of digits, clamped; the rule of the image scorer (§2.2).
* :func:`unwrap_markdown` -- the text inside a ```` ```markdown ```` fence (§4).
* :func:`strip_images`, :func:`strip_links` -- markdown images/links replaced by their alt/anchor text (§4.2).
* :func:`extract_json` -- the first JSON value in a reply (our native RAGAS metrics, §6.3-6.4).
"""

from __future__ import annotations

import json
import re
from typing import Any

_DIGITS = re.compile(r"\d+")
_FENCE_OPEN = "```markdown"
_FENCE = "```"
_MD_IMAGE = re.compile(r"!\[(.*?)\]\((.*?)\)")
_MD_LINK = re.compile(r"\[(.*?)\]\((.*?)\)")


def clamp(value: int, lower: int = 0, upper: int = 10) -> int:
    """``value`` limited to ``[lower, upper]``."""
    return max(lower, min(upper, value))


def last_int(reply: str, upper: int = 10) -> int | None:
    """The last integer (digit run) in ``reply`` clamped to ``[0, upper]``; ``None`` when there is none.

    >>> last_int("blah\\n8"), last_int("12"), last_int("no digits")
    (8, 10, None)
    """
    found = _DIGITS.findall(reply or "")
    return clamp(int(found[-1]), 0, upper) if found else None


def first_int(reply: str, upper: int = 10) -> int | None:
    """The first integer (digit run) in ``reply`` clamped to ``[0, upper]``; ``None`` when there is none
    (the image-scorer rule, spec §2.2)."""
    m = _DIGITS.search(reply or "")
    return clamp(int(m.group(0)), 0, upper) if m else None


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


def extract_json(reply: str) -> Any:
    """The first JSON object or array in ``reply`` (code fences and surrounding prose allowed).

    Raises:
        ValueError: no position in ``reply`` starts a decodable JSON object/array.
    """
    dec = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", reply or ""):
        try:
            value, _ = dec.raw_decode(reply, m.start())
        except json.JSONDecodeError:
            continue
        return value
    raise ValueError(f"no JSON object or array in the reply ({len(reply or '')} chars)")


__all__ = ["clamp", "extract_json", "first_int", "last_int", "strip_images", "strip_links", "unwrap_markdown"]
