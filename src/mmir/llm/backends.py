"""LLM / VLM backends behind one interface.

``Backend.generate(messages, *, temperature=0.0, max_tokens=256, seed=None, n=1) -> Generation``

``messages`` are OpenAI-style chat dicts ``{"role": "system"|"user"|"assistant", "content": ...}`` where
``content`` is a string or a list of parts:

* ``{"type": "text", "text": str}``
* ``{"type": "image", "image": bytes | PIL.Image.Image}`` -- our own part type: raw encoded image bytes
  (PNG, JPEG, GIF, WEBP, ...) or a PIL image;
* ``{"type": "image_url", "image_url": {"url": str}}`` -- passed through to OpenAI-compatible endpoints.

Backends:

* :class:`OpenAIBackend` -- any OpenAI-compatible endpoint through the official ``openai`` SDK, with a
  concurrency limit, retries (exponential back-off with jitter, ``Retry-After`` honoured) and strict
  response checks;
* :class:`LlamaCppBackend` -- a local GGUF through llama-cpp-python (default: the offline
  Qwen2.5-Coder-0.5B-Instruct, see :mod:`mmir.llm.offline`); text only;
* :class:`TransformersBackend` -- a local Hugging Face causal LM, or a VLM through ``AutoProcessor``.

:func:`make_backend` builds one from a config dict. A call that does not produce usable text raises
:class:`GenerationFailure`; it is never turned into an empty string.
"""

from __future__ import annotations

import abc
import base64
import hashlib
import inspect
import io
import json
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mmir.core.errors import ConfigError, MmirError
from mmir.core.http import parse_retry_after as _parse_retry_after
from mmir.core.secrets import Secret as _Secret
from mmir.core.secrets import scrub as _scrub_secret
from mmir.llm.accounting import Usage

log = logging.getLogger(__name__)

Message = Mapping[str, Any]
SAMPLING_KEYS = ("temperature", "max_tokens", "seed", "n")


# ----------------------------------------------------------------------------------------------- results
@dataclass
class Generation:
    """The outcome of one successful ``generate`` call.

    Attributes:
        texts: ``n`` completions, in order.
        prompt_tokens: prompt tokens as reported by the backend (``None`` if it reports none).
        completion_tokens: completion tokens, summed over the ``n`` completions (``None`` if unreported).
        latency_s: wall time of the call, retries and back-off included.
        retries: attempts beyond the first.
        finish_reasons: one per completion (``"stop"``, ``"length"``, ...; ``None`` if unreported).
        retry_reasons: why each retry happened (``"timeout"``, ``"http 429"``, ...), in order.
        model: model name reported by the backend, if any.
    """

    texts: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    retries: int = 0
    finish_reasons: list[str | None] = field(default_factory=list)
    retry_reasons: list[str] = field(default_factory=list)
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every field."""
        return asdict(self)


class GenerationFailure(MmirError):
    """A call that produced no usable generation (after any retries).

    Attributes:
        kind: ``"timeout"``, ``"connection"``, ``"rate_limited"``, ``"server_error"``, ``"http_error"``,
            ``"malformed_response"``, ``"empty_content"``, ``"n_mismatch"`` or ``"backend_error"``.
        detail: human-readable cause (never holds credentials).
        status_code: HTTP status of the last attempt, if any.
        retries: attempts beyond the first.
        latency_s: wall time spent, back-off included.
        history: outcome of each attempt, in order (``["timeout", "http 429", "malformed_response"]``).
    """

    def __init__(
        self,
        kind: str,
        detail: str,
        *,
        status_code: int | None = None,
        retries: int = 0,
        latency_s: float = 0.0,
        history: Sequence[str] = (),
        backend: str | None = None,
        model: str | None = None,
    ):
        self.kind, self.detail, self.status_code = kind, detail, status_code
        self.retries, self.latency_s, self.history = retries, latency_s, list(history)
        self.backend, self.model = backend, model
        super().__init__(kind, detail)

    def __str__(self) -> str:
        where = f"{self.backend}:{self.model}: " if self.backend else ""
        r = self.retries
        tries = f" after {r} retr{'y' if r == 1 else 'ies'}" if r else ""
        return f"{where}generation failed ({self.kind}){tries}: {self.detail}"

    def to_record(self) -> dict[str, Any]:
        """JSON-serialisable description of the failure, for caches and reports."""
        return {
            "error_kind": self.kind,
            "error": str(self),
            "status_code": self.status_code,
            "retries": self.retries,
            "latency_s": self.latency_s,
            "history": list(self.history),
        }


class UnsupportedInputError(MmirError, ValueError):
    """The messages hold something this backend cannot take (e.g. images for a text-only model)."""


# ---------------------------------------------------------------------------------------------- messages
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def image_to_bytes(image: Any) -> tuple[bytes, str]:
    """Encoded bytes and MIME type of an image part's payload.

    Args:
        image: encoded image bytes (``bytes``/``bytearray``/``memoryview``) or a ``PIL.Image.Image``
            (encoded as PNG; modes PNG cannot hold are converted to RGB/RGBA first).

    Returns:
        ``(data, mime)``.

    Raises:
        UnsupportedInputError: the payload is neither, or the bytes are not a recognisable image.
    """
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        for magic, mime in _MAGIC:
            if data.startswith(magic):
                return data, mime
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return data, "image/webp"
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data)) as im:
                fmt = im.format
        except (UnidentifiedImageError, OSError) as e:
            raise UnsupportedInputError(f"image part holds {len(data)} bytes that are not a known image format") from e
        return data, Image.MIME.get(fmt or "", "application/octet-stream")
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - pillow is a hard dependency
        raise UnsupportedInputError("image part is not bytes and Pillow is not installed") from e
    if isinstance(image, Image.Image):
        im = image
        if im.mode not in ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"):
            im = im.convert("RGBA" if "A" in im.mode else "RGB")
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    raise UnsupportedInputError(f"image part must hold bytes or a PIL image, got {type(image).__name__}")


def _image_digest(image: Any) -> dict[str, str]:
    """Content hash of an image payload: sha256 of the encoded bytes, or for a PIL image of its mode, size
    and raw pixels (independent of how Pillow would encode it)."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        data, mime = image_to_bytes(image)
        return {"sha256": hashlib.sha256(data).hexdigest(), "mime": mime}
    from PIL import Image

    if isinstance(image, Image.Image):
        h = hashlib.sha256(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
        h.update(image.tobytes())
        return {"sha256": h.hexdigest(), "mime": "image/x-pil-pixels"}
    raise UnsupportedInputError(f"image part must hold bytes or a PIL image, got {type(image).__name__}")


def _parts(message: Message, index: int) -> list[Mapping[str, Any]]:
    """The content of message ``index`` as a list of validated parts."""
    if not isinstance(message, Mapping):
        raise UnsupportedInputError(f"message {index} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise UnsupportedInputError(f"message {index} has no 'role' string")
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, Sequence) or isinstance(content, (bytes, bytearray)):
        raise UnsupportedInputError(f"message {index} ('{role}'): content must be a string or a list of parts")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            out.append(part)
        elif kind == "image" and "image" in part:
            out.append(part)
        elif kind == "image_url" and isinstance(part.get("image_url"), Mapping) and "url" in part["image_url"]:
            out.append(part)
        else:
            raise UnsupportedInputError(
                f"message {index} ('{role}'), part {j}: expected {{'type': 'text', 'text': str}}, "
                f"{{'type': 'image', 'image': bytes|PIL.Image}} or {{'type': 'image_url', 'image_url': {{'url': str}}}}"
            )
    return out


def validate_messages(messages: Sequence[Message]) -> None:
    """Check the structure of ``messages``; raises :class:`UnsupportedInputError` naming the bad message."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise UnsupportedInputError("messages must be a non-empty list of chat message dicts")
    for i, m in enumerate(messages):
        _parts(m, i)


def has_images(messages: Sequence[Message]) -> bool:
    """True when any message holds an ``image`` or ``image_url`` part."""
    return any(p["type"] != "text" for i, m in enumerate(messages) for p in _parts(m, i))


def canonical_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """JSON-serialisable form of ``messages`` for hashing: images become ``{"type": "image", "sha256": ...}``
    (sha256 of the encoded bytes; a PIL image by its mode, size and pixels), ``image_url`` parts keep their
    URL, string content becomes one text part. Other message keys (``name``, ...) are kept as strings."""
    validate_messages(messages)
    out = []
    for i, m in enumerate(messages):
        parts = []
        for p in _parts(m, i):
            if p["type"] == "text":
                parts.append({"type": "text", "text": p["text"]})
            elif p["type"] == "image":
                parts.append({"type": "image", **_image_digest(p["image"])})
            else:
                parts.append({"type": "image_url", "url": str(p["image_url"]["url"])})
        extra = {k: str(v) for k, v in m.items() if k not in ("role", "content")}
        out.append({"role": m["role"], "content": parts, **extra})
    return out


def messages_sha256(messages: Sequence[Message]) -> str:
    """Hex sha256 of :func:`canonical_messages` as canonical JSON."""
    blob = json.dumps(canonical_messages(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def text_only_messages(messages: Sequence[Message], backend: str) -> list[dict[str, str]]:
    """``messages`` with content flattened to plain strings (text parts joined by blank lines).

    Raises:
        UnsupportedInputError: a message holds an image part; ``backend`` names the backend in the message.
    """
    validate_messages(messages)
    out = []
    for i, m in enumerate(messages):
        texts = []
        for p in _parts(m, i):
            if p["type"] != "text":
                raise UnsupportedInputError(
                    f"backend '{backend}' takes no images, but message {i} ('{m['role']}') holds an "
                    f"'{p['type']}' part; caption the image first or use a vision backend"
                )
            texts.append(p["text"])
        out.append({"role": m["role"], "content": "\n\n".join(texts)})
    return out


def _as_request(request: Any) -> tuple[Sequence[Message], dict[str, Any]]:
    """Split one ``generate_many`` request into ``(messages, sampling kwargs)``."""
    if isinstance(request, Mapping):
        if "messages" not in request:
            raise UnsupportedInputError("a request dict needs a 'messages' key")
        extra = set(request) - {"messages", *SAMPLING_KEYS}
        if extra:
            raise UnsupportedInputError(f"unknown request keys {sorted(extra)}; allowed: messages, {', '.join(SAMPLING_KEYS)}")
        return request["messages"], {k: request[k] for k in SAMPLING_KEYS if k in request}
    return request, {}


def _check_sampling(temperature: float, max_tokens: int, n: int) -> None:
    if not (isinstance(max_tokens, int) and max_tokens >= 1):
        raise UnsupportedInputError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if not (isinstance(n, int) and n >= 1):
        raise UnsupportedInputError(f"n must be an int >= 1, got {n!r}")
    if temperature < 0:
        raise UnsupportedInputError(f"temperature must be >= 0, got {temperature!r}")


def _is_empty(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


# ------------------------------------------------------------------------------------------------- base
class Backend(abc.ABC):
    """One text generator. Subclasses implement :meth:`_generate`; :meth:`generate` validates, times,
    logs and records usage (``self.usage``, a :class:`~mmir.llm.accounting.Usage`).

    Class attribute ``name`` is the backend kind (``"openai"``, ``"llama_cpp"``, ``"transformers"``).
    """

    name: str = "backend"
    max_concurrency: int = 1

    def __init__(self) -> None:
        self.usage = Usage()

    # identity ---------------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def model_id(self) -> str:
        """Model name or id (hub id, endpoint model name or file name)."""

    @property
    def model_revision(self) -> str | None:
        """Revision of the weights (hub commit or file sha256) if known; ``None`` otherwise."""
        return None

    def cache_identity(self) -> dict[str, Any]:
        """What identifies this backend's outputs in a cache key: ``backend``, ``model``, ``revision``."""
        return {"backend": self.name, "model": self.model_id, "revision": self.model_revision}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_id!r})"

    # generation -------------------------------------------------------------------------------------
    def generate(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        n: int = 1,
    ) -> Generation:
        """Generate ``n`` completions for ``messages``.

        Args:
            messages: chat messages (see the module docstring for the part types).
            temperature: 0 = greedy.
            max_tokens: completion length limit per completion.
            seed: sampling seed, passed to the backend where it supports one.
            n: number of completions.

        Returns:
            A :class:`Generation` with ``len(texts) == n``, every text non-empty.

        Raises:
            UnsupportedInputError: malformed messages or sampling arguments, or input the backend cannot take.
            GenerationFailure: the backend produced no usable output (after retries where they apply).
        """
        validate_messages(messages)
        _check_sampling(temperature, max_tokens, n)
        try:
            gen = self._generate(messages, temperature=float(temperature), max_tokens=max_tokens, seed=seed, n=n)
        except GenerationFailure as f:
            f.backend, f.model = self.name, self.model_id
            self.usage.add_failure(f)
            log.warning("%s", f)
            raise
        self.usage.add(gen)
        log.debug(
            "%s:%s generated %d text(s) in %.2fs, %s+%s tokens, %d retries",
            self.name, self.model_id, len(gen.texts), gen.latency_s, gen.prompt_tokens, gen.completion_tokens, gen.retries,
        )
        return gen

    def generate_many(self, requests: Sequence[Any], *, return_failures: bool = False) -> list[Any]:
        """Run several requests concurrently (at most ``self.max_concurrency`` at a time), keeping order.

        Args:
            requests: each either a list of messages or a dict ``{"messages": ..., "temperature": ...,
                "max_tokens": ..., "seed": ..., "n": ...}``.
            return_failures: when True, a failed request yields its :class:`GenerationFailure` in place of
                a :class:`Generation`; when False the first failure (in request order) is raised after all
                requests have finished.

        Returns:
            One :class:`Generation` (or failure, see above) per request, in request order.

        Raises:
            GenerationFailure: see ``return_failures``.
            UnsupportedInputError: a request is malformed (checked before anything runs).
        """
        parsed = [_as_request(r) for r in requests]
        for msgs, _ in parsed:
            validate_messages(msgs)

        def run(item: tuple[Sequence[Message], dict[str, Any]]) -> Any:
            msgs, kw = item
            try:
                return self.generate(msgs, **kw)
            except GenerationFailure as f:
                return f

        workers = max(1, min(self.max_concurrency, len(parsed)))
        if workers == 1:
            results = [run(p) for p in parsed]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{self.name}-gen") as pool:
                results = list(pool.map(run, parsed))
        if not return_failures:
            for r in results:
                if isinstance(r, GenerationFailure):
                    raise r
        return results

    @abc.abstractmethod
    def _generate(
        self, messages: Sequence[Message], *, temperature: float, max_tokens: int, seed: int | None, n: int
    ) -> Generation:
        """Backend-specific generation; arguments are already validated."""


# ------------------------------------------------------------------------------------------------ OpenAI
class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` SDK.

    Args:
        model: model name at the endpoint.
        base_url: endpoint (``http://127.0.0.1:8000/v1``); ``None`` = the SDK default (api.openai.com).
        api_key_env: NAME of the environment variable holding the key (read once, here). ``None`` = the
            endpoint needs no key (a placeholder is sent). The value is never logged, shown in ``repr``,
            put in exceptions or returned in metadata.
        revision: a model version string for cache keys (endpoints do not report one reliably).
        timeout_s: per-attempt timeout.
        max_concurrency: most requests in flight at once, across all threads using this backend.
        max_retries: retries after the first attempt, on timeouts, connection errors, 429, 5xx, 408 and 409.
        backoff_base_s, backoff_max_s: exponential back-off ``min(max, base * 2**k)``, with jitter (the
            wait is drawn uniformly from the upper half of that), when no ``Retry-After`` is given.
        max_retry_after_s: longest ``Retry-After`` honoured; a longer one fails the call (kind ``rate_limited``).
        max_tokens_param: request field for the length limit (``"max_completion_tokens"`` for newer
            OpenAI models).
        extra_body: extra JSON fields sent with every request.

    Raises:
        ConfigError: ``api_key_env`` is given but the variable is unset or empty.
    """

    name = "openai"
    _RETRY_STATUS = (408, 409, 429)

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        revision: str | None = None,
        timeout_s: float = 60.0,
        max_concurrency: int = 4,
        max_retries: int = 5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 120.0,
        max_tokens_param: str = "max_tokens",
        extra_body: Mapping[str, Any] | None = None,
    ):
        super().__init__()
        import openai

        if max_concurrency < 1:
            raise ConfigError("max_concurrency", f"must be >= 1, got {max_concurrency}")
        if max_retries < 0:
            raise ConfigError("max_retries", f"must be >= 0, got {max_retries}")
        self._model, self.base_url, self._revision = model, base_url, revision
        self.api_key_env = api_key_env
        if api_key_env is None:
            self._key = _Secret("not-needed")
        else:
            value = os.environ.get(api_key_env)
            if not value:
                raise ConfigError("api_key_env", f"environment variable '{api_key_env}' is unset or empty")
            self._key = _Secret(value)
        self.timeout_s, self.max_retries = float(timeout_s), int(max_retries)
        self.backoff_base_s, self.backoff_max_s = float(backoff_base_s), float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.max_tokens_param = max_tokens_param
        self.extra_body = dict(extra_body or {})
        self.max_concurrency = int(max_concurrency)
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._openai = openai
        # max_retries=0: our loop below is the only one, so every retry is counted and logged.
        self._client = openai.OpenAI(
            api_key=self._key.reveal(), base_url=base_url, timeout=self.timeout_s, max_retries=0
        )

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def model_revision(self) -> str | None:
        return self._revision

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model={self._model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r}, "
            f"max_concurrency={self.max_concurrency}, max_retries={self.max_retries})"
        )

    def __getstate__(self):
        raise TypeError("OpenAIBackend holds a client and a credential and cannot be pickled; build it in the worker")

    def _scrub(self, text: str) -> str:
        """``text`` with the API key replaced, for anything that leaves this object."""
        return _scrub_secret(text, self._key)

    @staticmethod
    def _to_api_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
        out = []
        for i, m in enumerate(messages):
            content = m["content"]
            if not isinstance(content, str):
                parts = []
                for p in _parts(m, i):
                    if p["type"] == "image":
                        data, mime = image_to_bytes(p["image"])
                        url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
                        parts.append({"type": "image_url", "image_url": {"url": url}})
                    else:
                        parts.append(dict(p))
                content = parts
            out.append({**{k: v for k, v in m.items() if k != "content"}, "content": content})
        return out

    def _backoff(self, attempt: int) -> float:
        cap = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return cap / 2 + random.uniform(0, cap / 2)

    def _classify(self, exc: Exception) -> tuple[str, bool, int | None, float | None]:
        """``(kind, retryable, status, retry_after_s)`` of an exception raised by the SDK call."""
        oa = self._openai
        if isinstance(exc, oa.APITimeoutError):
            return "timeout", True, None, None
        if isinstance(exc, oa.APIConnectionError):
            return "connection", True, None, None
        if isinstance(exc, oa.APIStatusError):
            status = exc.status_code
            headers = exc.response.headers if exc.response is not None else None
            retry_after = _parse_retry_after(headers)
            if status == 429:
                return "rate_limited", True, status, retry_after
            if status >= 500:
                return "server_error", True, status, retry_after
            return "http_error", status in self._RETRY_STATUS, status, retry_after
        if isinstance(exc, (oa.APIResponseValidationError, ValueError)):  # json.JSONDecodeError is a ValueError
            return "malformed_response", False, None, None
        return "backend_error", False, None, None

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        api_messages = self._to_api_messages(messages)
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": api_messages,
            "temperature": temperature,
            self.max_tokens_param: max_tokens,
        }
        if n != 1:
            kwargs["n"] = n
        if seed is not None:
            kwargs["seed"] = seed
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        history: list[str] = []
        t0 = time.monotonic()
        with self._slots:
            attempt = 0
            while True:
                failure: GenerationFailure | None = None
                wait: float | None = None
                try:
                    resp = self._client.chat.completions.create(**kwargs)
                except Exception as exc:  # classified below; unknown kinds fail the call, never pass silently
                    kind, retryable, status, retry_after = self._classify(exc)
                    label = f"http {status}" if status is not None else kind
                    history.append(label)
                    detail = self._scrub(f"{type(exc).__name__}: {exc}")[:500]
                    if retryable and retry_after is not None and retry_after > self.max_retry_after_s:
                        detail = f"Retry-After {retry_after:.0f}s exceeds max_retry_after_s={self.max_retry_after_s:.0f}; {detail}"
                        retryable = False
                    if not retryable or attempt >= self.max_retries:
                        failure = GenerationFailure(
                            kind, detail, status_code=status, retries=attempt,
                            latency_s=time.monotonic() - t0, history=history,
                        )
                    else:
                        wait = self._backoff(attempt) if retry_after is None else retry_after + random.uniform(0, 0.1)
                        log.warning(
                            "%s:%s attempt %d failed (%s), retrying in %.2fs%s",
                            self.name, self._model, attempt + 1, label, wait,
                            " (Retry-After)" if retry_after is not None else "",
                        )
                if failure is not None:
                    # Raised outside the except block so neither __cause__ nor __context__ holds the SDK
                    # exception, whose request object carries the Authorization header.
                    raise failure
                if wait is not None:  # this attempt failed and is retried
                    time.sleep(wait)
                    attempt += 1
                    continue
                break
        return self._parse(resp, n=n, retries=attempt, history=history, latency_s=time.monotonic() - t0)

    def _parse(self, resp: Any, *, n: int, retries: int, history: list[str], latency_s: float) -> Generation:
        def fail(kind: str, detail: str) -> GenerationFailure:
            history.append(kind)
            return GenerationFailure(kind, detail, status_code=200, retries=retries, latency_s=latency_s, history=history)

        if isinstance(resp, (str, bytes)) or resp is None:
            raise fail("malformed_response", f"endpoint returned a non-JSON body ({type(resp).__name__})")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise fail("malformed_response", "response has no 'choices' list")
        texts, reasons = [], []
        for i, ch in enumerate(choices):
            msg = getattr(ch, "message", None)
            if msg is None:
                raise fail("malformed_response", f"choice {i} has no 'message'")
            content = getattr(msg, "content", None)
            if content is not None and not isinstance(content, str):
                raise fail("malformed_response", f"choice {i}: content is {type(content).__name__}, not a string")
            if _is_empty(content):
                raise fail("empty_content", f"choice {i} has empty content (finish_reason={getattr(ch, 'finish_reason', None)!r})")
            texts.append(content)
            reasons.append(getattr(ch, "finish_reason", None))
        if len(texts) != n:
            raise fail("n_mismatch", f"asked for n={n} completions, endpoint returned {len(texts)}")
        usage = getattr(resp, "usage", None)
        return Generation(
            texts=texts,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            latency_s=latency_s,
            retries=retries,
            finish_reasons=reasons,
            retry_reasons=list(history),
            model=getattr(resp, "model", None),
        )


# --------------------------------------------------------------------------------------------- llama.cpp
class LlamaCppBackend(Backend):
    """A local GGUF chat model through llama-cpp-python (CPU here). Text only.

    Args:
        model_path: GGUF file. ``None`` (and no ``hf_repo``) = the offline Qwen2.5-Coder-0.5B-Instruct
            Q4_K_M assembled by :func:`mmir.llm.offline.qwen05b_gguf_path`.
        cache_dir: where that file is assembled (see ``qwen05b_gguf_path``).
        hf_repo, hf_file: load from the Hugging Face hub instead (``Llama.from_pretrained``; needs network).
        n_ctx: context length.
        n_threads: CPU threads (``None`` = llama.cpp's default).
        n_gpu_layers: layers offloaded to a GPU if llama.cpp was built with one.
        chat_format: llama-cpp chat format; ``None`` = the template stored in the GGUF.
        model_id: name used in cache keys; default the hub id for the offline model, else the file name.

    The model loads lazily on the first call, so a run served entirely from a cache never loads it. Calls
    are serialised (a ``Llama`` object is not thread-safe); sample ``i`` of ``n`` uses ``seed + i``.
    """

    name = "llama_cpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        cache_dir: str | Path | None = None,
        hf_repo: str | None = None,
        hf_file: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        chat_format: str | None = None,
        model_id: str | None = None,
        verbose: bool = False,
    ):
        super().__init__()
        from mmir.llm import offline as offline_llm

        if (hf_repo is None) != (hf_file is None):
            raise ConfigError("hf_repo", "hf_repo and hf_file must be given together")
        if hf_repo is not None and model_path is not None:
            raise ConfigError("model_path", "give either model_path or hf_repo/hf_file, not both")
        self._path = Path(model_path) if model_path is not None else None
        if self._path is not None and not self._path.is_file():
            raise ConfigError("model_path", f"GGUF file not found: {self._path}")
        self.cache_dir, self.hf_repo, self.hf_file = cache_dir, hf_repo, hf_file
        self.n_ctx, self.n_threads, self.n_gpu_layers = n_ctx, n_threads, n_gpu_layers
        self.chat_format, self.verbose = chat_format, verbose
        if model_id is None:
            if hf_repo is not None:
                model_id = f"{hf_repo}:{hf_file}"
            elif self._path is None:
                model_id = f"{offline_llm.HUB_REPO}:{offline_llm.HUB_FILE}"
            else:
                model_id = self._path.name
        self._model_id = model_id
        self._revision: str | None = None
        self._llm = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model_path(self) -> Path | None:
        """The GGUF file (assembling the offline model if needed); ``None`` for a hub model not yet loaded."""
        if self._path is None and self.hf_repo is None:
            from mmir.llm.offline import qwen05b_gguf_path

            self._path = qwen05b_gguf_path(self.cache_dir)
        return self._path

    @property
    def model_revision(self) -> str | None:
        """sha256 of the GGUF file (memoised next to it)."""
        if self._revision is None:
            from mmir.llm.offline import file_sha256

            path = self.model_path
            if path is None:  # hub model: the file is only known after the download
                self._load()
                path = Path(self._llm.model_path)
            self._revision = file_sha256(path)
        return self._revision

    def _load(self):
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError as e:
                raise MmirError("the llama_cpp backend needs llama-cpp-python: pip install 'llama-cpp-python[server]'") from e
            kw = dict(n_ctx=self.n_ctx, n_gpu_layers=self.n_gpu_layers, verbose=self.verbose)
            if self.n_threads is not None:
                kw["n_threads"] = self.n_threads
            if self.chat_format is not None:
                kw["chat_format"] = self.chat_format
            if self.hf_repo is not None:
                self._llm = llama_cpp.Llama.from_pretrained(self.hf_repo, self.hf_file, **kw)
            else:
                self._llm = llama_cpp.Llama(model_path=str(self.model_path), **kw)
        return self._llm

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        chat = text_only_messages(messages, self.name)
        t0 = time.monotonic()
        texts, reasons, prompt_tokens, completion_tokens = [], [], 0, 0
        with self._lock:
            llm = self._load()
            for i in range(n):
                kw: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
                if seed is not None:
                    kw["seed"] = seed + i
                try:
                    out = llm.create_chat_completion(messages=chat, **kw)
                except ValueError as e:  # e.g. prompt longer than n_ctx
                    raise GenerationFailure(
                        "backend_error", f"{type(e).__name__}: {e}", latency_s=time.monotonic() - t0, history=["backend_error"]
                    ) from e
                choice = (out.get("choices") or [{}])[0]
                text = (choice.get("message") or {}).get("content")
                if _is_empty(text):
                    raise GenerationFailure(
                        "empty_content", f"completion {i} is empty (finish_reason={choice.get('finish_reason')!r})",
                        latency_s=time.monotonic() - t0, history=["empty_content"],
                    )
                usage = out.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens", 0))
                completion_tokens += int(usage.get("completion_tokens", 0))
                texts.append(text)
                reasons.append(choice.get("finish_reason"))
        return Generation(
            texts=texts, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            latency_s=time.monotonic() - t0, retries=0, finish_reasons=reasons, model=self._model_id,
        )


# ---------------------------------------------------------------------------------------------- transformers
class TransformersBackend(Backend):
    """A local Hugging Face model: a causal LM (tokenizer chat template) or a VLM (``AutoProcessor`` chat
    template + ``AutoModelForImageTextToText``). Runs on CUDA when available, else CPU.

    Args:
        model: hub id or local directory.
        revision: hub revision (branch, tag or commit); recorded in cache keys.
        gguf_file: load this GGUF file from ``model`` (dequantised by transformers; needs ``gguf``).
        vision: ``True`` = VLM, ``False`` = text LM, ``None`` = decide from the config (``vision_config``).
        device: ``"cuda"``, ``"cpu"``, ...; default CUDA if available.
        dtype: torch dtype name (``"bfloat16"``); default float32 on CPU, bfloat16 on CUDA.
        local_files_only: never reach the hub (default: ``HF_HUB_OFFLINE`` is set).
        trust_remote_code: passed to ``from_pretrained``.
        model_id: name used in cache keys; default ``model`` (for a GGUF in a local folder: the file name).

    Use :meth:`from_objects` to wrap an already-built model and tokenizer/processor. The model loads lazily;
    calls are serialised; sample ``i`` of ``n`` is seeded with ``seed + i`` (``torch.manual_seed``).
    """

    name = "transformers"

    def __init__(
        self,
        model: str | Path,
        *,
        revision: str | None = None,
        gguf_file: str | None = None,
        vision: bool | None = None,
        device: str | None = None,
        dtype: str | None = None,
        local_files_only: bool | None = None,
        trust_remote_code: bool = False,
        model_id: str | None = None,
    ):
        super().__init__()
        self.source, self._revision, self.gguf_file = str(model), revision, gguf_file
        self.vision, self._device, self.dtype = vision, device, dtype
        if local_files_only is None:
            local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
        self.local_files_only, self.trust_remote_code = local_files_only, trust_remote_code
        if model_id is None:
            if gguf_file:  # a local folder's path says nothing about the weights: name the file (sha256 in revision)
                model_id = gguf_file if Path(self.source).is_dir() else f"{self.source}:{gguf_file}"
            else:
                model_id = self.source
        self._model_id = model_id
        self._model = None
        self._proc = None  # tokenizer or processor
        self._lock = threading.Lock()

    @classmethod
    def from_objects(
        cls, model: Any, processor: Any, *, model_id: str, revision: str | None = None, vision: bool | None = None
    ) -> TransformersBackend:
        """Wrap a built ``PreTrainedModel`` and its tokenizer (text LM) or processor (VLM).

        Args:
            model: the model (moved to the backend's device).
            processor: a tokenizer or processor with a chat template.
            model_id, revision: recorded in cache keys (give a weights hash as ``revision`` when known).
            vision: ``None`` = VLM when ``processor`` has an ``image_processor``.
        """
        self = cls(model_id, revision=revision, vision=vision, model_id=model_id)
        if self.vision is None:
            self.vision = hasattr(processor, "image_processor")
        self._model, self._proc = model.to(self.device).eval(), processor
        return self

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model_revision(self) -> str | None:
        if self._revision is not None:
            return self._revision
        if self.gguf_file:
            from mmir.llm.offline import file_sha256

            p = Path(self.source) / self.gguf_file
            if p.is_file():
                self._revision = file_sha256(p)
        return self._revision

    @property
    def device(self) -> str:
        if self._device is None:
            import torch

            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        return self._device

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        import transformers as tf

        kw: dict[str, Any] = {
            "revision": self._revision,
            "local_files_only": self.local_files_only,
            "trust_remote_code": self.trust_remote_code,
        }
        if self.gguf_file:
            kw["gguf_file"] = self.gguf_file
        if self.vision is None:
            cfg = tf.AutoConfig.from_pretrained(self.source, **kw)
            self.vision = hasattr(cfg, "vision_config")
        dtype = getattr(torch, self.dtype) if self.dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        if self.vision:
            self._proc = tf.AutoProcessor.from_pretrained(self.source, **kw)
            model = tf.AutoModelForImageTextToText.from_pretrained(self.source, dtype=dtype, **kw)
        else:
            self._proc = tf.AutoTokenizer.from_pretrained(self.source, **kw)
            model = tf.AutoModelForCausalLM.from_pretrained(self.source, dtype=dtype, **kw)
        self._model = model.to(self.device).eval()
        if self._revision is None:
            self._revision = getattr(model.config, "_commit_hash", None) or self.model_revision

    def _inputs(self, messages: Sequence[Message]) -> Any:
        if not self.vision:
            chat = text_only_messages(messages, f"{self.name} (text model {self._model_id})")
            enc = self._proc.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
            return enc
        from PIL import Image

        chat = []
        for i, m in enumerate(messages):
            parts = []
            for p in _parts(m, i):
                if p["type"] == "text":
                    parts.append({"type": "text", "text": p["text"]})
                elif p["type"] == "image":
                    img = p["image"]
                    if not isinstance(img, Image.Image):
                        data, _ = image_to_bytes(img)
                        img = Image.open(io.BytesIO(data))
                    parts.append({"type": "image", "image": img.convert("RGB")})
                else:
                    parts.append({"type": "image", "url": p["image_url"]["url"]})
            chat.append({"role": m["role"], "content": parts})
        return self._proc.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        import torch

        t0 = time.monotonic()
        with self._lock:
            self._load()
            enc = self._inputs(messages).to(self.device)
            tok = getattr(self._proc, "tokenizer", self._proc)
            eos = self._model.generation_config.eos_token_id
            eos_ids = set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
            pad = tok.pad_token_id if tok.pad_token_id is not None else (min(eos_ids) if eos_ids else 0)
            prompt_len = int(enc["input_ids"].shape[1])
            texts, reasons, completion_tokens = [], [], 0
            for i in range(n):
                if seed is not None:
                    torch.manual_seed(seed + i)
                kw: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": pad, "do_sample": temperature > 0}
                if temperature > 0:
                    kw.update(temperature=temperature, top_p=1.0, top_k=0)
                with torch.inference_mode():
                    out = self._model.generate(**enc, **kw)
                new = out[0, prompt_len:].tolist()
                stop_at = next((j for j, t in enumerate(new) if t in eos_ids), None)
                if stop_at is not None:
                    new, reason = new[: stop_at + 1], "stop"
                else:
                    reason = "length"
                completion_tokens += len(new)
                text = tok.decode(new, skip_special_tokens=True)
                if _is_empty(text):
                    raise GenerationFailure(
                        "empty_content", f"completion {i} decodes to empty text ({len(new)} tokens, {reason})",
                        latency_s=time.monotonic() - t0, history=["empty_content"],
                    )
                texts.append(text)
                reasons.append(reason)
        return Generation(
            texts=texts, prompt_tokens=prompt_len, completion_tokens=completion_tokens,
            latency_s=time.monotonic() - t0, retries=0, finish_reasons=reasons, model=self._model_id,
        )


# ------------------------------------------------------------------------------------------------ factory
BACKENDS: dict[str, type[Backend]] = {
    "openai": OpenAIBackend,
    "llama_cpp": LlamaCppBackend,
    "transformers": TransformersBackend,
}


def make_backend(cfg: Mapping[str, Any]) -> Backend:
    """Build a backend from a config dict.

    ``cfg["backend"]`` is ``"openai"``, ``"llama_cpp"`` or ``"transformers"``; the other keys are that
    class's constructor arguments, plus an optional ``prices: {prompt_per_token, completion_per_token}``
    for cost accounting. Example::

        make_backend({"backend": "openai", "model": "gpt-4o", "api_key_env": "OPENAI_API_KEY",
                      "max_concurrency": 8})

    Raises:
        ConfigError: unknown backend, unknown or missing keys (named in the message).
    """
    cls, cfg, prices = check_backend_config(cfg)
    backend = cls(**cfg)
    backend.usage = Usage(
        prompt_price_per_token=prices.get("prompt_per_token"),
        completion_price_per_token=prices.get("completion_per_token"),
    )
    return backend


def check_backend_config(cfg: Mapping[str, Any]) -> tuple[type[Backend], dict[str, Any], dict[str, float]]:
    """Validate a backend config without building it: ``(class, constructor kwargs, prices)``.

    Raises:
        ConfigError: unknown backend, unknown or missing keys (named in the message).
    """
    cfg = dict(cfg)
    kind = cfg.pop("backend", None)
    if kind not in BACKENDS:
        raise ConfigError("backend", f"unknown generation backend {kind!r}; expected one of {sorted(BACKENDS)}")
    cls = BACKENDS[kind]
    prices = cfg.pop("prices", None) or {}
    params = inspect.signature(cls.__init__).parameters
    accepted = [p for p in params if p != "self"]
    unknown = sorted(set(cfg) - set(accepted))
    if unknown:
        raise ConfigError(unknown[0], f"not a setting of the '{kind}' backend; accepted: {', '.join(accepted)}, prices")
    missing = [
        p.name for p in params.values()
        if p.name != "self" and p.default is inspect.Parameter.empty and p.name not in cfg
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if missing:
        raise ConfigError(missing[0], f"required by the '{kind}' backend")
    unknown_prices = set(prices) - {"prompt_per_token", "completion_per_token"}
    if unknown_prices:
        raise ConfigError("prices", f"unknown keys {sorted(unknown_prices)}; expected prompt_per_token, completion_per_token")
    return cls, cfg, prices


def check_generators(config: Mapping[str, Any], file: str | None = None) -> None:
    """Check every ``generators.<name>`` entry against its backend's constructor (:func:`check_backend_config`).

    Raises:
        ConfigError: naming the full key, e.g. ``generators.gpt4o.api_key_env``.
    """
    for name, g in config["generators"].items():
        try:
            check_backend_config(g)
        except ConfigError as exc:  # name the full key path, not the backend's own
            raise ConfigError(f"generators.{name}.{exc.key}", str(exc).split(": ", 1)[-1], file) from exc
