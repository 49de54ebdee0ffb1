"""Model batches by a token budget: texts sorted by token length, each batch at most ``max_tokens`` padded tokens.

A batch pads every row to its longest row, so a batch of a fixed row count over texts of mixed lengths computes
mostly padding (``bench/bench_token_batches.py`` prints the share on the shared data). Sorting by length and
closing a batch when ``rows x longest`` would pass the budget keeps neighbours of about one length together.
"""

from __future__ import annotations

from collections.abc import Sequence


def token_batches(lengths: Sequence[int], max_tokens: int | None, max_rows: int) -> list[list[int]]:
    """Row indices of each model batch.

    Args:
        lengths: tokens of each text as the model reads it (after truncation), ``(n,)`` ints.
        max_tokens: the most padded tokens (``rows x longest row``) a batch computes; None: fixed batches of
            ``max_rows`` in input order (the previous behaviour). A text longer than the budget is a batch alone.
        max_rows: the most rows a batch holds.

    Returns:
        Lists of row indices covering ``range(n)`` once each; with a budget, ascending length (stable).

    Raises:
        ValueError: ``max_rows`` < 1 or ``max_tokens`` < 1.
    """
    if max_rows < 1 or (max_tokens is not None and max_tokens < 1):
        raise ValueError(f"max_rows and max_tokens must be >= 1, got {max_rows}, {max_tokens}")
    n = len(lengths)
    if max_tokens is None:
        return [list(range(s, min(s + max_rows, n))) for s in range(0, n, max_rows)]
    order = sorted(range(n), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        width = max(int(lengths[i]), 1)  # ascending: the new row is the longest
        if cur and ((len(cur) + 1) * width > max_tokens or len(cur) >= max_rows):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def padded_tokens(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> tuple[int, int]:
    """``(computed, real)`` tokens of ``batches``: computed = sum of ``rows x longest row``, real = sum of lengths."""
    computed = sum(len(b) * max(int(lengths[i]) for i in b) for b in batches if b)
    return computed, sum(int(lengths[i]) for b in batches for i in b)


def padding_share(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Share of the computed tokens that are padding, ``1 - real / computed`` (0.0 for no tokens)."""
    computed, real = padded_tokens(lengths, batches)
    return 0.0 if computed == 0 else 1.0 - real / computed
