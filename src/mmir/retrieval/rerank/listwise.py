"""RankGPT's sliding windows (Sun et al. 2023, "Is ChatGPT Good at Search?", §3.2) and its permutation replies.

A pass walks a window of ``window`` candidates from the bottom of the depth to the top, ``step`` positions at a time;
each window is replaced by the permutation a call returns, so a relevant candidate can climb ``window - step``
positions per window and reach the top in one pass. Unlike RankGPT's loop, the last window is clamped to start at
position 0 (RankGPT stops when ``start < 0``, leaving the top of a depth that is not ``window + k * step`` unranked),
and a depth shorter than ``window`` is one window.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from mmir.llm.parsers import Parsed, ReplyParser


def windows(depth: int, window: int, step: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows of one pass, bottom first.

    Raises:
        ValueError: ``window < 2``, ``step < 1`` or ``step > window`` (candidates would be skipped).
    """
    if window < 2 or step < 1 or step > window:
        raise ValueError(f"need window >= 2 and 1 <= step <= window, got window={window}, step={step}")
    out, end = [], depth
    while end > 0:
        start = max(0, end - window)
        out.append((start, end))
        if start == 0:
            break
        end -= step
    return out


def sliding_windows(order: Sequence[int], permute: Callable[[list[int]], list[int] | None], *, window: int, step: int,
                    passes: int = 1) -> tuple[list[int], int]:
    """Rerank ``order`` (candidate positions, first-stage order) with ``passes`` bottom-to-top sweeps.

    Args:
        permute: the window's candidates (positions) -> its permutation as indices into the window (``0..k-1``), or
            ``None`` when the reply could not be read (the window keeps its input order).

    Returns:
        ``(order, kept)``: the reranked positions and the number of windows that kept their input order.
    """
    cur, kept = list(order), 0
    for _ in range(passes):
        for start, end in windows(len(cur), window, step):
            part = cur[start:end]
            perm = permute(part)
            if perm is None:
                kept += 1
                continue
            cur[start:end] = [part[i] for i in perm]
    return cur, kept


_BRACKETED = re.compile(r"\[\s*(\d+)\s*\]")
_NUMBER = re.compile(r"\d+")


def parse_permutation(text: str, n: int) -> Parsed:
    """A reply ``[2] > [1] > [3]`` (bracketed identifiers; else bare numbers) as a permutation of ``range(n)``.

    Identifiers are 1-based; repeats and numbers outside ``1..n`` are dropped; identifiers the reply left out follow in
    their input order (RankGPT's ``clean_response`` / ``remove_duplicate``), and ``method`` says ``partial`` then. A
    reply with no identifier in range is rejected (the caller keeps the window's input order and counts it).
    """
    found = _BRACKETED.findall(text) or _NUMBER.findall(text)
    seen: list[int] = []
    for tok in found:
        k = int(tok) - 1
        if 0 <= k < n and k not in seen:
            seen.append(k)
    if not seen:
        return Parsed(None, False, None, f"no identifier between 1 and {n} in the reply")
    missing = [k for k in range(n) if k not in seen]
    return Parsed(seen + missing, True, "partial" if missing else "complete")


def permutation_parser(n: int) -> ReplyParser:
    """The named parser of a window of ``n`` candidates (:func:`parse_permutation`)."""
    return ReplyParser(f"permutation_{n}", "RankGPT clean_response (Sun et al. 2023, §3.2)", lambda t: parse_permutation(t, n))


#: the grade of a pointwise reply: "Score: n" (any case, up to 3 non-word characters between)
SCORE_MARKER = re.compile(r"score\W{0,3}(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_score(text: str, lo: float = 0, hi: float = 4) -> Parsed:
    """The pointwise relevance of a reply: the last ``Score: n``, else a reply that is only a number; in ``[lo, hi]``.

    A number outside the scale is rejected, never clipped (a counted failure)."""
    m = SCORE_MARKER.findall(text)
    if m:
        value, method = float(m[-1]), "marker"
    elif re.fullmatch(r"\s*\d+(?:\.\d+)?\s*\.?\s*", text):
        value, method = float(text.strip().rstrip(".")), "bare"
    else:
        return Parsed(None, False, None, "no 'Score: n' in the reply")
    if not lo <= value <= hi:
        return Parsed(None, False, None, f"score {value:g} outside [{lo:g}, {hi:g}]")
    return Parsed(value, True, method)


#: the pointwise reply parser (rubric 0-4, prompts/rerank_pointwise_v1.txt)
SCORE_0_4 = ReplyParser("score_0_4", "rerank_pointwise_v1 rubric (Score: 0-4)", parse_score)
