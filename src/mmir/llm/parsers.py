"""Named reply parsers: each benchmark's published parse rule, one object per rule.

A :class:`ReplyParser` maps a reply text to a :class:`Parsed` (``value``, ``ok``, ``method``, ``error``). A
reply it does not accept (``ok`` False) is a counted failure of the call: :class:`~mmir.llm.client.LLMClient`
marks it rejected in the generation cache, so the next run calls the backend again; what value stands in for it
is the benchmark's policy, not the parser's.

========================  ==============================================================================
name                      rule (source)
========================  ==============================================================================
``last_integer``          last digit run (regex ``\\d+``) clamped to [0, 10]; none = rejected
                          (``shared/specs/m2rag.md`` §2.1 chunk scorer, §6 the 0-10 judges; "8/10" reads 10)
``first_integer``         first digit run clamped to [0, 10]; none = rejected (m2rag.md §2.2 image scorer)
``first_json``            first decodable JSON object or array (our native RAGAS judges, m2rag.md §6.3-6.4)
``json_object``           the whole reply as JSON, else the first ``{`` .. last ``}`` span; a non-empty
                          object (``shared/specs/mmdr-bench.md`` §3 "JSON robustness")
``json_array``            code fences dropped, the first ``[`` .. last ``]`` span, else the whole reply; a
                          JSON array, non-object entries dropped (mmdr-bench.md §6.4 chart engines)
``yes_no``                1.0 for a YES without NO, 0.0 for the reverse (word match); else rejected
                          (mmdr-bench.md §6.4 VQA row, asked as text)
``score_0_100``           RAG judge, strict: JSON ``{"score": n}``, ``Score: n`` (any case, markdown emphasis),
                          ``n/100`` or a bare number; in [0, 100], never clipped (README "RAG QA")
``search_query``          the text after the LAST ``Search query:`` (case-insensitive), stripped of quotes and
                          asterisks; no marker or nothing after it = rejected (MM-BRIGHT §5, Figure 14)
``text``                  any non-empty text (generators)
========================  ==============================================================================
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Parsed:
    """Outcome of parsing one reply: ``value`` (``None`` when rejected), ``ok``, ``method`` (how it was read,
    e.g. ``"whole"``/``"span"``) and ``error`` (why it was rejected)."""

    value: Any = None
    ok: bool = False
    method: str | None = None
    error: str | None = None


def _reject(error: str) -> Parsed:
    return Parsed(None, False, None, error)


@dataclass(frozen=True)
class ReplyParser:
    """A named parse rule ``parser(text) -> Parsed``; ``source`` says where the rule is specified."""

    name: str
    source: str
    fn: Callable[[str], Parsed]

    def __call__(self, text: str | None) -> Parsed:
        if not isinstance(text, str) or not text.strip():
            return _reject("empty reply")
        return self.fn(text)


# ------------------------------------------------------------------------------------------- integers
_DIGITS = re.compile(r"\d+")


def clamp(value: int, lower: int = 0, upper: int = 10) -> int:
    """``value`` limited to ``[lower, upper]``."""
    return max(lower, min(upper, value))


def _last_integer(text: str) -> Parsed:
    found = _DIGITS.findall(text)
    return Parsed(clamp(int(found[-1])), True, "last_integer") if found else _reject("no integer in the reply")


def _first_integer(text: str) -> Parsed:
    m = _DIGITS.search(text)
    return Parsed(clamp(int(m.group(0))), True, "first_integer") if m else _reject("no integer in the reply")


# ---------------------------------------------------------------------------------------------- JSON
_OBJ_SPAN = re.compile(r"\{.*\}", re.DOTALL)


def _first_json(text: str) -> Parsed:
    dec = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        return Parsed(value, True, "first_json")
    return _reject(f"no JSON object or array in the reply ({len(text)} chars)")


def _json_object(text: str) -> Parsed:
    s = text.strip()
    try:
        obj = json.loads(s)
        if isinstance(obj, dict):
            return Parsed(obj, True, "whole") if obj else _reject("empty JSON object")
        err = f"reply is JSON {type(obj).__name__}, not an object"
    except json.JSONDecodeError as e:
        err = f"reply is not JSON ({e.msg})"
    m = _OBJ_SPAN.search(s)
    if not m:
        return _reject(err)
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError as e:
        return _reject(f"{err}; first {{...}} span is not JSON ({e.msg})")
    if isinstance(obj, dict) and obj:
        return Parsed(obj, True, "span")
    return _reject(f"{err}; first {{...}} span is empty or not an object")


def _json_array(text: str) -> Parsed:
    s = text.strip().replace("```json", "").replace("```", "")
    start, end = s.find("["), s.rfind("]")
    if start != -1 and end > start:
        try:
            data = json.loads(s[start : end + 1])
            if isinstance(data, list):
                return Parsed([d for d in data if isinstance(d, dict)], True, "span")
        except json.JSONDecodeError:
            pass
    try:
        data = json.loads(s)
    except json.JSONDecodeError as e:
        return _reject(f"reply is not a JSON array ({e.msg})")
    if isinstance(data, list):
        return Parsed([d for d in data if isinstance(d, dict)], True, "whole")
    return _reject(f"reply is JSON {type(data).__name__}, not an array")


# ---------------------------------------------------------------------------------------------- words
_YES, _NO = re.compile(r"\byes\b"), re.compile(r"\bno\b")


def yes_no_score(text: str | None) -> float:
    """1.0 if the answer says yes and not no, 0.0 for the reverse, else 0.5 (word match, case-insensitive)."""
    t = (text or "").strip().lower()
    yes, no = bool(_YES.search(t)), bool(_NO.search(t))
    return 1.0 if yes and not no else 0.0 if no and not yes else 0.5


def _yes_no(text: str) -> Parsed:
    score = yes_no_score(text)
    return Parsed(score, True, "yes_no") if score != 0.5 else _reject("answer is neither a clear YES nor NO")


_SCORE_JSON = re.compile(r"\{[^{}]*\}", re.S)
_LABELLED = re.compile(r"score\**\s*[:=]?\s*\**\s*(-?\d+(?:\.\d+)?)", re.I)
_OVER_100 = re.compile(r"(-?\d+(?:\.\d+)?)\s*/\s*100\b")
_ONLY_NUMBER = re.compile(r"^\s*\**\s*(-?\d+(?:\.\d+)?)\s*\**\s*\.?\s*$")


def _score_0_100(text: str) -> Parsed:
    value, method = None, None
    for blob in _SCORE_JSON.findall(text):
        try:
            obj = json.loads(blob)
        except json.JSONDecodeError:
            continue
        s = obj.get("score") if isinstance(obj, dict) else None
        if isinstance(s, (int, float)) and not isinstance(s, bool):
            value, method = float(s), "json"
            break
    if value is None:
        for name, pat in (("labelled", _LABELLED), ("over_100", _OVER_100), ("number", _ONLY_NUMBER)):
            m = pat.search(text)
            if m:
                value, method = float(m.group(1)), name
                break
    if value is None:
        return _reject("no score in the reply")
    if not math.isfinite(value) or not 0 <= value <= 100:
        return _reject(f"score {value:g} is outside [0, 100]")
    return Parsed(value, True, method)


def parse_marked_answer(text: str, marker: str = "Search query:") -> str | None:
    """The text after the LAST occurrence of ``marker`` (case-insensitive), stripped of whitespace and
    surrounding quotes/asterisks; ``None`` when the marker is absent or nothing follows it."""
    idx = text.lower().rfind(marker.lower())
    if idx < 0:
        return None
    answer = text[idx + len(marker) :].strip().strip("*").strip().strip("\"'`").strip()
    return answer or None


def _search_query(text: str) -> Parsed:
    answer = parse_marked_answer(text)
    return Parsed(answer, True, "marker") if answer else _reject("no text after a 'Search query:' marker")


def _text(text: str) -> Parsed:
    return Parsed(text, True, "text")


# ------------------------------------------------------------------------------------------- registry
LAST_INTEGER = ReplyParser("last_integer", "shared/specs/m2rag.md §2.1, §6 (last \\d+ clamped to [0, 10])", _last_integer)
FIRST_INTEGER = ReplyParser("first_integer", "shared/specs/m2rag.md §2.2 (first \\d+ clamped to [0, 10])", _first_integer)
FIRST_JSON = ReplyParser("first_json", "native RAGAS judges, shared/specs/m2rag.md §6.3-6.4", _first_json)
JSON_OBJECT = ReplyParser("json_object", "shared/specs/mmdr-bench.md §3 'JSON robustness'", _json_object)
JSON_ARRAY = ReplyParser("json_array", "shared/specs/mmdr-bench.md §6.4 (chart engines)", _json_array)
YES_NO = ReplyParser("yes_no", "shared/specs/mmdr-bench.md §6.4 (VQA, asked as text)", _yes_no)
SCORE_0_100 = ReplyParser("score_0_100", "README 'RAG QA with an LLM judge' (strict 0-100)", _score_0_100)
SEARCH_QUERY = ReplyParser("search_query", "MM-BRIGHT §5, Figure 14 ('Search query:' marker)", _search_query)
TEXT = ReplyParser("text", "any non-empty reply", _text)

#: Every named parser by name.
PARSERS: dict[str, ReplyParser] = {p.name: p for p in (
    LAST_INTEGER, FIRST_INTEGER, FIRST_JSON, JSON_OBJECT, JSON_ARRAY, YES_NO, SCORE_0_100, SEARCH_QUERY, TEXT)}


def get_parser(name: str) -> ReplyParser:
    """The parser registered as ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    try:
        return PARSERS[name]
    except KeyError:
        raise KeyError(f"unknown reply parser {name!r}; known: {', '.join(sorted(PARSERS))}") from None
