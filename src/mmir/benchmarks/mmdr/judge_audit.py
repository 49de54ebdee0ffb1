"""What a judge audit cannot see on its own: replies that parse but repeat the prompt's answer-format
example, and replies cut at the output limit; counted per module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def prompt_examples(prompt_id: str) -> list[dict[str, Any]]:
    """The example JSON objects written in a judge prompt (its answer format), e.g. the evidence judge's
    ``{"support_strength": 0.0, ...}``; objects inside an example array count too."""
    from mmir.benchmarks.mmdr.judge import MMDR_PROMPTS

    if not prompt_id or prompt_id not in MMDR_PROMPTS.names():
        return []
    text, out, i = MMDR_PROMPTS.get(prompt_id).text, [], 0
    while (start := text.find("{", i)) != -1:
        depth, i = 0, start + 1
        for j in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                try:
                    obj = json.loads(text[start : j + 1])
                except json.JSONDecodeError:
                    break
                if isinstance(obj, dict) and obj:
                    out.append(obj)
                    i = j + 1  # objects nested in an example are part of it
                break
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b


def copies_example(reply: Any, example: Mapping[str, Any]) -> bool:
    """The reply (an object, or any object of an array) repeats the example: every field of it, or, when the
    example has at least three fields that are not free text (string values with a space, like ``"one short
    sentence"``), every one of those. A one-field example (``{"label": "photo"}``) is an answer, not a template,
    and never counts."""
    if len(example) < 2:
        return False
    keys = [k for k, v in example.items() if not (isinstance(v, str) and " " in v)]
    objs = reply if isinstance(reply, list) else [reply]
    for o in objs:
        if not isinstance(o, dict):
            continue
        if all(k in o and _same(o[k], v) for k, v in example.items()):
            return True
        if len(keys) >= 3 and all(k in o and _same(o[k], example[k]) for k in keys):
            return True
    return False


def example_copies(records: Sequence[Any]) -> dict[str, int]:
    """Per module, judge replies that parsed but repeat the prompt's example values (see :func:`copies_example`):
    a small judge often copies the answer format instead of judging, which no parser can tell from a real
    answer. Counted, per module, for every module that made calls."""
    from mmir.llm.parsers import JSON_ARRAY, JSON_OBJECT

    cache: dict[str, list[dict[str, Any]]] = {}
    out: dict[str, int] = {}
    for r in records:
        d = r if isinstance(r, Mapping) else r.to_dict()
        out.setdefault(d["label"], 0)
        if not d.get("parse_ok") or not d.get("text"):
            continue
        exs = cache.setdefault(d["prompt_id"], prompt_examples(d["prompt_id"]))
        if not exs:
            continue
        obj = JSON_OBJECT(d["text"]).value
        if obj is None:
            obj = JSON_ARRAY(d["text"]).value
        if obj is not None and any(copies_example(obj, ex) for ex in exs):
            out[d["label"]] += 1
    return out


def cut_replies(records: Sequence[Any]) -> dict[str, int]:
    """Per module, judge replies that stopped at the output limit (``finish_reason == "length"``): usually an
    unfinished JSON object, hence a parse failure and a fallback."""
    out: dict[str, int] = {}
    for r in records:
        out.setdefault(r.label, 0)
        out[r.label] += int(r.finish_reason == "length")
    return out
