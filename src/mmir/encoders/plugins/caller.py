"""One loaded plug-in of one config entry: built from its factory, fitted on the corpus when it asks for it, and called
batch by batch with every output checked (:mod:`mmir.encoders.plugins.checks`) before anything uses it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from mmir.config.models import PluginFields
from mmir.encoders.plugins.loader import PluginError, load
from mmir.encoders.plugins.protocols import PROTOCOLS

log = logging.getLogger(__name__)


def texts_sha256(texts: Sequence[str]) -> str:
    """sha256 of a list of texts (each length-prefixed, so no two lists share one)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


class PluginCaller:
    """The plug-in of ``cfg`` (a ``backend: plugin`` entry) for protocol ``kind`` (dense, mm, multivector, reranker).

    Args:
        where: the config entry, for errors (``systems.<name>``, ``rerankers.<name>``).
        documents: gives the domain's corpus texts, read only when the plug-in has ``fit``.

    Raises:
        PluginError: the factory fails (as :func:`~mmir.encoders.plugins.loader.load`), its object lacks a method of
            the kind's protocol, or it has ``fit`` and no corpus was given.
    """

    def __init__(self, cfg: PluginFields, kind: str, where: str, documents: Callable[[], Sequence[str]] | None = None):
        self.where, self.factory, self.options = where, cfg.factory, dict(cfg.options)
        self.plugin, self.identity = load(cfg.factory, self.options, where)
        protocol, methods = PROTOCOLS[kind]
        missing = [m for m in methods if not callable(getattr(self.plugin, m, None))]
        if missing:
            raise self._error(f"its factory returned a {type(self.plugin).__qualname__} without {', '.join(missing)} (the "
                              f"{protocol.__name__} protocol: {', '.join(methods)})")
        self.batches = 0
        self.dim: int | None = None
        self.dim_source = "earlier batches had"  # where ``dim`` came from, in errors
        self._pending_fit: list[str] | None = None
        self.fit_spec: dict | None = None
        if callable(getattr(self.plugin, "fit", None)):
            if documents is None:
                raise self._error("it has fit(documents), but no corpus was given to fit it on")
            docs = [str(t) for t in documents()]
            self._pending_fit = docs
            self.fit_spec = {"documents": len(docs), "sha256": texts_sha256(docs)}

    @property
    def name(self) -> str:
        """``<where> (plug-in <factory>, <identity>)``: how errors and logs name it."""
        return f"{self.where} (plug-in {self.factory}, {self.identity.label})"

    def _error(self, message: str) -> PluginError:
        return PluginError(f"{self.where}: plug-in {self.factory!r} ({self.identity.label}): {message}")

    def cache_spec(self, kind: str) -> dict[str, Any]:
        """The embedding-cache key of the plug-in's vectors: kind, factory, identity, options, the corpus it fits on,
        normalisation. ``model`` names the cache files."""
        return {"backend": "plugin", "kind": kind, "model": self.factory, "plugin": self.identity.key(), "options": self.options,
                "fit": self.fit_spec, "normalize": "l2"}

    def expect(self, dim: int | None, cache: str) -> None:
        """The embedding cache ``cache`` already holds this plug-in's vectors, of dimension ``dim`` (None: empty): a batch
        of another dimension then stops the job with this plug-in's error (entry, factory, identity, batch) before the
        cache sees it."""
        if dim is not None and self.dim is None:
            self.dim, self.dim_source = dim, f"the embedding cache {cache} holds this plug-in's vectors of dimension"

    def fit(self) -> None:
        """``fit(documents)`` once, before the first call (a no-op for a plug-in without it)."""
        if self._pending_fit is None:
            return
        docs, self._pending_fit = self._pending_fit, None
        try:
            self.plugin.fit(docs)
        except Exception as exc:  # noqa: BLE001 (a plug-in may raise anything)
            raise self._error(f"fit on {len(docs)} corpus documents raised {type(exc).__name__}: {exc}") from exc
        log.info("%s: fitted on %d corpus documents", self.name, len(docs))

    def call(self, method: str, args: tuple, n: int, what: str, check: Callable[[Any], str | None], batch: str | None = None) -> Any:
        """``plugin.<method>(*args)``, checked by ``check``; ``n`` inputs described as ``what`` (errors name them).

        Raises:
            PluginError: the call raised, or ``check`` found its output wrong (naming the batch: ``batch`` or its
                number among this process's calls); nothing of that batch is returned, so nothing is written.
        """
        self.fit()
        self.batches += 1
        label = batch or f"batch {self.batches}"
        try:
            out = getattr(self.plugin, method)(*args)
        except Exception as exc:  # noqa: BLE001
            raise self._error(f"{label} ({n} {what}, {method}) raised {type(exc).__name__}: {exc}") from exc
        problem = check(out)
        if problem:
            raise self._error(f"{label} ({n} {what}, {method}): {problem}; the job stops, nothing of this batch is written")
        return out
