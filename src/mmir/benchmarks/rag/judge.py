"""The answer judge: 0–100 against the reference answer, parsed strictly.

Parsing (:func:`parse_score`): a JSON object with ``score``; ``Score: 85`` / ``**Score**: 85.`` (any case,
markdown emphasis); ``85/100``; or a reply that is only a number. The value must lie in [0, 100] — out of
range is a failure, never clipped. Anything else (words only, empty) is a failure. A failure is retried once
with a stricter instruction; a second failure is recorded, excluded from the mean and reported with its count
— never a silent 0 or NaN (unlike RAGAS's NaN or BRIGHT's silent retries).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass

_JSON = re.compile(r"\{[^{}]*\}", re.S)
_LABELLED = re.compile(r"score\**\s*[:=]?\s*\**\s*(-?\d+(?:\.\d+)?)", re.I)
_OVER_100 = re.compile(r"(-?\d+(?:\.\d+)?)\s*/\s*100\b")
_ONLY_NUMBER = re.compile(r"^\s*\**\s*(-?\d+(?:\.\d+)?)\s*\**\s*\.?\s*$")


def parse_score(reply: str | None) -> float | None:
    """The judge's score in [0, 100], or None when the reply holds no valid score (see module docstring)."""
    if not reply or not reply.strip():
        return None
    value = None
    for blob in _JSON.findall(reply):
        try:
            obj = json.loads(blob)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("score"), (int, float)) and not isinstance(obj.get("score"), bool):
            value = float(obj["score"])
            break
    if value is None:
        for pat in (_LABELLED, _OVER_100, _ONLY_NUMBER):
            m = pat.search(reply)
            if m:
                value = float(m.group(1))
                break
    if value is None or not math.isfinite(value) or not 0 <= value <= 100:
        return None
    return value


@dataclass
class Judgment:
    """One judging of one answer: ``score`` (None = failure), ``status`` (ok / retried_ok / failed), raw replies."""

    score: float | None
    status: str
    raw: list[str]


def judge_answer(backend, cache, question: str, reference: str, answer: str, *, seed: int, max_tokens: int = 64) -> Judgment:
    """Judge one answer (prompt ``rag_judge_v1``, then ``rag_judge_strict_v1`` once on a parse failure)."""
    from mmir.benchmarks.rag.prompts import load

    raws = []
    for attempt, name in enumerate(("rag_judge_v1", "rag_judge_strict_v1")):
        tpl = load(name)
        msgs = [{"role": "user", "content": tpl.render(question=question, reference=reference, answer=answer or "(empty answer)")}]
        rec = cache.cached_generate(backend, msgs, tpl.id, tpl.text, temperature=0.0 if seed == 0 else 0.7,
                                    max_tokens=max_tokens, seed=seed)
        text = (rec.get("texts") or [""])[0] if rec.get("status") == "ok" else ""
        raws.append(text)
        score = parse_score(text)
        if score is not None:
            return Judgment(score, "ok" if attempt == 0 else "retried_ok", raws)
    return Judgment(None, "failed", raws)


def agreement(scores_per_answer: list[list[float]], tolerance: float = 10.0) -> dict:
    """Agreement between repeated judgings of the same answers (answers with >= 2 valid scores).

    Returns ``answers`` (count), ``mean_std`` (mean over answers of the repeats' standard deviation, points),
    ``mean_abs_diff`` (mean absolute difference over all repeat pairs, points) and ``within_tolerance``
    (share of answers whose repeats all lie within ``tolerance`` points).
    """
    multi = [s for s in scores_per_answer if len(s) >= 2]
    if not multi:
        return {"answers": 0, "mean_std": None, "mean_abs_diff": None, "within_tolerance": None}
    diffs = [abs(a - b) for s in multi for i, a in enumerate(s) for b in s[i + 1:]]
    return {"answers": len(multi),
            "mean_std": statistics.fmean(statistics.pstdev(s) for s in multi),
            "mean_abs_diff": statistics.fmean(diffs),
            "within_tolerance": sum(max(s) - min(s) <= tolerance for s in multi) / len(multi)}
