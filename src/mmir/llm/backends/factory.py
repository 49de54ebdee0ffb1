"""Building and checking backends from config dicts (``generators.<name>`` of params.yaml)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from mmir.core.errors import ConfigError
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


def make_backend(cfg: Mapping[str, Any]) -> Backend:
    """Build a backend from a config dict: ``backend`` (``openai``/``llama_cpp``/``transformers``), its constructor
    arguments, and optional ``prices: {prompt_per_token, completion_per_token}``.

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
