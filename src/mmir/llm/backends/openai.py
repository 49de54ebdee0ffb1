"""Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, llama.cpp's server) through the official
``openai`` SDK: a concurrency limit, retries with exponential back-off and jitter (``Retry-After`` honoured),
strict response checks, and an API key read from the environment that never leaves this object."""

from __future__ import annotations

import base64
import logging
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from mmir.config.models import OpenAIGenerator
from mmir.core.errors import ConfigError
from mmir.core.http import parse_retry_after as _parse_retry_after
from mmir.core.secrets import Secret as _Secret
from mmir.core.secrets import scrub as _scrub_secret
from mmir.llm.backends.base import Backend, Generation, is_empty_text, token_logprobs, with_defaults
from mmir.llm.errors import GenerationFailure
from mmir.llm.messages import Message, image_to_bytes, message_parts

log = logging.getLogger("mmir.llm.backends")


class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` SDK.

    Args:
        settings: its ``generators.<name>`` entry (:class:`~mmir.config.models.OpenAIGenerator`); a setting it leaves
            out takes the value in :attr:`DEFAULTS`:

            - ``model``: model name at the endpoint.
            - ``base_url``: endpoint (``http://127.0.0.1:8000/v1``); ``None`` = the SDK default (api.openai.com).
            - ``api_key_env``: NAME of the environment variable holding the key (read once, here). ``None`` = the
              endpoint needs no key (a placeholder is sent). The value is never logged, shown in ``repr``,
              put in exceptions or returned in metadata.
            - ``revision``: a model version string for cache keys (endpoints do not report one reliably).
            - ``timeout_s``: per-attempt timeout.
            - ``max_concurrency``: most requests in flight at once, across all threads using this backend.
            - ``max_retries``: retries after the first attempt, on timeouts, connection errors, 429, 5xx, 408 and 409.
            - ``backoff_base_s``, ``backoff_max_s``: exponential back-off ``min(max, base * 2**k)``, with jitter (the
              wait is drawn uniformly from the upper half of that), when no ``Retry-After`` is given.
            - ``max_retry_after_s``: longest ``Retry-After`` honoured; a longer one fails the call (kind ``rate_limited``).
            - ``max_tokens_param``: request field for the length limit (``"max_completion_tokens"`` for newer
              OpenAI models).
            - ``extra_body``: extra JSON fields sent with every request.

    Raises:
        ConfigError: ``api_key_env`` is given but the variable is unset or empty.
    """

    name = "openai"
    supports_logprobs = True  # chat completions' logprobs / top_logprobs (an endpoint that ignores them fails the call)
    _RETRY_STATUS = (408, 409, 429)
    #: The value of each setting a generator entry leaves out.
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "base_url": None, "api_key_env": "OPENAI_API_KEY", "revision": None, "timeout_s": 60.0, "max_concurrency": 4,
        "max_retries": 5, "backoff_base_s": 1.0, "backoff_max_s": 30.0, "max_retry_after_s": 120.0,
        "max_tokens_param": "max_tokens", "extra_body": None,
    }

    def __init__(self, settings: OpenAIGenerator):
        super().__init__()
        import openai

        s = with_defaults(settings, self.DEFAULTS)
        model, base_url, api_key_env, max_concurrency, max_retries = s.model, s.base_url, s.api_key_env, s.max_concurrency, s.max_retries
        if max_concurrency < 1:
            raise ConfigError("max_concurrency", f"must be >= 1, got {max_concurrency}")
        if max_retries < 0:
            raise ConfigError("max_retries", f"must be >= 0, got {max_retries}")
        self._model, self.base_url, self._revision = model, base_url, s.revision
        self.api_key_env = api_key_env
        if api_key_env is None:
            self._key = _Secret("not-needed")
        else:
            value = os.environ.get(api_key_env)
            if not value:
                raise ConfigError("api_key_env", f"environment variable '{api_key_env}' is unset or empty")
            self._key = _Secret(value)
        self.timeout_s, self.max_retries = float(s.timeout_s), int(max_retries)
        self.backoff_base_s, self.backoff_max_s = float(s.backoff_base_s), float(s.backoff_max_s)
        self.max_retry_after_s = float(s.max_retry_after_s)
        self.max_tokens_param = s.max_tokens_param
        self.extra_body = dict(s.extra_body or {})
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
                for p in message_parts(m, i):
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

    def _generate(self, messages, *, temperature, max_tokens, seed, n, top_logprobs: int | None = None) -> Generation:
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
        if top_logprobs is not None:
            kwargs |= {"logprobs": True, "top_logprobs": top_logprobs}
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
        return self._parse(resp, n=n, retries=attempt, history=history, latency_s=time.monotonic() - t0,
                           logprobs=top_logprobs is not None)

    def _parse(self, resp: Any, *, n: int, retries: int, history: list[str], latency_s: float,
               logprobs: bool = False) -> Generation:
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
            if is_empty_text(content):
                raise fail("empty_content", f"choice {i} has empty content (finish_reason={getattr(ch, 'finish_reason', None)!r})")
            texts.append(content)
            reasons.append(getattr(ch, "finish_reason", None))
        if len(texts) != n:
            raise fail("n_mismatch", f"asked for n={n} completions, endpoint returned {len(texts)}")
        lps = None
        if logprobs:
            content = [getattr(getattr(ch, "logprobs", None), "content", None) for ch in choices]
            bad = next((i for i, c in enumerate(content) if not c), None)
            if bad is not None:
                raise fail("malformed_response", f"choice {bad} came back without token log-probabilities (logprobs=true "
                           "was sent; does the endpoint support it?)")
            lps = [token_logprobs(c, i, 0.0) for i, c in enumerate(content)]
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
            logprobs=lps,
        )

