"""The checks of every output a plug-in returns: each function gives what is wrong with one batch's output, in words,
or None. The rules (docs: Your own system): numpy, dtype float32 exactly, the shape and count asked for, the same
dimension ``d`` in every batch, every value finite."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _array_problem(out: Any, shape: str) -> str | None:
    if not isinstance(out, np.ndarray):
        return f"returned a {type(out).__module__}.{type(out).__qualname__}, not a numpy array of shape {shape}"
    if out.dtype != np.float32:
        return f"dtype {out.dtype}, not float32 (cast it in the plug-in: mmir does not change a plug-in's precision)"
    return None


def _finite_problem(out: np.ndarray, rows: str) -> str | None:
    finite = np.isfinite(out)
    if finite.all():
        return None
    bad = np.flatnonzero(~finite.reshape(len(out), -1).all(axis=1)) if out.ndim > 1 else np.flatnonzero(~finite)
    what = "NaN" if np.isnan(out).any() else "infinite values"
    if np.isnan(out).any() and np.isinf(out).any():
        what = "NaN and infinite values"
    return f"{what} in {len(bad)} {rows} (first: {', '.join(map(str, bad[:5].tolist()))})"


def vectors_problem(out: Any, n: int, dim: int | None, had: str = "earlier batches had") -> str | None:
    """What is wrong with ``out`` as ``n`` vectors (float32 ``(n, d)``, ``d == dim`` when ``dim`` is known: ``had``
    says where ``dim`` comes from), or None."""
    shape = f"({n}, d)" if dim is None else f"({n}, {dim})"
    if problem := _array_problem(out, shape):
        return problem
    if out.ndim != 2:
        return f"shape {out.shape}, not {shape}: one row per input"
    if out.shape[0] != n:
        return f"{out.shape[0]} vectors for {n} inputs"
    if out.shape[1] == 0:
        return "vectors of dimension 0"
    if dim is not None and out.shape[1] != dim:
        return f"vectors of dimension {out.shape[1]}, but {had} {dim}"
    return _finite_problem(out, "rows")


def token_vectors_problem(out: Any, n: int, dim: int | None) -> str | None:
    """What is wrong with ``out`` as the token vectors of ``n`` texts (one float32 ``(tokens_i, d)`` array each,
    ``tokens_i >= 1``), or None."""
    if isinstance(out, np.ndarray) or not isinstance(out, Sequence):
        return f"returned a {type(out).__qualname__}, not a list of one (tokens, d) array per input ({n} inputs)"
    if len(out) != n:
        return f"{len(out)} token matrices for {n} inputs"
    for i, m in enumerate(out):
        shape = "(tokens, d)" if dim is None else f"(tokens, {dim})"
        if problem := _array_problem(m, shape):
            return f"text {i}: {problem}"
        if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
            return f"text {i}: shape {m.shape}, not {shape} with at least one token"
        if dim is None:
            dim = m.shape[1]
        elif m.shape[1] != dim:
            return f"text {i}: token vectors of dimension {m.shape[1]}, but earlier ones had {dim}"
        if problem := _finite_problem(m, "token rows"):
            return f"text {i}: {problem}"
    return None


def scores_problem(out: Any, n: int) -> str | None:
    """What is wrong with ``out`` as the scores of ``n`` candidates (float32 ``(n,)``), or None."""
    if problem := _array_problem(out, f"({n},)"):
        return problem
    if out.ndim != 1:
        return f"shape {out.shape}, not ({n},): one score per candidate"
    if out.shape[0] != n:
        return f"{out.shape[0]} scores for {n} candidates"
    return _finite_problem(out, "candidates")
