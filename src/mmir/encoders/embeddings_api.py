"""Dense text encoder over any OpenAI-compatible ``/v1/embeddings`` endpoint (``kind: dense, backend: openai``).

:mod:`tenacity` retries timeouts, connection errors, unparsable bodies, HTTP 429 (honouring ``Retry-After`` /
``retry-after-ms``) and 5xx with exponential back-off and jitter; other 4xx and well-formed but wrong answers
fail at once. Vectors come back in input order, L2-normalised float32.

API key rule (:func:`resolve_api_key`): ``api_key_env: null`` sends no key; a set variable is used; an unset or
empty one is an error, except for a loopback ``base_url`` (placeholder key). The value is held in a
:class:`~mmir.core.secrets.Secret` and scrubbed from every error text.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from mmir.config.models import EmbeddingsAPISystem, parse_params
from mmir.core.errors import ConfigError, MmirError
from mmir.core.http import parse_retry_after
from mmir.core.secrets import Secret, scrub
from mmir.encoders.text_base import TextEncoder
from mmir.encoders.truncation import Truncations

log = logging.getLogger(__name__)

NO_KEY = "not-needed"  # sent to an endpoint that needs no key (the SDK insists on one)


# ------------------------------------------------------------------------------------------- endpoint
def endpoint_id(base_url: str) -> str:
    """The endpoint as it enters cache keys and messages: ``host[:port]/path``, e.g. ``api.openai.com/v1``.

    Raises:
        ConfigError (key ``base_url``): not an http(s) URL with a host, a bad port, or credentials in the URL.
    """
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError as e:
        raise ConfigError("base_url", f"not a valid URL ({e})") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigError("base_url", "holds credentials (user:password@host); put the key in the environment "
                                      "variable named by api_key_env instead")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("base_url", f"must be an http:// or https:// URL with a host, got scheme {parts.scheme!r}")
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    default_port = 443 if parts.scheme == "https" else 80
    netloc = host if port in (None, default_port) else f"{host}:{port}"
    return netloc + parts.path.rstrip("/")


def is_local(base_url: str) -> bool:
    """True when ``base_url``'s host is a loopback address (``localhost``, ``*.localhost``, 127.0.0.0/8, ::1)."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(api_key_env: str | None, base_url: str) -> Secret | None:
    """The key to send, read from the environment (rule in the module docstring).

    Returns:
        a :class:`Secret`, or ``None`` when no key is to be sent.

    Raises:
        ConfigError (key ``api_key_env``): the variable is unset or empty and the endpoint is not local.
    """
    if api_key_env is None:
        return None
    value = os.environ.get(api_key_env)
    if value:
        return Secret(value)
    if is_local(base_url):
        log.debug("environment variable %s is unset: no key sent to the local server %s", api_key_env, endpoint_id(base_url))
        return None
    raise ConfigError("api_key_env", f"environment variable '{api_key_env}' is unset or empty; the endpoint "
                                     f"{endpoint_id(base_url)} is not a local server, so it needs the key (set the "
                                     "variable, or api_key_env: null for an endpoint that takes no key)")


def check_dense_api_systems(config: Mapping[str, Any], file: str | None = None) -> None:
    """Check every ``systems.<name>`` of ``kind: dense, backend: openai`` (URL, key variable, templates); no request.

    ``config`` is the validated config (:func:`mmir.config.validate_config`).

    Raises:
        ConfigError: naming the full key, e.g. ``systems.te3-large.api_key_env``.
    """
    for name, system in parse_params(dict(config), file).systems.items():
        if not isinstance(system, EmbeddingsAPISystem):
            continue
        try:
            check_endpoint(system)
        except ConfigError as exc:
            raise ConfigError(f"systems.{name}.{exc.key}", str(exc).split(": ", 1)[-1], file) from None


def check_endpoint(system: EmbeddingsAPISystem) -> Secret | None:
    """The checks no schema can make (the URL, the key variable, the templates); returns the key to send.

    Raises:
        ConfigError: naming the key (``base_url``, ``api_key_env``, ``query_template``, ``doc_template``).
    """
    endpoint_id(system.base_url)
    key = resolve_api_key(system.api_key_env, system.base_url)
    _check_template("query_template", system.query_template)
    _check_template("doc_template", system.doc_template)
    return key


def _check_template(key: str, template: str) -> None:
    try:
        template.format(text="x")
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(key, f"must be a format string whose only field is {{text}} ({type(e).__name__}: {e})") from None


# ---------------------------------------------------------------------------------------------- errors
@dataclass(frozen=True)
class Batch:
    """One request's texts: ``texts[start:stop]``, batch ``index`` (0-based) of ``count``, encoded as ``role``."""

    role: str
    index: int
    count: int
    start: int
    stop: int


class EmbeddingAPIError(MmirError):
    """A batch of texts got no usable vectors from the endpoint (after any retries).

    Attributes:
        kind: ``"timeout"``, ``"connection"``, ``"rate_limited"``, ``"server_error"``, ``"http_error"``,
            ``"malformed_response"``, ``"empty_response"``, ``"count_mismatch"``, ``"bad_vector"``,
            ``"dimension_mismatch"`` or ``"client_error"``.
        batch: 0-based batch index of ``n_batches``; its texts are ``texts[start:stop]``.
        history: outcome of each attempt, in order (``["http 429", "timeout", "http 500"]``); ``retries`` is one less.
    """

    def __init__(self, kind: str, detail: str, *, model: str, endpoint: str, where: Batch, status_code: int | None,
                 history: Sequence[str]):
        self.kind, self.detail, self.model, self.endpoint, self.role = kind, detail, model, endpoint, where.role
        self.batch, self.n_batches, self.start, self.stop = where.index, where.count, where.start, where.stop
        self.status_code, self.retries, self.history = status_code, len(history) - 1, list(history)
        super().__init__(str(self))

    def __str__(self) -> str:
        r = self.retries
        tries = f" after {r} retr{'y' if r == 1 else 'ies'} ({', '.join(self.history)})" if r else ""
        return (f"embeddings {self.model} at {self.endpoint}: {self.role} batch {self.batch + 1}/{self.n_batches} "
                f"(texts {self.start}-{self.stop - 1}) failed ({self.kind}){tries}: {self.detail}")


class _AttemptFailed(Exception):
    """One failed attempt, as tenacity sees it (``retryable`` decides whether another attempt follows)."""

    def __init__(self, kind: str, detail: str, *, retryable: bool, status: int | None = None,
                 retry_after: float | None = None):
        self.kind, self.detail, self.retryable = kind, detail, retryable
        self.status, self.retry_after = status, retry_after
        super().__init__(kind, detail)

    @property
    def label(self) -> str:
        return f"http {self.status}" if self.status is not None else self.kind


# ---------------------------------------------------------------------------------------------- encoder
class OpenAIEmbeddingEncoder(TextEncoder):
    """Text encoder over an OpenAI-compatible embeddings endpoint.

    Settings (:class:`~mmir.config.models.EmbeddingsAPISystem`, documented there): ``base_url`` (its
    ``host[:port]/path`` is in the cache key), ``api_key_env`` (the NAME of the key's variable), ``revision``
    (free-form; bump it when the model behind a name changes), ``dimensions`` (checked on return),
    ``max_concurrency`` (encoder-wide), back-off ``min(backoff_max_s, backoff_base_s * 2**k)`` plus up to
    ``backoff_base_s`` of jitter, ``max_retry_after_s``, the ``{text}`` templates, ``max_chars`` (cut after the
    template), ``encoding_format`` (same vectors, so not in the cache key).

    Raises:
        ConfigError: a bad setting (key named), or the key's variable is unset for a non-local endpoint.
    """

    def __init__(self, system: EmbeddingsAPISystem):
        import openai

        self._key = check_endpoint(system)
        self.base_url = system.base_url
        self.endpoint = endpoint_id(self.base_url)
        self.model, self.revision, self.dimensions = system.model, system.revision, system.dimensions
        self.api_key_env = system.api_key_env
        self.batch_size, self.max_concurrency = system.batch_size, system.max_concurrency
        self.timeout_s, self.max_retries = float(system.timeout_s), system.max_retries
        self.backoff_base_s, self.backoff_max_s = float(system.backoff_base_s), float(system.backoff_max_s)
        self.max_retry_after_s = float(system.max_retry_after_s)
        self.query_template, self.doc_template = system.query_template, system.doc_template
        self.max_chars, self.encoding_format = system.max_chars, system.encoding_format
        #: texts the embedding cache should hand over per encode call (its commit unit): enough batches to
        #: keep ``max_concurrency`` requests busy
        self.cache_batch_size = self.batch_size * self.max_concurrency * 4
        self.calls = 0
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._usage = {"requests": 0, "retries": 0, "failures": 0, "texts": 0, "truncated": 0, "empty_inputs": 0,
                       "prompt_tokens": 0, "wait_s": 0.0}
        self._sleep = time.sleep  # tenacity's sleep; a test may record instead of sleeping
        self._openai = openai
        # max_retries=0: tenacity below is the only retry loop, so every retry is counted and logged.
        self._client = openai.OpenAI(api_key=self._key.reveal() if self._key else NO_KEY, base_url=self.base_url,
                                     timeout=self.timeout_s, max_retries=0)

    # identity -------------------------------------------------------------------------------------------
    def cache_spec(self) -> dict:
        """Everything that changes a vector: endpoint (host, port, path), model, revision, dimensions,
        templates, ``max_chars``, normalisation. Not the key, batch size, concurrency, timeouts or retries."""
        return {"backend": "openai", "endpoint": self.endpoint, "model": self.model, "revision": self.revision,
                "dimensions": self.dimensions, "query_template": self.query_template,
                "doc_template": self.doc_template, "max_chars": self.max_chars, "normalize": True}

    @property
    def usage(self) -> dict[str, float]:
        """Counters: ``requests``, ``retries``, ``failures``, ``texts``, ``truncated``, ``empty_inputs``,
        ``prompt_tokens``, ``wait_s``.
        """
        with self._lock:
            return dict(self._usage)

    def __repr__(self) -> str:
        return (f"OpenAIEmbeddingEncoder(model={self.model!r}, endpoint={self.endpoint!r}, "
                f"api_key_env={self.api_key_env!r}, dimensions={self.dimensions}, batch_size={self.batch_size}, "
                f"max_concurrency={self.max_concurrency})")

    def __getstate__(self):
        raise TypeError("OpenAIEmbeddingEncoder holds a client and a credential and cannot be pickled; build it in the worker")

    # encoding -------------------------------------------------------------------------------------------
    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, L2-normalised, in input order. Raises :class:`EmbeddingAPIError`."""
        return self._encode(list(texts), self.query_template, "query")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, L2-normalised, in input order. Raises :class:`EmbeddingAPIError`."""
        return self._encode(list(texts), self.doc_template, "document")

    def count_truncations(self, texts: Sequence[str], role: str) -> dict:
        """The character cuts encoding ``texts`` makes (the API hides its tokenisation: no token counts)."""
        template = self.query_template if role == "query" else self.doc_template
        flags = [self.max_chars is not None and len(template.format(text=t)) > self.max_chars for t in texts]
        return Truncations().record(flags, what=f"{self.model} {role}s", max_chars=self.max_chars)

    def kept_chars(self, texts: Sequence[str], role: str) -> list[int]:
        """Characters of each text sent: the templated text is cut at ``max_chars`` (the API's own cuts are hidden)."""
        template = self.query_template if role == "query" else self.doc_template
        if self.max_chars is None:
            return [len(t) for t in texts]
        room = self.max_chars - len(template.format(text="\0").split("\0")[0])  # the template's text before {text} comes first
        return [max(0, min(len(t), room)) for t in texts]

    def _prepare(self, texts: list[str], template: str) -> list[str]:
        out, cut, empty = [], 0, 0
        for t in texts:
            s = template.format(text=t)
            if self.max_chars is not None and len(s) > self.max_chars:
                s, cut = s[: self.max_chars], cut + 1
            if not s.strip():
                s, empty = " ", empty + 1
            out.append(s)
        with self._lock:
            self._usage["truncated"] += cut
            self._usage["empty_inputs"] += empty
        return out

    def _encode(self, texts: list[str], template: str, role: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        inputs = self._prepare(texts, template)
        spans = [(i, min(i + self.batch_size, len(inputs))) for i in range(0, len(inputs), self.batch_size)]
        jobs = [(Batch(role, b, len(spans), start, stop), inputs[start:stop]) for b, (start, stop) in enumerate(spans)]
        workers = min(self.max_concurrency, len(jobs))
        if workers == 1:
            parts = [self._embed_batch(*job) for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embeddings-api") as pool:
                futures = [pool.submit(self._embed_batch, *job) for job in jobs]
                parts = []
                try:
                    for f in futures:  # in input order, whatever order they finish in
                        parts.append(f.result())
                except BaseException:
                    for f in futures:
                        f.cancel()  # batches not started yet are not sent
                    raise
        out = np.concatenate(parts, axis=0)
        with self._lock:
            self._usage["texts"] += len(texts)
        return out

    def _embed_batch(self, where: Batch, inputs: list[str]) -> np.ndarray:
        """One batch with retries: ``(stop - start, dim)`` float32 L2-normalised, or EmbeddingAPIError."""
        from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

        history: list[str] = []
        backoff = wait_exponential_jitter(multiplier=self.backoff_base_s, max=self.backoff_max_s, jitter=self.backoff_base_s)

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, _AttemptFailed) and exc.retry_after is not None:
                return exc.retry_after + random.uniform(0, 0.1)
            return backoff(state)

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            pause = state.upcoming_sleep
            with self._lock:
                self._usage["retries"] += 1
                self._usage["wait_s"] += pause
            log.warning("embeddings %s at %s: %s batch %d/%d attempt %d failed (%s: %s), retrying in %.2fs%s",
                        self.model, self.endpoint, where.role, where.index + 1, where.count, state.attempt_number,
                        getattr(exc, "label", "?"), getattr(exc, "detail", "")[:200], pause,
                        " (Retry-After)" if getattr(exc, "retry_after", None) is not None else "")

        def attempt() -> np.ndarray:
            try:
                return self._attempt(inputs)
            except _AttemptFailed as exc:
                history.append(exc.label)
                raise

        retrying = Retrying(stop=stop_after_attempt(self.max_retries + 1),
                            retry=retry_if_exception(lambda e: isinstance(e, _AttemptFailed) and e.retryable),
                            wait=wait, sleep=self._sleep, before_sleep=before_sleep, reraise=True)
        failed: _AttemptFailed | None = None
        try:
            vecs = retrying(attempt)
        except _AttemptFailed as exc:
            failed = exc
        if failed is not None:  # raised outside the except block: no exception chain to carry anything along
            with self._lock:
                self._usage["failures"] += 1
            err = EmbeddingAPIError(failed.kind, failed.detail, model=self.model, endpoint=self.endpoint, where=where,
                                    status_code=failed.status, history=history)
            log.warning("%s", err)
            raise err
        with self._lock:
            self.calls += 1
        return vecs

    def _attempt(self, inputs: list[str]) -> np.ndarray:
        """One request + strict parsing; raises :class:`_AttemptFailed` (SDK exceptions never escape)."""
        kwargs: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": self.encoding_format}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        failed: _AttemptFailed | None = None
        with self._slots:
            with self._lock:
                self._usage["requests"] += 1
            try:
                resp = self._client.embeddings.create(**kwargs)
            except Exception as exc:  # classified; unknown kinds fail the batch, never pass silently
                failed = self._classify(exc)
        if failed is not None:  # outside the except block: the SDK exception (request, headers) is dropped
            raise failed
        return self._parse(resp, len(inputs))

    def _classify(self, exc: Exception) -> _AttemptFailed:
        oa = self._openai
        detail = scrub(f"{type(exc).__name__}: {exc}", self._key)[:500]
        if isinstance(exc, oa.APITimeoutError):
            return _AttemptFailed("timeout", detail, retryable=True)
        if isinstance(exc, oa.APIConnectionError):
            return _AttemptFailed("connection", detail, retryable=True)
        if isinstance(exc, oa.APIStatusError):
            status = exc.status_code
            retry_after = parse_retry_after(exc.response.headers if exc.response is not None else None)
            if status == 429 or status >= 500:
                kind = "rate_limited" if status == 429 else "server_error"
                if retry_after is not None and retry_after > self.max_retry_after_s:
                    detail = f"Retry-After {retry_after:.0f}s exceeds max_retry_after_s={self.max_retry_after_s:.0f}; {detail}"
                    return _AttemptFailed(kind, detail, retryable=False, status=status)
                return _AttemptFailed(kind, detail, retryable=True, status=status, retry_after=retry_after)
            return _AttemptFailed("http_error", detail, retryable=False, status=status)
        if isinstance(exc, (oa.APIResponseValidationError, ValueError)):  # json.JSONDecodeError is a ValueError
            return _AttemptFailed("malformed_response", f"unparsable response body ({detail})", retryable=True)
        return _AttemptFailed("client_error", detail, retryable=False)

    def _parse(self, resp: Any, n: int) -> np.ndarray:
        """``(n, dim)`` float32 L2-normalised from an embeddings response, in input order."""
        def bad(kind: str, detail: str) -> _AttemptFailed:
            return _AttemptFailed(kind, detail, retryable=False, status=200)

        data = getattr(resp, "data", None)
        if not isinstance(data, list) or not data:
            raise bad("empty_response", "the response holds no embeddings ('data' is empty or missing)")
        if len(data) != n:
            raise bad("count_mismatch", f"sent {n} texts, got {len(data)} embeddings")
        index = [getattr(d, "index", None) for d in data]
        if all(isinstance(i, int) for i in index):
            if sorted(index) != list(range(n)):
                raise bad("malformed_response", f"embedding indices {sorted(index)[:8]}... are not 0..{n - 1}")
            data = [d for _, d in sorted(zip(index, data), key=lambda p: p[0])]
        elif any(i is not None for i in index):
            raise bad("malformed_response", "some embeddings have an 'index' and some do not")
        rows = []
        for i, d in enumerate(data):
            emb = getattr(d, "embedding", None)
            if isinstance(emb, str):  # encoding_format base64: little-endian float32 bytes
                try:
                    arr = np.frombuffer(base64.b64decode(emb, validate=True), dtype="<f4").astype(np.float64)
                except (binascii.Error, ValueError) as e:
                    raise bad("bad_vector", f"embedding {i}: invalid base64 float32 data ({e})") from None
            else:
                try:
                    arr = np.asarray(emb, dtype=np.float64)
                except (TypeError, ValueError):
                    raise bad("bad_vector", f"embedding {i} is not a list of numbers ({type(emb).__name__})") from None
            if arr.ndim != 1 or arr.size == 0:
                hint = (" (per-token vectors: the server does no pooling; e.g. llama.cpp --pooling last|mean, "
                        "llama_cpp.server --kv_overrides <arch>.pooling_type=int:3)") if arr.ndim == 2 else ""
                raise bad("bad_vector", f"embedding {i} has shape {arr.shape}, expected one vector{hint}")
            rows.append(arr)
        dims = {r.size for r in rows}
        if len(dims) != 1:
            raise bad("dimension_mismatch", f"embeddings of different sizes {sorted(dims)} in one response")
        dim = dims.pop()
        if self.dimensions is not None and dim != self.dimensions:
            raise bad("dimension_mismatch", f"asked for dimensions={self.dimensions}, got {dim} (does the endpoint "
                                            "support 'dimensions'?)")
        with self._lock:
            if self._dim is None:
                self._dim = dim
            elif dim != self._dim:
                raise bad("dimension_mismatch", f"got {dim}-d vectors after {self._dim}-d ones from the same encoder")
        mat = np.stack(rows)
        if not np.isfinite(mat).all():
            raise bad("bad_vector", f"embedding {int(np.where(~np.isfinite(mat).all(axis=1))[0][0])} holds NaN or inf")
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        if (norms == 0).any():
            raise bad("bad_vector", f"embedding {int(np.where(norms[:, 0] == 0)[0][0])} is all zeros (cannot be normalised)")
        tokens = getattr(getattr(resp, "usage", None), "prompt_tokens", None)
        if isinstance(tokens, int):
            with self._lock:
                self._usage["prompt_tokens"] += tokens
        return (mat / norms).astype(np.float32)
