"""The expected grade of a pointwise reply from its token log-probabilities (``rerankers.<name>.score: logprobs``).

At the reply token where the grade is written (the digit after the last ``Score:``, or a reply that is only a number,
as :func:`~mmir.retrieval.rerank.listwise.parse_score` reads it), the probabilities of the grade tokens
``0 .. 4`` (a token that is a grade after stripping whitespace: ``"3"`` and ``" 3"`` both count as 3) are renormalised
over the grades and the score is their expectation:

    p(g) = exp(lp(g)) / sum_{h in 0..4} exp(lp(h)),    E[g] = sum_{g in 0..4} g * p(g)    (in [0, 4])

This is the "expected relevance" of pointwise LLM rankers with graded labels (Zhuang et al., "Beyond Yes and No:
Improving Zero-Shot LLM Rankers via Scoring Fine-Grained Relevance Labels", NAACL 2024, §3: ER = sum_k p_k y_k with
p_k the softmax of the label tokens' log-likelihoods), on this rubric's grades 0-4. The backends return the
``top_logprobs`` most probable tokens of each position; a grade outside them counts as probability 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from mmir.llm.parsers import Parsed
from mmir.retrieval.rerank.listwise import SCORE_MARKER

GRADES = (0, 1, 2, 3, 4)


def grade_offset(text: str) -> int | None:
    """Character offset in ``text`` of the grade's first digit (the last ``Score: n``, else a reply that is only a
    number); ``None`` without one."""
    marks = list(SCORE_MARKER.finditer(text))
    if marks:
        return marks[-1].start(1)
    bare = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*\.?\s*", text)
    return bare.start(1) if bare else None


def grade_distribution(top: Sequence[Sequence[Any]], chosen: tuple[str, float] | None = None,
                       grades: Sequence[int] = GRADES) -> dict[int, float]:
    """``{g: p(g)}`` renormalised over ``grades`` from one position's ``[[token, logprob], ...]`` (``chosen``: the token
    written there, added when the list lacks it). Empty when no grade is among the tokens."""
    seen = {str(t): float(lp) for t, lp in top}
    if chosen is not None:
        seen.setdefault(chosen[0], chosen[1])
    mass = {g: 0.0 for g in grades}
    for tok, lp in seen.items():
        s = tok.strip()
        if s.isdigit() and int(s) in mass and len(s) == len(str(int(s))):
            mass[int(s)] += math.exp(lp)
    total = sum(mass.values())
    return {g: m / total for g, m in mass.items()} if total > 0 else {}


def expected_grade(text: str, tokens: Sequence[dict[str, Any]] | None, grades: Sequence[int] = GRADES) -> Parsed:
    """E[g] of a reply (see the module docstring) from its tokens (:attr:`mmir.llm.backends.base.Generation.logprobs`
    entries: ``token``, ``logprob``, ``top``); ``Parsed.method`` is ``logprobs``.

    Rejected (``ok`` False, with the reason): no token log-probabilities, no grade in the reply, or the grade is not a
    token of its own whose alternatives hold a grade.
    """
    if not tokens:
        return Parsed(None, False, None, "the reply came back without token log-probabilities")
    at = grade_offset(text)
    if at is None:
        return Parsed(None, False, None, "no 'Score: n' in the reply")
    pos, start = None, 0
    for i, t in enumerate(tokens):  # the reply is its tokens' concatenation; find the token holding the grade's digit
        end = start + len(t["token"])
        if start <= at < end:
            pos = i
            break
        start = end
    if pos is None or not tokens[pos]["token"].strip().isdigit():
        got = None if pos is None else tokens[pos]["token"]
        return Parsed(None, False, None, f"the grade at character {at} is not a token of its own (token {got!r})")
    dist = grade_distribution(tokens[pos]["top"], (tokens[pos]["token"], tokens[pos]["logprob"]), grades)
    if not dist:
        return Parsed(None, False, None, f"no grade {grades[0]}-{grades[-1]} among the tokens at the grade's position")
    return Parsed(sum(g * p for g, p in dist.items()), True, "logprobs")
