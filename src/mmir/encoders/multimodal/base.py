"""The interface of every multimodal encoder (:class:`MultimodalEncoder`) and the helpers its families share.

Outputs are ``(n, d)`` float32 L2-normalised rows. Texts are cut at ``max_chars``, then truncated at the
model's token limit (CLIP 77, SigLIP 64, GME 1800), never an error (:mod:`mmir.encoders.truncation`).
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from PIL import Image

from mmir.data.images import DEFAULT_MAX_PIXELS, CorruptImage, ImageTally, ImageTooLarge, decode_image, to_rgb
from mmir.encoders.fingerprint import hub_commit, is_commit, local_fingerprint
from mmir.encoders.multimodal.batching import Collate, ImageBytesDataset, identity, list_collate
from mmir.encoders.truncation import Truncations, cut_chars, default_max_chars, silence_length_warning
from mmir.encoders.vectors import l2_normalize

log = logging.getLogger(__name__)

Role = Literal["query", "document"]


def default_device() -> str:
    """``"cuda"`` when a GPU is visible to torch, else ``"cpu"``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def features_tensor(out: Any) -> torch.Tensor:
    """The embedding tensor of a ``get_text_features``/``get_image_features`` result (tensor or ``pooler_output``)."""
    if isinstance(out, torch.Tensor):
        return out
    for name in ("pooler_output", "text_embeds", "image_embeds"):
        val = getattr(out, name, None)
        if isinstance(val, torch.Tensor):
            return val
    raise TypeError(f"cannot find an embedding tensor in {type(out).__name__}")


def hub_or_local_revision(model: Any, model_id: str, revision: str | None) -> str | None:
    """Cache-key revision: the content fingerprint of a local directory, else the hub commit ``revision`` names."""
    if Path(model_id).exists():
        return local_fingerprint(model_id)
    if is_commit(revision):
        return revision
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    return commit or hub_commit(model_id, revision)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def hf_token_lengths(tokenizer, texts: list[str]) -> list[int]:
    """Token counts (special tokens included, no truncation) of ``texts`` under a transformers tokenizer."""
    silence_length_warning(tokenizer)
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]


class MultimodalEncoder(abc.ABC):
    """Text and image encoder into one joint space; every output row is L2-normalised float32.

    Subclasses implement ``dim``, ``_encode_text_batch``, ``_encode_image_batch`` and, for DataLoader
    preprocessing, ``image_transform``/``collate_items``.
    """

    family: str = "abstract"
    #: whether the model takes several images in one input (``image_mode: all``, :meth:`encode_image_sets`)
    multi_image: bool = False

    def __init__(self, *, model_id: str, revision: str | None, device: str | None = None, batch_size: int = 32,
                 half: bool = True):
        self.model_id, self.revision = model_id, revision
        self.device = torch.device(device or default_device())
        self.batch_size = int(batch_size)
        self.half = bool(half)
        self._max_chars: int | None = None
        self.truncations = Truncations()

    # --- properties -------------------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Embedding dimension ``d``."""

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """``torch.float16`` under CUDA autocast, ``None`` (plain float32) on CPU."""
        return torch.float16 if (self.half and self.device.type == "cuda") else None

    @property
    def weights_dtype(self) -> torch.dtype:
        """dtype of the model's weights (float32 unless the model was loaded in half precision)."""
        model = getattr(self, "model", None)
        params = model.parameters() if isinstance(model, torch.nn.Module) else iter(())
        return next(params, torch.zeros(0)).dtype

    def preprocessing(self) -> dict:
        """Every preprocessing choice that changes a vector (image size, text length, prompts)."""
        return {}

    @property
    def text_token_limit(self) -> int | None:
        """Tokens of text the model reads (the truncation length); None when unknown."""
        return None

    @property
    def max_chars(self) -> int | None:
        """Characters of a text kept before tokenisation: the value set, else 8 per :attr:`text_token_limit`
        (512 tokens when the limit is unknown)."""
        if self._max_chars is not None:
            return self._max_chars
        return default_max_chars(self.text_token_limit or 512)

    @max_chars.setter
    def max_chars(self, value: int | None) -> None:
        if value is not None and int(value) < 1:
            raise ValueError(f"max_chars must be a positive integer or None, got {value!r}")
        self._max_chars = None if value is None else int(value)

    def _token_lengths(self, texts: list[str], role: Role) -> list[int] | None:
        """Tokens of each (character-cut) text before truncation, as the model's tokenizer counts them
        (prompts included); None when the tokenizer is not reachable (remote-code encoders)."""
        return None

    @property
    def role_sensitive(self) -> bool:
        """True when a text/image is encoded differently as a query than as a document."""
        return False

    @property
    def cache_spec(self) -> dict:
        """Spec for :class:`~mmir.encoders.cache.EmbeddingCache`: model id, resolved revision,
        preprocessing, dtype (``float16-autocast`` on CUDA, else the weights dtype), the text character budget
        and normalisation."""
        ac = self.autocast_dtype
        return {
            "model": self.model_id,
            "revision": self.revision,
            "family": self.family,
            "preprocessing": self.preprocessing(),
            "dtype": f"{_dtype_name(ac)}-autocast" if ac is not None else _dtype_name(self.weights_dtype),
            "text_max_chars": self.max_chars,
            "normalize": "l2",
        }

    def cache_kind(self, modality: Literal["text", "image", "image_set"], role: Role = "document") -> str:
        """The ``kind`` for :func:`~mmir.encoders.cache.content_key`: ``"text"``/``"image"``, suffixed with
        ``":query"``/``":document"`` for role-sensitive encoders."""
        return f"{modality}:{role}" if self.role_sensitive else modality

    # --- context --------------------------------------------------------------------------------------
    def _ctx(self):
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        ac = self.autocast_dtype
        if ac is not None:
            stack.enter_context(torch.autocast(device_type="cuda", dtype=ac))
        return stack

    def _empty(self) -> np.ndarray:
        return np.zeros((0, self.dim), dtype=np.float32)

    @staticmethod
    def _to_numpy(t: torch.Tensor) -> np.ndarray:
        return l2_normalize(t.detach().float().cpu().numpy())

    # --- hooks -----------------------------------------------------------------------------------------
    @abc.abstractmethod
    def _encode_text_batch(self, texts: list[str], role: Role) -> torch.Tensor:
        """Un-normalised ``(len(texts), d)`` features of one batch."""

    @abc.abstractmethod
    def _encode_image_batch(self, batch: Any, role: Role) -> torch.Tensor:
        """Un-normalised ``(n, d)`` features of one collated batch (see :meth:`collate_items`)."""

    def image_transform(self) -> Callable[[Image.Image], Any]:
        """Picklable per-image preprocessing run in DataLoader workers (default: keep the RGB image)."""
        return identity

    def collate_items(self) -> Callable[[list], Any]:
        """Picklable function that turns transformed images into one batch (default: a list)."""
        return list_collate

    # --- public encoding -------------------------------------------------------------------------------
    def count_truncations(self, texts: Sequence[str], role: Role = "document") -> dict:
        """The cuts :meth:`encode_text` makes on ``texts`` (:class:`~mmir.encoders.truncation.Truncations` keys),
        without running the model."""
        cut, flags = cut_chars(texts, self.max_chars)
        return Truncations().record(flags, self._token_lengths(cut, role) if cut else None, self.text_token_limit,
                                    what=f"{self.model_id} {role} texts", max_chars=self.max_chars)

    def encode_text(self, texts: Sequence[str], *, role: Role = "document") -> np.ndarray:
        """Encode texts (cut at :attr:`max_chars`, then at the token limit; counted in :attr:`truncations`).

        Returns:
            ``(len(texts), dim)`` float32, L2-normalised rows.
        """
        texts, flags = cut_chars(texts, self.max_chars)
        if not texts:
            return self._empty()
        self.truncations.record(flags, self._token_lengths(texts, role), self.text_token_limit,
                                what=f"{self.model_id} {role} texts", max_chars=self.max_chars)
        out = []
        with self._ctx():
            for i in range(0, len(texts), self.batch_size):
                out.append(self._to_numpy(self._encode_text_batch(texts[i : i + self.batch_size], role)))
        return np.concatenate(out).astype(np.float32, copy=False)

    def encode_images(self, images: Sequence[Image.Image], *, role: Role = "document") -> np.ndarray:
        """Encode already-decoded images (converted to RGB first, see :func:`mmir.data.images.to_rgb`).

        Returns:
            ``(len(images), dim)`` float32, L2-normalised rows.
        """
        if not images:
            return self._empty()
        transform, collate = self.image_transform(), self.collate_items()
        out = []
        with self._ctx():
            for i in range(0, len(images), self.batch_size):
                chunk = [transform(to_rgb(im)) for im in images[i : i + self.batch_size]]
                out.append(self._to_numpy(self._encode_image_batch(collate(chunk), role)))
        return np.concatenate(out).astype(np.float32, copy=False)

    def _encode_image_set_batch(self, sets: list[list[Image.Image]], role: Role) -> torch.Tensor:
        """Un-normalised ``(len(sets), d)`` features, one per set of (preprocessed) images given as one input."""
        raise NotImplementedError(f"{self.family} takes one image per input")

    def encode_image_sets(self, sets: Sequence[Sequence[Image.Image]], *, role: Role = "query") -> np.ndarray:
        """Encode each set of images as ONE input, its images in order (``image_mode: all``).

        Returns:
            ``(len(sets), dim)`` float32, L2-normalised rows.

        Raises:
            ValueError: a single-image encoder (the message names ``stack`` and ``mean``), or an empty set.
        """
        if not self.multi_image:
            raise ValueError(f"{self.model_id} ({self.family}) takes one image per input, so it cannot take image_mode all: "
                             "use image_mode stack (the images stacked into one) or mean (the mean of their vectors)")
        if any(len(s) == 0 for s in sets):
            raise ValueError("an image set is empty (a query without a usable image gets the blank image)")
        if not sets:
            return self._empty()
        transform = self.image_transform()
        out = []
        with self._ctx():
            for i in range(0, len(sets), self.batch_size):
                chunk = [[transform(to_rgb(im)) for im in s] for s in sets[i : i + self.batch_size]]
                out.append(self._to_numpy(self._encode_image_set_batch(chunk, role)))
        return np.concatenate(out).astype(np.float32, copy=False)

    def _run_bytes(self, datas, batch_size, num_workers, sources, role, substitute_blank, max_pixels):
        sources = list(sources) if sources is not None else [f"image[{i}]" for i in range(len(datas))]
        if len(sources) != len(datas):
            raise ValueError(f"{len(datas)} images but {len(sources)} sources")
        ds = ImageBytesDataset(datas, sources, self.image_transform(), max_pixels, substitute_blank)
        loader = torch.utils.data.DataLoader(
            ds,
            batch_size=batch_size or self.batch_size,
            shuffle=False,
            num_workers=num_workers,
            collate_fn=Collate(self.collate_items()),
            pin_memory=self.device.type == "cuda",
            prefetch_factor=4 if num_workers > 0 else None,
        )
        vecs, kept, failed = [], [], []
        with self._ctx():
            for _idx, kept_b, failed_b, batch in loader:
                failed.extend(failed_b)
                if batch is not None:
                    vecs.append(self._to_numpy(self._encode_image_batch(batch, role)))
                    kept.extend(kept_b)
        mat = np.concatenate(vecs).astype(np.float32, copy=False) if vecs else self._empty()
        return mat, np.asarray(kept, dtype=np.int64), failed, sources

    def _error_of(self, data: bytes, source: str, max_pixels: int):
        try:
            decode_image(data, source=source, max_pixels=max_pixels)
        except (CorruptImage, ImageTooLarge) as e:
            return e
        raise RuntimeError(f"{source}: failed in a DataLoader worker but decodes in the main process")

    def encode_image_bytes(
        self,
        datas: Sequence[bytes],
        batch_size: int | None = None,
        num_workers: int = 0,
        *,
        sources: Sequence[str] | None = None,
        role: Role = "document",
        on_error: Literal["raise", "blank"] = "raise",
        tally: ImageTally | None = None,
        domain: str = "unknown",
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> np.ndarray:
        """Decode, preprocess and encode encoded image files with a DataLoader.

        Args:
            num_workers: DataLoader worker processes for decoding/preprocessing (0: in this process).
            sources: names for error messages (default ``image[i]``).
            on_error: ``"raise"`` or ``"blank"`` (query rule of :mod:`mmir.data.images`: encode the blank image,
                count it in ``tally`` under ``domain``).
            max_pixels: decompression-bomb limit per image.

        Returns:
            ``(len(datas), dim)`` float32, L2-normalised, in input order.

        Raises:
            CorruptImage, ImageTooLarge: a broken image with ``on_error="raise"``, naming its source.
        """
        if on_error not in ("raise", "blank"):
            raise ValueError(f"on_error must be 'raise' or 'blank', got {on_error!r}")
        if not len(datas):
            return self._empty()
        mat, kept, failed, sources = self._run_bytes(
            datas, batch_size, num_workers, sources, role, on_error == "blank", max_pixels
        )
        if failed and on_error == "raise":
            raise self._error_of(datas[failed[0]], sources[failed[0]], max_pixels)
        for i in failed:
            err = self._error_of(datas[i], sources[i], max_pixels)
            log.warning("%s (replaced by the blank image)", err)
            if tally is not None:
                tally.record_failure(domain, err, "query")
        if tally is not None:
            tally.record_ok(domain, len(datas) - len(failed))
        return mat

    def encode_corpus_image_bytes(
        self,
        datas: Sequence[bytes],
        batch_size: int | None = None,
        num_workers: int = 0,
        *,
        sources: Sequence[str] | None = None,
        tally: ImageTally | None = None,
        domain: str = "unknown",
        max_pixels: int = DEFAULT_MAX_PIXELS,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode corpus images, dropping broken ones (corpus rule of :mod:`mmir.data.images`).

        Returns:
            ``(vectors, kept)``: float32 ``(m, dim)`` for the ``m`` images that decoded, int64 ``(m,)`` their
            ascending positions in ``datas``.
        """
        if not len(datas):
            return self._empty(), np.zeros(0, dtype=np.int64)
        mat, kept, failed, sources = self._run_bytes(
            datas, batch_size, num_workers, sources, "document", False, max_pixels
        )
        for i in failed:
            err = self._error_of(datas[i], sources[i], max_pixels)
            log.warning("%s (dropped from the image corpus)", err)
            if tally is not None:
                tally.record_failure(domain, err, "corpus")
        if tally is not None:
            tally.record_ok(domain, len(kept))
        return mat, kept

