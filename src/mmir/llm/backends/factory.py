"""Building backends from ``generators.<name>`` entries of params.yaml (typed by
:data:`mmir.config.models.Generator`: one model per backend, which its constructor takes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from mmir.config.models import Generator, fill, parse
from mmir.llm.accounting import Usage
from mmir.llm.backends.base import Backend
from mmir.llm.backends.llama_cpp import LlamaCppBackend
from mmir.llm.backends.openai import OpenAIBackend
from mmir.llm.backends.transformers import TransformersBackend

BACKENDS: dict[str, type[Backend]] = {
    "openai": OpenAIBackend,
    "llama_cpp": LlamaCppBackend,
    "transformers": TransformersBackend,
}


def as_generator(cfg: Mapping[str, Any] | BaseModel, key: str = "generators") -> Any:
    """A ``generators.<name>`` entry as its typed model (:class:`~mmir.config.models.OpenAIGenerator`, ...).

    Raises:
        ConfigError: an unknown backend or key, a missing or bad value (named under ``key``).
    """
    return cfg if isinstance(cfg, BaseModel) else parse(Generator, dict(cfg), key)


def backend_class(generator: Any) -> type[Backend]:
    """The :class:`Backend` class of a typed generator."""
    return BACKENDS[generator.backend]


def given_settings(generator: Any) -> dict[str, Any]:
    """The backend settings the config gives (the backend's ``DEFAULTS`` hold the others)."""
    return {k: v for k, v in fill(generator).items() if k not in ("backend", "prices")}


def make_backend(cfg: Mapping[str, Any] | BaseModel) -> Backend:
    """Build a backend from a ``generators.<name>`` entry (a dict or its typed model): ``backend``, its constructor
    arguments, and optional ``prices: {prompt_per_token, completion_per_token}`` for the cost.

    Raises:
        ConfigError: an unknown backend, an unknown or missing key (named in the message).
    """
    generator = as_generator(cfg)
    backend = backend_class(generator)(generator)
    prices = generator.prices
    backend.usage = Usage(
        prompt_price_per_token=prices.prompt_per_token if prices else None,
        completion_price_per_token=prices.completion_per_token if prices else None,
    )
    return backend
