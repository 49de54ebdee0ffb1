"""Usage accounting for generative stages (:class:`Usage`): requests, failures, retries, tokens, latency, cost."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Usage:
    """Accumulated usage of one backend or stage (thread-safe; counts only), flattened for ``mlflow.log_metrics``.

    Prices are per token in any currency (``None`` = no cost). Counters: ``requests``, ``failures``, ``retries``,
    ``prompt_tokens``, ``completion_tokens``, ``latency_s`` (back-off included), ``cache_hits``.
    """

    prompt_price_per_token: float | None = None
    completion_price_per_token: float | None = None
    requests: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, generation: Any) -> None:
        """Record one successful call: a ``Generation`` (any object with ``prompt_tokens``,
        ``completion_tokens``, ``latency_s`` and ``retries``; ``None`` token counts count as 0)."""
        with self._lock:
            self.requests += 1
            self.retries += int(generation.retries or 0)
            self.prompt_tokens += int(generation.prompt_tokens or 0)
            self.completion_tokens += int(generation.completion_tokens or 0)
            self.latency_s += float(generation.latency_s or 0.0)

    def add_failure(self, failure: Any) -> None:
        """Record one failed call: a ``GenerationFailure`` (``retries``, ``latency_s`` attributes)."""
        with self._lock:
            self.requests += 1
            self.failures += 1
            self.retries += int(getattr(failure, "retries", 0) or 0)
            self.latency_s += float(getattr(failure, "latency_s", 0.0) or 0.0)

    def add_cache_hit(self, n: int = 1) -> None:
        """Record ``n`` generations served from a cache."""
        with self._lock:
            self.cache_hits += n

    def merge(self, other: Usage) -> None:
        """Add the counters of ``other`` into this one (prices of ``self`` are kept)."""
        with self._lock:
            for name in ("requests", "failures", "retries", "prompt_tokens", "completion_tokens", "cache_hits"):
                setattr(self, name, getattr(self, name) + getattr(other, name))
            self.latency_s += other.latency_s

    @property
    def cost(self) -> float | None:
        """Token cost from the per-token prices, or ``None`` when neither price is given."""
        if self.prompt_price_per_token is None and self.completion_price_per_token is None:
            return None
        return self.prompt_tokens * (self.prompt_price_per_token or 0.0) + self.completion_tokens * (
            self.completion_price_per_token or 0.0
        )

    def as_metrics(self, prefix: str = "gen_") -> dict[str, float]:
        """Flat metrics for MLflow: ``{prefix}requests``, ``failures``, ``retries``, ``prompt_tokens``,
        ``completion_tokens``, ``latency_s``, ``mean_latency_s``, ``cache_hits`` and, when prices are
        given, ``cost``. All values are floats."""
        with self._lock:
            m = {
                "requests": self.requests,
                "failures": self.failures,
                "retries": self.retries,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "latency_s": self.latency_s,
                "mean_latency_s": self.latency_s / self.requests if self.requests else 0.0,
                "cache_hits": self.cache_hits,
            }
        cost = self.cost
        if cost is not None:
            m["cost"] = cost
        return {f"{prefix}{k}": float(v) for k, v in m.items()}
