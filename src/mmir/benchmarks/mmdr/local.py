"""Offline glue between the MMDR evaluator and a prepared domain: ``mmir://`` URIs (:func:`mmir_uri`),
:class:`LocalDomain` (documents, images, image text) and :class:`ImageTextBackend` (images as text).
"""

from __future__ import annotations

import hashlib
import mimetypes
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mmir.benchmarks.mmdr.report_parser import LOCAL_SCHEME
from mmir.llm.backends import Backend, Generation

#: Image description sources: the captioner's text (``evaluation.image_text``, OCR by default) and the
#: dataset's alt text.
IMAGE_TEXT_SOURCES = ("caption", "alt")
NO_DESCRIPTION = "(no description available for this image)"


def mmir_uri(dataset: str, item_id: str) -> str:
    """``mmir://<dataset>/<item_id>`` with the id percent-encoded (``/`` kept), e.g.
    ``mmir://openstax/statistics/08cc6b71_0.txt``."""
    return f"{LOCAL_SCHEME}://{dataset}/{urllib.parse.quote(item_id, safe='/')}"


class LocalDomain:
    """One prepared domain seen by the report writer and the judge.

    Args:
        prepared_dir: ``data/prepared/<dataset>/<domain>``.
        captions: ``{image path: captioner text}`` (``results/captions/.../<captioner>.parquet``).
    """

    def __init__(self, dataset: str, prepared_dir: str | Path, captions: dict[str, str] | None = None):
        from mmir.data.index import DomainIndex

        prep = Path(prepared_dir)
        self.dataset = dataset
        self.captions = dict(captions or {})
        self.index = DomainIndex(prep, self.captions)
        self.alt: dict[str, str] = {}
        for name in ("images.parquet", "query_images.parquet"):
            f = prep / name
            if f.exists():
                t = pd.read_parquet(f, columns=["path", "alt"])
                self.alt |= {str(p): "" if a is None else str(a) for p, a in zip(t["path"], t["alt"])}
        self._by_sha: dict[str, str] = {hashlib.sha256(bytes(b)).hexdigest(): p for p, b in self.index.image_bytes.items()}

    # ------------------------------------------------------------------------------------------ lookup
    def resolve(self, dataset: str, item_id: str) -> str | tuple[str, bytes] | None:
        """For :class:`~mmir.benchmarks.mmdr.fetch.LocalCorpusFetcher`: a document's text, an image's bytes (with its
        content type), or ``None`` (other dataset, unknown id)."""
        if dataset != self.dataset:
            return None
        if item_id in self.index.docs:
            return str(self.index.docs[item_id])
        if item_id in self.index.image_bytes:
            return (mimetypes.guess_type(item_id)[0] or "application/octet-stream", bytes(self.index.image_bytes[item_id]))
        return None

    def describe(self, path: str, sources: Sequence[str]) -> str:
        """Text standing for the image ``path``: the chosen sources joined by newlines ("" when none).

        Raises:
            ValueError: an unknown source (accepted: :data:`IMAGE_TEXT_SOURCES`).
        """
        parts = []
        for s in sources:
            if s == "caption":
                parts.append(self.captions.get(path, ""))
            elif s == "alt":
                parts.append(self.alt.get(path, ""))
            else:
                raise ValueError(f"unknown image text source {s!r}; accepted: {', '.join(IMAGE_TEXT_SOURCES)}")
        return "\n".join(p.strip() for p in parts if p and p.strip())

    def describe_bytes(self, data: bytes, sources: Sequence[str]) -> str | None:
        """:meth:`describe` of the image with these bytes, or ``None`` for an image of no known path."""
        path = self._by_sha.get(hashlib.sha256(bytes(data)).hexdigest())
        return None if path is None else self.describe(path, sources)


def read_captions(path: str | Path | None) -> dict[str, str]:
    """``{path: text}`` of a captions parquet (``path, role, text``); ``{}`` for ``None``."""
    if not path:
        return {}
    c = pd.read_parquet(path, columns=["path", "text"])
    return {str(p): "" if t is None else str(t) for p, t in zip(c["path"], c["text"])}


class ImageTextBackend(Backend):
    """A text-only backend that receives images as text (``[Image <i>, given as text (<label>): ...]``).

    ``label`` names the description sources and enters the cache identity, so replies never mix with a vision judge's.
    """

    name = "image_text"

    def __init__(self, inner: Backend, describe: Callable[[bytes], str | None], label: str):
        super().__init__()
        self.inner, self.describe, self.label = inner, describe, label
        self.max_concurrency = inner.max_concurrency
        self.stats = {"images_described": 0, "images_without_description": 0}

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def model_revision(self) -> str | None:
        return self.inner.model_revision

    def cache_identity(self) -> dict[str, Any]:
        """The inner backend's identity plus ``image_input = "text:<label>"``."""
        return {**self.inner.cache_identity(), "image_input": f"text:{self.label}"}

    def as_text(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with every image part replaced by its description (text parts kept in order)."""
        out = []
        n = 0
        for m in messages:
            c = m["content"]
            if isinstance(c, str):
                out.append(dict(m))
                continue
            texts = []
            for p in c:
                if p.get("type") == "text":
                    texts.append(p["text"])
                elif p.get("type") == "image":
                    n += 1
                    desc = self.describe(p["image"]) if isinstance(p["image"], (bytes, bytearray)) else None
                    if desc:
                        self.stats["images_described"] += 1
                    else:
                        self.stats["images_without_description"] += 1
                    texts.append(f"[Image {n}, given as text ({self.label}): {desc or NO_DESCRIPTION}]")
                else:
                    texts.append(str(p))
            out.append({**m, "content": "\n\n".join(texts)})
        return out

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        return self.inner.generate(self.as_text(messages), temperature=temperature, max_tokens=max_tokens, seed=seed, n=n)
