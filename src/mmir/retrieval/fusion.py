"""Fused vectors of multimodal retrieval (MM-BRIGHT §4.1): Task 4 pairs (:class:`PairMatrix`) and queries
(:func:`query_vectors`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mmir.encoders.multimodal import build_query_vectors, l2_normalize
from mmir.retrieval.encoding import BLANK


class PairMatrix:
    """``(n_pairs, d)`` float32 pair vectors ``normalise((t + i) / 2)``, computed on the fly in slices.

    Args:
        doc_rows: ``(n_pairs,)`` int, each pair's row in ``text`` (``(n_docs, d)``).
        image_rows: ``(n_pairs,)`` int, each pair's row in ``images``, ``-1`` for a text-only pair.
    """

    def __init__(self, text, images, doc_rows: np.ndarray, image_rows: np.ndarray):
        self.text, self.images = text, images
        self.doc_rows, self.image_rows = np.asarray(doc_rows, np.int64), np.asarray(image_rows, np.int64)
        if self.doc_rows.shape != self.image_rows.shape:
            raise ValueError(f"{len(self.doc_rows)} document rows but {len(self.image_rows)} image rows")
        if text.shape[1] != images.shape[1] and len(images):
            raise ValueError(f"text vectors have d={text.shape[1]}, image vectors d={images.shape[1]}")
        self.shape = (len(self.doc_rows), int(text.shape[1]))
        self.ndim, self.dtype = 2, np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if not isinstance(key, slice):
            raise TypeError("PairMatrix supports row slices only")
        docs, imgs = self.doc_rows[key], self.image_rows[key]
        t = l2_normalize(np.asarray(_take(self.text, docs), dtype=np.float32))
        has = imgs >= 0
        if has.any():
            i = l2_normalize(np.asarray(_take(self.images, imgs[has]), dtype=np.float32))
            t[has] = (t[has] + i) / 2.0
        return l2_normalize(t)


def _take(matrix, rows: np.ndarray) -> np.ndarray:
    if hasattr(matrix, "take") and not isinstance(matrix, np.ndarray):
        return matrix.take(rows)
    return np.asarray(matrix)[rows]


def pair_rows(doc_ids: Sequence[str], image_paths: Sequence[str], doc_index: Sequence[str],
              image_index: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's row in the document and image stores (``-1``: no image).

    Raises:
        KeyError: a pair's document or image is not in its store (names it).
    """
    dpos = {d: i for i, d in enumerate(doc_index)}
    ipos = {p: i for i, p in enumerate(image_index)}
    try:
        return (np.fromiter((dpos[d] for d in doc_ids), np.int64, len(doc_ids)),
                np.fromiter((ipos[p] if p else -1 for p in image_paths), np.int64, len(image_paths)))
    except KeyError as e:
        raise KeyError(f"pair item {e.args[0]!r} is not in the encoded store") from None


def query_vectors(text_vecs: np.ndarray, image_paths: Sequence[Sequence[str]], image_store_ids: Sequence[str],
                  image_vecs, image_mode: str, fusion: str) -> np.ndarray:
    """Query vectors ``(q, d)`` float32 from text vectors and the ``query_images`` / ``query_stacks`` kind.

    ``image_mode``: ``first`` (the first decodable image, blank when none; released code), ``stack`` (paper §4.1
    for single-image models), ``mean`` (an extension), ``none``. ``fusion``: see
    :func:`mmir.encoders.multimodal.build_query_vectors`.
    """
    if image_mode == "none":
        return build_query_vectors(text_vecs, [None] * len(text_vecs), "none", fusion)
    vecs = np.asarray(image_vecs[0:len(image_store_ids)], dtype=np.float32)
    if image_mode == "stack":
        return build_query_vectors(text_vecs, [v[None, :] for v in vecs], "first", fusion)
    pos = {p: i for i, p in enumerate(image_store_ids)}
    blank = vecs[pos[BLANK]]
    per_query = []
    for paths in image_paths:
        rows = [pos[p] for p in paths if p in pos and p != BLANK]
        per_query.append(vecs[rows[:1] if image_mode == "first" else rows] if rows else None)
    return build_query_vectors(text_vecs, per_query, "first" if image_mode == "first" else image_mode, fusion, blank_vec=blank)
