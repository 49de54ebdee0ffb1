"""The backend interface: ``Backend.generate(messages, *, temperature=0.0, max_tokens=256, seed=None, n=1,
top_logprobs=None) -> Generation``. A call that does not produce usable text raises
:class:`~mmir.llm.errors.GenerationFailure`; it is never turned into an empty string. ``top_logprobs`` (backends with
``supports_logprobs``) adds each reply token's log-probability and its ``top_logprobs`` alternatives
(:attr:`Generation.logprobs`). Messages: :mod:`mmir.llm.messages`."""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from mmir.llm.accounting import Usage
from mmir.llm.errors import GenerationFailure, UnsupportedInputError
from mmir.llm.messages import Message, validate_messages

log = logging.getLogger("mmir.llm.backends")

SAMPLING_KEYS = ("temperature", "max_tokens", "seed", "n")


@dataclass
class Generation:
    """The outcome of one successful ``generate`` call.

    Attributes:
        texts: ``n`` completions, in order.
        prompt_tokens, completion_tokens: as reported (completion summed over ``n``; ``None`` if unreported).
        latency_s: wall time of the call, retries and back-off included.
        retry_reasons: why each retry happened (``"timeout"``, ``"http 429"``, ...), in order.
        logprobs: with ``top_logprobs``: per completion, its tokens in order, each ``{"token": str, "logprob": float
            (natural log), "top": [[token, logprob], ...]}`` (the most probable tokens at that position, the backend's
            order); ``None`` when not asked for.
    """

    texts: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    retries: int = 0
    finish_reasons: list[str | None] = field(default_factory=list)
    retry_reasons: list[str] = field(default_factory=list)
    model: str | None = None
    logprobs: list[list[dict[str, Any]]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every field (``logprobs`` only when present)."""
        d = asdict(self)
        if d["logprobs"] is None:
            del d["logprobs"]
        return d



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


def check_sampling(temperature: float, max_tokens: int, n: int) -> None:
    if not (isinstance(max_tokens, int) and max_tokens >= 1):
        raise UnsupportedInputError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if not (isinstance(n, int) and n >= 1):
        raise UnsupportedInputError(f"n must be an int >= 1, got {n!r}")
    if temperature < 0:
        raise UnsupportedInputError(f"temperature must be >= 0, got {temperature!r}")


def is_empty_text(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def token_logprobs(content: Any, i: int, t0: float) -> list[dict[str, Any]]:
    """An OpenAI-style ``choices[i].logprobs.content`` list (dicts or SDK objects with ``token``, ``logprob``,
    ``top_logprobs``) as :attr:`Generation.logprobs` entries.

    Raises:
        GenerationFailure: (``malformed_response``) no token log-probabilities in the reply.
    """
    def get(o: Any, k: str) -> Any:
        return o.get(k) if isinstance(o, Mapping) else getattr(o, k, None)

    if not content:
        raise GenerationFailure("malformed_response", f"completion {i} came back without token log-probabilities",
                                latency_s=time.monotonic() - t0, history=["malformed_response"])
    return [{"token": str(get(t, "token")), "logprob": float(get(t, "logprob")),
             "top": [[str(get(a, "token")), float(get(a, "logprob"))] for a in (get(t, "top_logprobs") or [])]}
            for t in content]


# ------------------------------------------------------------------------------------------------- base
class Backend(abc.ABC):
    """One text generator: subclasses implement :meth:`_generate`; ``name`` is the backend kind."""

    name: str = "backend"
    max_concurrency: int = 1
    #: the backend returns token log-probabilities (``generate(..., top_logprobs=k)``)
    supports_logprobs: bool = False

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
        top_logprobs: int | None = None,
    ) -> Generation:
        """Generate ``n`` completions for ``messages`` (``temperature`` 0 = greedy); with ``top_logprobs`` also each
        reply token's log-probability and the ``top_logprobs`` most probable tokens at its position.

        Returns:
            A :class:`Generation` with ``len(texts) == n``, every text non-empty (``logprobs`` set when asked for).

        Raises:
            UnsupportedInputError: malformed messages or sampling arguments, input the backend cannot take, or
                ``top_logprobs`` on a backend without ``supports_logprobs``.
            GenerationFailure: the backend produced no usable output (after retries where they apply).
        """
        validate_messages(messages)
        check_sampling(temperature, max_tokens, n)
        extra: dict[str, Any] = {}
        if top_logprobs is not None:
            if not self.supports_logprobs:
                raise UnsupportedInputError(f"backend {self.name} gives no log-probabilities (top_logprobs={top_logprobs})")
            if not (isinstance(top_logprobs, int) and top_logprobs >= 1):
                raise UnsupportedInputError(f"top_logprobs must be an int >= 1, got {top_logprobs!r}")
            extra["top_logprobs"] = top_logprobs
        try:
            gen = self._generate(messages, temperature=float(temperature), max_tokens=max_tokens, seed=seed, n=n, **extra)
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
        """Run several requests concurrently (at most ``self.max_concurrency``), in request order.

        Args:
            requests: lists of messages or dicts of :meth:`generate` arguments.
            return_failures: yield each :class:`GenerationFailure` in place; else raise the first after all finish.

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


def with_defaults(settings: Any, defaults: Mapping[str, Any]) -> Any:
    """``settings`` (a typed generator model) with each field the config left out set to the backend's ``defaults``
    (a field the config gave, even as null, is kept)."""
    return settings.model_copy(update={k: v for k, v in defaults.items() if k not in settings.model_fields_set})

