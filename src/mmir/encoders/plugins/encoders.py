"""The encoders of ``backend: plugin`` systems: a plug-in (:mod:`mmir.encoders.plugins.protocols`) behind the interface
mmir's encode and retrieve steps already use for its kind, so stores, the embedding cache and search need nothing new.

* :class:`PluginTextEncoder` (``kind: dense``): a :class:`~mmir.encoders.text_base.TextEncoder`.
* :class:`PluginMMEncoder` (``kind: mm``): what :class:`~mmir.retrieval.encoding.KindEncoder` calls on a multimodal
  encoder (``encode_text``, ``encode_image_bytes``, ``encode_image_sets``, ``cache_kind``).
* :class:`PluginMultiVectorEncoder` (``kind: multivector``): ``encode_queries`` / ``encode_documents`` to token matrices.

Every batch is checked before use, then L2-normalised (rows; token vectors). Nothing is cut: a plug-in sees whole texts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from mmir.config.models import DensePluginSystem, MMPluginSystem, MultiVectorPluginSystem
from mmir.encoders.plugins.caller import PluginCaller
from mmir.encoders.plugins.checks import token_vectors_problem, vectors_problem
from mmir.encoders.plugins.loader import PluginError
from mmir.encoders.text_base import TextEncoder
from mmir.encoders.truncation import Truncations
from mmir.encoders.vectors import l2_normalize

log = logging.getLogger(__name__)

Documents = Callable[[], Sequence[str]] | None


def _vectors(caller: PluginCaller, method: str, args: tuple, n: int, what: str) -> np.ndarray:
    """A checked, L2-normalised ``(n, d)`` batch (no call for ``n == 0``)."""
    if n == 0:
        return np.zeros((0, caller.dim or 0), dtype=np.float32)
    out = caller.call(method, args, n, what, lambda o: vectors_problem(o, n, caller.dim, caller.dim_source))
    caller.dim = int(out.shape[1])
    return l2_normalize(out)


class PluginTextEncoder(TextEncoder):
    """A ``kind: dense`` plug-in (:class:`~mmir.encoders.plugins.protocols.DensePlugin`)."""

    def __init__(self, system: DensePluginSystem, where: str = "system", documents: Documents = None):
        self.caller = PluginCaller(system, "dense", where, documents)
        self.batch_size = system.batch_size
        self.calls = 0
        self.truncations = Truncations()

    def cache_spec(self) -> dict:
        return self.caller.cache_spec("dense")

    def _encode(self, method: str, texts: Sequence[str], what: str) -> np.ndarray:
        texts = list(texts)
        if texts:
            self.calls += 1
        return _vectors(self.caller, method, (texts,), len(texts), what)

    def encode_queries(self, texts):
        return self._encode("encode_queries", texts, "query texts")

    def encode_documents(self, texts):
        return self._encode("encode_documents", texts, "document texts")


class PluginMMEncoder:
    """A ``kind: mm`` plug-in (:class:`~mmir.encoders.plugins.protocols.MMPlugin`). Images are decoded here
    (:func:`mmir.data.images.decode_image`): a query image that does not decode becomes the blank image (counted in
    :attr:`blank_images`), a corpus image that does not decode stops the job, as for every multimodal encoder."""

    family = "plugin"

    def __init__(self, system: MMPluginSystem, where: str = "system", documents: Documents = None):
        self.caller = PluginCaller(system, "mm", where, documents)
        self.batch_size = system.batch_size
        self.multi_image = callable(getattr(self.caller.plugin, "encode_image_sets", None))
        if system.image_mode == "all" and not self.multi_image:
            raise PluginError(f"{self.caller.name}: image_mode all needs encode_image_sets(sets, role); use image_mode "
                              "stack (the images stacked into one) or mean (the mean of their vectors)")
        self.blank_images = 0

    def cache_spec(self) -> dict:
        return self.caller.cache_spec("mm")

    def cache_kind(self, modality: Literal["text", "image", "image_set"], role: str = "document") -> str:
        """Plug-ins are told the role, so every cache kind carries it."""
        return f"{modality}:{role}"

    def encode_text(self, texts: Sequence[str], *, role: str = "document") -> np.ndarray:
        texts = list(texts)
        return _vectors(self.caller, "encode_texts", (texts, role), len(texts), f"{role} texts")

    def _decode(self, datas: Sequence[bytes], role: str, on_error: str) -> list:
        from mmir.data.images import CorruptImage, ImageTooLarge, blank_image, decode_image

        images = []
        for i, data in enumerate(datas):
            try:
                images.append(decode_image(bytes(data), source=f"{self.caller.where}: {role} image {i} of the batch"))
            except (CorruptImage, ImageTooLarge) as err:
                if on_error != "blank":
                    raise
                log.warning("%s (replaced by the blank image)", err)
                self.blank_images += 1
                images.append(blank_image())
        return images

    def encode_image_bytes(self, datas: Sequence[bytes], batch_size: int | None = None, num_workers: int = 0, *,
                           role: str = "document", on_error: str = "raise", **_: Any) -> np.ndarray:
        """Encoded image files -> ``(len(datas), d)``; ``on_error="blank"`` (queries) or ``"raise"`` (corpus).

        Raises:
            CorruptImage, ImageTooLarge: a corpus image that does not decode. PluginError: a bad output.
        """
        images = self._decode(datas, role, on_error)
        return _vectors(self.caller, "encode_images", (images, role), len(images), f"{role} images")

    def encode_image_sets(self, sets: Sequence[Sequence], *, role: str = "query") -> np.ndarray:
        sets = [list(s) for s in sets]
        return _vectors(self.caller, "encode_image_sets", (sets, role), len(sets), f"{role} image sets")


class PluginMultiVectorEncoder:
    """A ``kind: multivector`` plug-in (:class:`~mmir.encoders.plugins.protocols.MultiVectorPlugin`)."""

    def __init__(self, system: MultiVectorPluginSystem, where: str = "system", documents: Documents = None):
        self.system = system
        self.caller = PluginCaller(system, "multivector", where, documents)

    def cache_spec(self) -> dict:
        return self.caller.cache_spec("multivector")

    def _encode(self, method: str, texts: Sequence[str], what: str) -> list[np.ndarray]:
        texts = list(texts)
        if not texts:
            return []
        c = self.caller
        out = c.call(method, (texts,), len(texts), what, lambda o: token_vectors_problem(o, len(texts), c.dim))
        c.dim = int(out[0].shape[1])
        return [l2_normalize(m) for m in out]

    def encode_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._encode("encode_queries", texts, "query texts")

    def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._encode("encode_documents", texts, "document texts")


def make_plugin_encoder(system: DensePluginSystem | MMPluginSystem | MultiVectorPluginSystem, where: str = "system",
                        documents: Documents = None):
    """The encoder of a ``backend: plugin`` system; ``where`` names it in errors (``systems.<name>``), ``documents``
    gives the domain's corpus texts for a plug-in with ``fit``.

    Raises:
        PluginError: as :class:`~mmir.encoders.plugins.caller.PluginCaller`.
    """
    cls = {"dense": PluginTextEncoder, "mm": PluginMMEncoder, "multivector": PluginMultiVectorEncoder}[system.kind]
    return cls(system, where, documents)
