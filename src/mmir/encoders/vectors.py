"""Vector helpers shared by the encoders and retrieval, in numpy only (a retrieve job reading stored vectors
never imports torch: on a 2-core machine that import alone takes seconds)."""

from __future__ import annotations

import numpy as np


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` divided by their L2 norm (float32); an all-zero row stays zero."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(norms, eps)).astype(np.float32, copy=False)
