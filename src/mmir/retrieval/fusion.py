"""Fused vectors of multimodal retrieval (MM-BRIGHT §4.1): Task 4 pairs (:class:`PairMatrix`) and queries
(:func:`build_query_vectors`, from stored vectors :func:`query_vectors`). The only place of this maths: the
encoders below only embed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from mmir.encoders.vectors import l2_normalize
from mmir.retrieval.encoding import BLANK


def build_query_vectors(
    text_vecs: np.ndarray,
    image_vecs_per_query: Sequence[np.ndarray | None],
    image_mode: Literal["first", "mean", "none"] = "first",
    fusion: Literal["mean", "text", "image"] = "mean",
    blank_vec: np.ndarray | None = None,
) -> np.ndarray:
    """Query vectors from text vectors and per-query image vectors.

    Paper protocol (MM-BRIGHT §4.1, the default ``image_mode="first"``, ``fusion="mean"``): the query's FIRST
    image (``blank_vec`` when it has none), query vector ``normalise((t + i) / 2)``.

    Args:
        text_vecs: ``(q, d)`` text vectors.
        image_vecs_per_query: ``q`` entries, each ``(m_i, d)`` (``m_i`` may be 0) or None.
        image_mode: ``"first"`` (paper), ``"mean"`` (all images; an extension), ``"none"`` (text only).
        fusion: ``"mean"`` (paper), ``"text"``, ``"image"``.
        blank_vec: ``(d,)``; required when some query has no image and images are used.

    Returns:
        ``(q, d)`` float32, L2-normalised rows.

    Raises:
        ValueError: bad modes, length/dimension mismatch, ``fusion="image"`` with ``image_mode="none"``, or a
            query without image and no ``blank_vec``.
    """
    if image_mode not in ("first", "mean", "none"):
        raise ValueError(f"image_mode must be first/mean/none, got {image_mode!r}")
    if fusion not in ("mean", "text", "image"):
        raise ValueError(f"fusion must be mean/text/image, got {fusion!r}")
    t = l2_normalize(np.asarray(text_vecs, dtype=np.float32))
    q, d = t.shape
    if len(image_vecs_per_query) != q:
        raise ValueError(f"{q} text vectors but {len(image_vecs_per_query)} image entries")
    if fusion == "text" or (image_mode == "none" and fusion == "mean"):
        return t
    if image_mode == "none":
        raise ValueError("fusion='image' needs images (image_mode='first' or 'mean')")
    img = np.empty_like(t)
    for r, vecs in enumerate(image_vecs_per_query):
        vecs = None if vecs is None else np.asarray(vecs, dtype=np.float32).reshape(-1, d)
        if vecs is None or vecs.shape[0] == 0:
            if blank_vec is None:
                raise ValueError(f"query {r} has no image and no blank_vec was given (MM-BRIGHT §4.1 blank image)")
            img[r] = np.asarray(blank_vec, dtype=np.float32).reshape(d)
        elif image_mode == "first":
            img[r] = vecs[0]
        else:
            img[r] = l2_normalize(l2_normalize(vecs).mean(axis=0))
    img = l2_normalize(img)
    if fusion == "image":
        return img
    return l2_normalize((t + img) / 2.0)


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
    """Query vectors ``(q, d)`` float32 from text vectors and the ``query_images`` / ``query_stacks`` /
    ``query_image_sets`` kind.

    ``image_mode``: ``first`` (the first decodable image, blank when none; released code), ``stack`` (paper §4.1
    for single-image models), ``all`` (one vector of all the query's images given to a multi-image model, in
    order), ``mean`` (an extension), ``none``. ``stack`` and ``all`` read one row per query, in query order.
    ``fusion``: see :func:`build_query_vectors`.
    """
    if image_mode == "none":
        return build_query_vectors(text_vecs, [None] * len(text_vecs), "none", fusion)
    vecs = np.asarray(image_vecs[0:len(image_store_ids)], dtype=np.float32)
    if image_mode in ("stack", "all"):
        return build_query_vectors(text_vecs, [v[None, :] for v in vecs], "first", fusion)
    pos = {p: i for i, p in enumerate(image_store_ids)}
    blank = vecs[pos[BLANK]]
    per_query = []
    for paths in image_paths:
        rows = [pos[p] for p in paths if p in pos and p != BLANK]
        per_query.append(vecs[rows[:1] if image_mode == "first" else rows] if rows else None)
    return build_query_vectors(text_vecs, per_query, "first" if image_mode == "first" else image_mode, fusion, blank_vec=blank)
