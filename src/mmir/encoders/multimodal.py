"""Multimodal (image + text) encoders behind one interface (:class:`MultimodalEncoder`), and the MM-BRIGHT
query-vector protocol (§4.1, :func:`build_query_vectors`, :func:`pair_vectors`).

Outputs are ``(n, d)`` float32 L2-normalised rows. Texts are cut at ``max_chars``, then truncated at the
model's token limit (CLIP 77, SigLIP 64, GME 1800), never an error (:mod:`mmir.encoders.truncation`).
:data:`MM_MODELS` maps the paper's model names (MM-BRIGHT §4.1) to builders and their offline test status.
See the README, "Tasks 2–4 (multimodal)".
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import logging
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from PIL import Image

from mmir.data.images import (
    DEFAULT_MAX_PIXELS,
    CorruptImage,
    ImageTally,
    ImageTooLarge,
    blank_image,
    decode_image,
    to_rgb,
)
from mmir.encoders.fingerprint import local_fingerprint
from mmir.encoders.truncation import Truncations, cut_chars, default_max_chars, silence_length_warning

log = logging.getLogger(__name__)

Role = Literal["query", "document"]

STATUS_VERIFIED = "verified offline"
STATUS_RANDOM = "code path tested with random weights"
STATUS_REMOTE = "untested offline because it needs remote code"

DEFAULT_CLIP = "openai/clip-vit-large-patch14"
DEFAULT_SIGLIP = "google/siglip-so400m-patch14-384"
DEFAULT_GME_2B = "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct"
DEFAULT_GME_7B = "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct"
DEFAULT_JINA_CLIP = "jinaai/jina-clip-v1"
DEFAULT_NOMIC_VISION = "nomic-ai/nomic-embed-vision-v1.5"
DEFAULT_NOMIC_TEXT = "nomic-ai/nomic-embed-text-v1.5"
#: the nomic-embed-text-v1.5 commit of the MTEB model meta of nomic-embed-vision-v1.5 (``text_model_revision``)
NOMIC_TEXT_REVISION = "a03db6748c80237063eb0546ac6b627eca2318cb"
DEFAULT_BGE_VL = "BAAI/BGE-VL-base"


# ---------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------

def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` divided by their L2 norm (float32); an all-zero row stays zero."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.maximum(norms, eps)).astype(np.float32, copy=False)


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


def _hub_or_local_revision(model: Any, model_id: str, revision: str | None) -> str | None:
    """Cache-key revision: the content fingerprint of a local directory, else the hub commit ``revision`` names."""
    if Path(model_id).exists():
        return local_fingerprint(model_id)
    from mmir.encoders.text import hub_commit, is_commit

    if is_commit(revision):
        return revision
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    return commit or hub_commit(model_id, revision)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _hf_lengths(tokenizer, texts: list[str]) -> list[int]:
    """Token counts (special tokens included, no truncation) of ``texts`` under a transformers tokenizer."""
    silence_length_warning(tokenizer)
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]


# ---------------------------------------------------------------------------------------------------------
# DataLoader plumbing (module-level so it pickles for worker processes)
# ---------------------------------------------------------------------------------------------------------

class _ImageBytesDataset(torch.utils.data.Dataset):
    """Decode + preprocess one image per item; broken images are reported, not raised, inside the worker."""

    def __init__(self, datas: Sequence[bytes], sources: Sequence[str], transform: Callable, max_pixels: int,
                 substitute_blank: bool):
        self.datas, self.sources, self.transform = datas, sources, transform
        self.max_pixels, self.substitute_blank = max_pixels, substitute_blank

    def __len__(self) -> int:
        return len(self.datas)

    def __getitem__(self, i: int):
        try:
            img = decode_image(self.datas[i], source=self.sources[i], max_pixels=self.max_pixels)
            failed = False
        except (CorruptImage, ImageTooLarge):
            # the main process re-raises or counts it (DataError subclasses do not survive worker re-raising)
            if not self.substitute_blank:
                return i, None, True
            img, failed = blank_image(), True
        return i, self.transform(img), failed


class _Collate:
    def __init__(self, collate_items: Callable[[list], Any]):
        self.collate_items = collate_items

    def __call__(self, rows):
        idx = [r[0] for r in rows]
        failed = [r[0] for r in rows if r[2]]
        items = [r[1] for r in rows if r[1] is not None]
        kept = [r[0] for r in rows if r[1] is not None]
        return idx, kept, failed, (self.collate_items(items) if items else None)


def _identity(img: Image.Image) -> Image.Image:
    return img


def _list_collate(items: list) -> list:
    return list(items)


def _stack_collate(items: list) -> torch.Tensor:
    return torch.stack(items)


class _HFPixelTransform:
    """transformers image processor -> ``pixel_values`` tensor ``(3, H, W)`` of one image."""

    def __init__(self, image_processor: Any):
        self.image_processor = image_processor

    def __call__(self, img: Image.Image) -> torch.Tensor:
        return self.image_processor(images=[img], return_tensors="pt")["pixel_values"][0]


# ---------------------------------------------------------------------------------------------------------
# the interface
# ---------------------------------------------------------------------------------------------------------

class MultimodalEncoder(abc.ABC):
    """Text and image encoder into one joint space; every output row is L2-normalised float32.

    Subclasses implement ``dim``, ``_encode_text_batch``, ``_encode_image_batch`` and, for DataLoader
    preprocessing, ``image_transform``/``collate_items``.
    """

    family: str = "abstract"

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

    def cache_kind(self, modality: Literal["text", "image"], role: Role = "document") -> str:
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
        return _identity

    def collate_items(self) -> Callable[[list], Any]:
        """Picklable function that turns transformed images into one batch (default: a list)."""
        return _list_collate

    # --- public encoding -------------------------------------------------------------------------------
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

    def _run_bytes(self, datas, batch_size, num_workers, sources, role, substitute_blank, max_pixels):
        sources = list(sources) if sources is not None else [f"image[{i}]" for i in range(len(datas))]
        if len(sources) != len(datas):
            raise ValueError(f"{len(datas)} images but {len(sources)} sources")
        ds = _ImageBytesDataset(datas, sources, self.image_transform(), max_pixels, substitute_blank)
        loader = torch.utils.data.DataLoader(
            ds,
            batch_size=batch_size or self.batch_size,
            shuffle=False,
            num_workers=num_workers,
            collate_fn=_Collate(self.collate_items()),
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


# ---------------------------------------------------------------------------------------------------------
# transformers dual encoders: CLIP, SigLIP
# ---------------------------------------------------------------------------------------------------------

class HFDualEncoder(MultimodalEncoder):
    """A transformers dual encoder with ``get_text_features`` / ``get_image_features`` (CLIP, SigLIP).

    Args:
        text_padding: ``"longest"`` (CLIP) or ``"max_length"`` (SigLIP, as trained).
        pass_attention_mask: give the text tower the attention mask (CLIP; SigLIP was trained without one).
        max_text_tokens: default ``text_config.max_position_embeddings`` (CLIP 77, SigLIP 64).
    """

    family = "hf-dual"

    def __init__(self, model, processor, *, model_id: str, revision: str | None, family: str = "clip",
                 text_padding: str = "longest", pass_attention_mask: bool = True,
                 max_text_tokens: int | None = None, device: str | None = None, batch_size: int = 32,
                 half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.family = family
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.text_padding, self.pass_attention_mask = text_padding, pass_attention_mask
        tc = model.config.text_config
        self.max_text_tokens = int(max_text_tokens or tc.max_position_embeddings)
        with torch.inference_mode():
            probe = features_tensor(
                self.model.get_text_features(
                    input_ids=torch.zeros((1, 1), dtype=torch.long, device=self.device)
                )
            )
        self._dim = int(probe.shape[-1])

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def text_token_limit(self) -> int:
        return self.max_text_tokens

    def _token_lengths(self, texts, role):
        return _hf_lengths(self.processor.tokenizer, texts)

    def preprocessing(self) -> dict:
        ip = self.processor.image_processor
        return {
            "max_text_tokens": self.max_text_tokens,
            "text_padding": self.text_padding,
            "pass_attention_mask": self.pass_attention_mask,
            "image_processor": type(ip).__name__,
            "size": getattr(ip, "size", None),
            "crop_size": getattr(ip, "crop_size", None),
            "image_mean": list(getattr(ip, "image_mean", []) or []),
            "image_std": list(getattr(ip, "image_std", []) or []),
        }

    def _encode_text_batch(self, texts, role):
        tok = self.processor.tokenizer(
            texts, padding=self.text_padding, truncation=True, max_length=self.max_text_tokens,
            return_tensors="pt",
        )
        kwargs = {"input_ids": tok["input_ids"].to(self.device)}
        if self.pass_attention_mask and "attention_mask" in tok:
            kwargs["attention_mask"] = tok["attention_mask"].to(self.device)
        return features_tensor(self.model.get_text_features(**kwargs))

    def image_transform(self):
        return _HFPixelTransform(self.processor.image_processor)

    def collate_items(self):
        return _stack_collate

    def _encode_image_batch(self, batch, role):
        pv = batch.to(self.device, non_blocking=True)
        return features_tensor(self.model.get_image_features(pixel_values=pv))


def build_clip(model_id: str = DEFAULT_CLIP, revision: str | None = "main", *, model=None, processor=None,
               device: str | None = None, batch_size: int = 32, half: bool = True, **load_kwargs) -> HFDualEncoder:
    """transformers CLIP (MM-BRIGHT §4.1 "CLIP"); a prebuilt ``model`` + ``processor`` skips loading."""
    if model is None or processor is None:
        from transformers import CLIPModel, CLIPProcessor

        model = CLIPModel.from_pretrained(model_id, revision=revision, **load_kwargs)
        processor = CLIPProcessor.from_pretrained(model_id, revision=revision, **load_kwargs)
        revision = _hub_or_local_revision(model, model_id, revision)
    return HFDualEncoder(model, processor, model_id=model_id, revision=revision, family="clip",
                         text_padding="longest", pass_attention_mask=True, device=device,
                         batch_size=batch_size, half=half)


def build_siglip(model_id: str = DEFAULT_SIGLIP, revision: str | None = "main", *, model=None, processor=None,
                 device: str | None = None, batch_size: int = 32, half: bool = True,
                 **load_kwargs) -> HFDualEncoder:
    """transformers SigLIP (MM-BRIGHT §4.1 "SigLIP"); text padded to ``max_length`` (64) as in training."""
    if model is None or processor is None:
        from transformers import AutoProcessor, SiglipModel

        model = SiglipModel.from_pretrained(model_id, revision=revision, **load_kwargs)
        processor = AutoProcessor.from_pretrained(model_id, revision=revision, **load_kwargs)
        revision = _hub_or_local_revision(model, model_id, revision)
    return HFDualEncoder(model, processor, model_id=model_id, revision=revision, family="siglip",
                         text_padding="max_length", pass_attention_mask=False, device=device,
                         batch_size=batch_size, half=half)


# ---------------------------------------------------------------------------------------------------------
# open_clip
# ---------------------------------------------------------------------------------------------------------

class OpenClipEncoder(MultimodalEncoder):
    """An open_clip model with its transform and tokenizer (truncates to the context length, 77 for CLIP)."""

    family = "open_clip"

    def __init__(self, model, preprocess, tokenizer, *, model_id: str, revision: str | None,
                 device: str | None = None, batch_size: int = 32, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self.preprocess, self.tokenizer = preprocess, tokenizer
        self._dim = int(model.visual.output_dim)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def text_token_limit(self) -> int | None:
        return getattr(self.tokenizer, "context_length", None)

    def _token_lengths(self, texts, role):
        encode = getattr(self.tokenizer, "encode", None)  # open_clip SimpleTokenizer: ids without sot/eot
        if encode is not None and hasattr(self.tokenizer, "sot_token_id"):
            return [len(encode(t)) + 2 for t in texts]
        inner = getattr(self.tokenizer, "tokenizer", None)  # open_clip HFTokenizer wraps a transformers one
        return _hf_lengths(inner, texts) if inner is not None and callable(inner) else None

    def preprocessing(self) -> dict:
        import open_clip

        return {"transform": repr(self.preprocess), "context_length": getattr(self.tokenizer, "context_length", None),
                "tokenizer": type(self.tokenizer).__name__, "open_clip": open_clip.__version__}

    def _encode_text_batch(self, texts, role):
        return self.model.encode_text(self.tokenizer(texts).to(self.device))

    def image_transform(self):
        return self.preprocess

    def collate_items(self):
        return _stack_collate

    def _encode_image_batch(self, batch, role):
        return self.model.encode_image(batch.to(self.device, non_blocking=True))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def build_open_clip(arch: str = "ViT-B-32", pretrained: str | None = "openai", *, model=None, preprocess=None,
                    tokenizer=None, device: str | None = None, batch_size: int = 32,
                    half: bool = True) -> OpenClipEncoder:
    """open_clip ``create_model_and_transforms(arch, pretrained=tag_or_checkpoint)``.

    Args:
        pretrained: a pretrained tag, a local checkpoint file (sha256 in the cache spec), or ``None`` for random
            weights (cache spec ``random-init``: not reproducible across processes).
    """
    import open_clip

    if model is None:
        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=pretrained)
    if tokenizer is None:
        tokenizer = open_clip.get_tokenizer(arch)
    if pretrained is None:
        revision = "random-init"
    elif Path(str(pretrained)).is_file():
        revision = "sha256:" + _file_sha256(Path(pretrained))
    else:
        revision = f"{pretrained}@open_clip=={open_clip.__version__}"
    return OpenClipEncoder(model, preprocess, tokenizer, model_id=f"open_clip:{arch}", revision=revision,
                           device=device, batch_size=batch_size, half=half)


# ---------------------------------------------------------------------------------------------------------
# GME (Qwen2-VL)
# ---------------------------------------------------------------------------------------------------------

GME_DEFAULT_INSTRUCTION = "You are a helpful assistant."
#: Suggested query instructions (the model card uses the t2i one; MM-BRIGHT does not publish its prompts).
GME_INSTRUCTIONS = {
    "image": "Find an image that matches the given text.",
    "document": "Find a document that answers the given question.",
}
_QWEN_FACTOR = 28
_QWEN_MIN_PIXELS = 4 * 28 * 28
_QWEN_MAX_PIXELS = 16384 * 28 * 28
_QWEN_MAX_RATIO = 200


def qwen_smart_resize(height: int, width: int, factor: int = _QWEN_FACTOR, min_pixels: int = _QWEN_MIN_PIXELS,
                      max_pixels: int = _QWEN_MAX_PIXELS) -> tuple[int, int]:
    """``qwen_vl_utils.smart_resize``: both sides multiples of ``factor``, area within [min, max] pixels,
    aspect ratio kept (capped at 200:1). Returns ``(height, width)``."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    if max(h_bar, w_bar) / min(h_bar, w_bar) > _QWEN_MAX_RATIO:
        if h_bar > w_bar:
            h_bar = w_bar * _QWEN_MAX_RATIO
        else:
            w_bar = h_bar * _QWEN_MAX_RATIO
    return h_bar, w_bar


def gme_fetch_image(img: Image.Image) -> Image.Image:
    """The model card's ``fetch_image``: RGB, resized with :func:`qwen_smart_resize` (PIL default resample)."""
    img = to_rgb(img)
    w, h = img.size
    rh, rw = qwen_smart_resize(h, w)
    return img if (rw, rh) == (w, h) else img.resize((rw, rh))


class GmeEncoder(MultimodalEncoder):
    """GME-Qwen2-VL (Zhang et al. 2024) following the ``gme_inference.py`` of its model card.

    Prompt ``<|im_start|>system\\n{instruction}<|im_end|>\\n<|im_start|>user\\n{image tokens}{text}<|im_end|>...``;
    queries use ``query_instruction``, documents the default ``"You are a helpful assistant."``. Embedding: final
    hidden state of the last non-padding token; prompts truncated at ``max_length`` (1800) tokens.
    """

    family = "gme"

    def __init__(self, model, processor, *, model_id: str, revision: str | None, device: str | None = None,
                 batch_size: int = 8, half: bool = True, query_instruction: str | None = None,
                 min_image_tokens: int = 256, max_image_tokens: int = 1280, max_length: int = 1800):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.processor.tokenizer.padding_side = "right"  # as in the model card
        self.query_instruction = query_instruction
        self.min_image_tokens, self.max_image_tokens, self.max_length = min_image_tokens, max_image_tokens, max_length
        self._dim = int(model.config.text_config.hidden_size)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def role_sensitive(self) -> bool:
        return self.query_instruction is not None

    @property
    def text_token_limit(self) -> int:
        return self.max_length

    def _token_lengths(self, texts, role):
        return _hf_lengths(self.processor.tokenizer, [self._prompt(t, False, role) for t in texts])

    def preprocessing(self) -> dict:
        ip = self.processor.image_processor
        return {
            "template": "gme_inference.py (system/user/assistant, <|endoftext|> last token)",
            "default_instruction": GME_DEFAULT_INSTRUCTION,
            "query_instruction": self.query_instruction,
            # transformers 5 keeps them as size.shortest_edge / size.longest_edge (ip.min_pixels is gone)
            "min_pixels": getattr(ip, "min_pixels", None) or getattr(getattr(ip, "size", None), "shortest_edge", None),
            "max_pixels": getattr(ip, "max_pixels", None) or getattr(getattr(ip, "size", None), "longest_edge", None),
            "max_length": self.max_length,
            "fetch_image": "smart_resize(28, 4*28*28, 16384*28*28)",
            "pooling": "last-token",
        }

    def _prompt(self, text: str | None, has_image: bool, role: Role) -> str:
        use_query = role == "query" and self.query_instruction
        instruction = self.query_instruction if use_query else GME_DEFAULT_INSTRUCTION
        body = ("<|vision_start|><|image_pad|><|vision_end|>" if has_image else "") + (text or "")
        return (f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
                "<|im_start|>assistant\n<|endoftext|>")

    def _embed(self, texts: Sequence[str | None], images: Sequence[Image.Image] | None, role: Role) -> torch.Tensor:
        prompts = [self._prompt(t, images is not None, role) for t in texts]
        inputs = self.processor(text=prompts, images=list(images) if images is not None else None, padding=True,
                                truncation=True, max_length=self.max_length, return_tensors="pt")
        input_ids = inputs["input_ids"].to(self.device)
        attention_mask = inputs["attention_mask"].to(self.device)
        vlm = self.model.model  # Qwen2VLModel: .visual, .language_model
        embeds = vlm.get_input_embeddings()(input_ids)
        if images is not None:
            grid = inputs["image_grid_thw"].to(self.device)
            pv = inputs["pixel_values"].to(self.device, dtype=vlm.visual.dtype)
            got = vlm.get_image_features(pv, grid)
            pooled = getattr(got, "pooler_output", got)  # transformers 5: a tuple with one tensor per image
            feats = torch.cat(list(pooled), dim=0) if isinstance(pooled, (list, tuple)) else pooled
            mask = input_ids == self.model.config.image_token_id
            if int(mask.sum()) != feats.shape[0]:
                raise RuntimeError(f"{int(mask.sum())} image tokens but {feats.shape[0]} image features")
            embeds = embeds.clone()
            embeds[mask] = feats.to(embeds.dtype)
        out = vlm.language_model(inputs_embeds=embeds, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state
        if bool((attention_mask[:, -1] == 1).all()):
            return hidden[:, -1]
        last = attention_mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def _encode_text_batch(self, texts, role):
        return self._embed(texts, None, role)

    def image_transform(self):
        return gme_fetch_image

    def _encode_image_batch(self, batch, role):
        return self._embed([None] * len(batch), batch, role)

    def encode_fused(self, texts: Sequence[str], images: Sequence[Image.Image], *, role: Role = "query") -> np.ndarray:
        """GME's fused ``(n, dim)`` embedding of (text, image) pairs; not the MM-BRIGHT §4.1 protocol (ablations only)."""
        if len(texts) != len(images):
            raise ValueError(f"{len(texts)} texts but {len(images)} images")
        out = []
        with self._ctx():
            for i in range(0, len(texts), self.batch_size):
                imgs = [gme_fetch_image(im) for im in images[i : i + self.batch_size]]
                out.append(self._to_numpy(self._embed(list(texts[i : i + self.batch_size]), imgs, role)))
        return np.concatenate(out) if out else self._empty()


def build_gme(model_id: str = DEFAULT_GME_2B, revision: str | None = "main", *, model=None, processor=None,
              device: str | None = None, batch_size: int = 8, half: bool = True, query_instruction: str | None = None,
              min_image_tokens: int = 256, max_image_tokens: int = 1280, max_length: int = 1800,
              **load_kwargs) -> GmeEncoder:
    """GME-Qwen2-VL 2B/7B via transformers (float16 on CUDA as the model card, float32 on CPU).

    Pixels: ``min/max_image_tokens * 28 * 28`` as in the model card.
    """
    if model is None or processor is None:
        from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

        dev = torch.device(device or default_device())
        dtype = torch.float16 if dev.type == "cuda" else torch.float32
        model = Qwen2VLForConditionalGeneration.from_pretrained(model_id, revision=revision, dtype=dtype,
                                                                **load_kwargs)
        # the image area bounds of gme_inference.py (min_pixels / max_pixels), as transformers 5 names them
        size = {"shortest_edge": min_image_tokens * 28 * 28, "longest_edge": max_image_tokens * 28 * 28}
        processor = AutoProcessor.from_pretrained(model_id, revision=revision, size=size, **load_kwargs)
        revision = _hub_or_local_revision(model, model_id, revision)
    return GmeEncoder(model, processor, model_id=model_id, revision=revision, device=device, batch_size=batch_size,
                      half=half, query_instruction=query_instruction, min_image_tokens=min_image_tokens,
                      max_image_tokens=max_image_tokens, max_length=max_length)


# ---------------------------------------------------------------------------------------------------------
# trust_remote_code models (untested offline)
# ---------------------------------------------------------------------------------------------------------

class JinaClipEncoder(MultimodalEncoder):
    """Jina-CLIP (Koukounas et al. 2024), model card: ``model.encode_text(list)``, ``model.encode_image(list)``
    (PIL images accepted). Truncation is done by its remote code. Untested offline."""

    family = "jina-clip"

    def __init__(self, model, *, model_id: str, revision: str | None, device: str | None = None,
                 batch_size: int = 32, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self._dim = int(getattr(model.config, "projection_dim", 768))

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def text_token_limit(self) -> int:
        return 8192  # jina-clip-v1's JinaBERT text tower (MTEB model meta: max_tokens 8192)

    def _encode_text_batch(self, texts, role):
        return torch.as_tensor(np.asarray(self.model.encode_text(list(texts)), dtype=np.float32))

    def _encode_image_batch(self, batch, role):
        return torch.as_tensor(np.asarray(self.model.encode_image(list(batch)), dtype=np.float32))


def build_jina_clip(model_id: str = DEFAULT_JINA_CLIP, revision: str | None = "main", *, model=None,
                    device: str | None = None, batch_size: int = 32, half: bool = True,
                    **load_kwargs) -> JinaClipEncoder:
    """``AutoModel.from_pretrained("jinaai/jina-clip-v1", trust_remote_code=True)`` (model card)."""
    if model is None:
        from transformers import AutoModel

        model = AutoModel.from_pretrained(model_id, revision=revision, trust_remote_code=True, **load_kwargs)
        revision = _hub_or_local_revision(model, model_id, revision)
    return JinaClipEncoder(model, model_id=model_id, revision=revision, device=device, batch_size=batch_size,
                           half=half)


class NomicVisionEncoder(MultimodalEncoder):
    """Nomic Embed Vision v1.5 + Nomic Embed Text v1.5 (Nussbaum et al. 2024), model card recipe; untested offline.

    Texts get the ``search_query: `` / ``search_document: `` prefix, mean pooling, ``layer_norm``.
    """

    family = "nomic-vision"

    def __init__(self, vision_model, image_processor, text_model, tokenizer, *, model_id: str,
                 revision: str | None, device: str | None = None, batch_size: int = 32, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.vision_model = vision_model.to(self.device).eval()
        self.text_model = text_model.to(self.device).eval()
        self.image_processor, self.tokenizer = image_processor, tokenizer
        self._dim = int(getattr(text_model.config, "n_embd", getattr(text_model.config, "hidden_size", 768)))

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def role_sensitive(self) -> bool:
        return True

    @property
    def text_token_limit(self) -> int:
        limit = getattr(self.tokenizer, "model_max_length", None)
        return int(limit) if limit and limit < 1_000_000 else 8192

    def _token_lengths(self, texts, role):
        prefix = "search_query: " if role == "query" else "search_document: "
        return _hf_lengths(self.tokenizer, [prefix + t for t in texts])

    def preprocessing(self) -> dict:
        return {"query_prefix": "search_query: ", "document_prefix": "search_document: ",
                "text_pooling": "mean+layernorm"}

    def _encode_text_batch(self, texts, role):
        prefix = "search_query: " if role == "query" else "search_document: "
        enc = self.tokenizer([prefix + t for t in texts], padding=True, truncation=True, return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        out = self.text_model(**enc)
        tok = out[0] if isinstance(out, tuple) else out.last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(tok.dtype)
        emb = (tok * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.layer_norm(emb.float(), normalized_shape=(emb.shape[1],))

    def image_transform(self):
        return _HFPixelTransform(self.image_processor)

    def collate_items(self):
        return _stack_collate

    def _encode_image_batch(self, batch, role):
        return self.vision_model(pixel_values=batch.to(self.device)).last_hidden_state[:, 0]


def build_nomic_vision(model_id: str = DEFAULT_NOMIC_VISION, revision: str | None = "main",
                       text_model_id: str = DEFAULT_NOMIC_TEXT, text_revision: str | None = NOMIC_TEXT_REVISION, *,
                       device: str | None = None, batch_size: int = 32, half: bool = True,
                       **load_kwargs) -> NomicVisionEncoder:
    """Both Nomic models with ``trust_remote_code=True`` (model card)."""
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer

    vision = AutoModel.from_pretrained(model_id, revision=revision, trust_remote_code=True, **load_kwargs)
    image_processor = AutoImageProcessor.from_pretrained(model_id, revision=revision, **load_kwargs)
    text = AutoModel.from_pretrained(text_model_id, revision=text_revision, trust_remote_code=True, **load_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(text_model_id, revision=text_revision, **load_kwargs)
    rev_v = _hub_or_local_revision(vision, model_id, revision)
    rev_t = _hub_or_local_revision(text, text_model_id, text_revision)
    rev = f"{rev_v}+{rev_t}"
    return NomicVisionEncoder(vision, image_processor, text, tokenizer, model_id=f"{model_id}+{text_model_id}",
                              revision=rev, device=device, batch_size=batch_size, half=half)


class BgeVlEncoder(MultimodalEncoder):
    """BGE-VL (MegaPairs, Zhou et al. 2024), model card calls; images go as temporary PNG files. Untested offline."""

    family = "bge-vl"

    def __init__(self, model, *, model_id: str, revision: str | None, device: str | None = None,
                 batch_size: int = 32, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self._dim = int(getattr(model.config, "projection_dim", 512))

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def text_token_limit(self) -> int:
        return 77  # CLIP text tower (MTEB model meta: max_tokens 77)

    def _encode_text_batch(self, texts, role):
        return torch.as_tensor(self.model.encode(text=list(texts))).float()

    def _encode_image_batch(self, batch, role):
        with tempfile.TemporaryDirectory(prefix="mmir-bgevl-") as d:
            paths = []
            for i, im in enumerate(batch):
                p = os.path.join(d, f"{i}.png")
                im.save(p, format="PNG")
                paths.append(p)
            return torch.as_tensor(self.model.encode(images=paths)).float()


def build_bge_vl(model_id: str = DEFAULT_BGE_VL, revision: str | None = "main", *, model=None,
                 device: str | None = None, batch_size: int = 32, half: bool = True, **load_kwargs) -> BgeVlEncoder:
    """``AutoModel.from_pretrained("BAAI/BGE-VL-base", trust_remote_code=True)`` + ``set_processor`` (model card)."""
    if model is None:
        from transformers import AutoModel

        model = AutoModel.from_pretrained(model_id, revision=revision, trust_remote_code=True, **load_kwargs)
        model.set_processor(model_id)
        revision = _hub_or_local_revision(model, model_id, revision)
    return BgeVlEncoder(model, model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)


# ---------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MMModelEntry:
    """One multimodal retriever of MM-BRIGHT §4.1: hub id, builder and how far it was tested here."""

    name: str
    model_id: str
    builder: Callable[..., MultimodalEncoder]
    status: str
    notes: str = ""
    builder_kwargs: dict = field(default_factory=dict)

    def build(self, **kwargs) -> MultimodalEncoder:
        """Call the builder with ``model_id`` and any overrides (``model=``/``processor=`` for prebuilt ones)."""
        kw = {"model_id": self.model_id, **self.builder_kwargs, **kwargs}
        return self.builder(**kw)


MM_MODELS: dict[str, MMModelEntry] = {
    "clip": MMModelEntry("clip", DEFAULT_CLIP, build_clip, STATUS_RANDOM,
                         "transformers CLIPModel; tiny random CLIPConfig in tests"),
    "siglip": MMModelEntry("siglip", DEFAULT_SIGLIP, build_siglip, STATUS_RANDOM,
                           "transformers SiglipModel; tiny random SiglipConfig in tests; "
                           "hub tokenizer needs sentencepiece"),
    "gme-2b": MMModelEntry("gme-2b", DEFAULT_GME_2B, build_gme, STATUS_RANDOM,
                           "Qwen2VLForConditionalGeneration; tiny random Qwen2VLConfig in tests"),
    "gme-7b": MMModelEntry("gme-7b", DEFAULT_GME_7B, build_gme, STATUS_RANDOM,
                           "same code as gme-2b, larger checkpoint"),
    "jina-clip": MMModelEntry("jina-clip", DEFAULT_JINA_CLIP, build_jina_clip, STATUS_REMOTE,
                              "trust_remote_code; paper cites Koukounas et al. 2024 (v1 assumed)"),
    "nomic-vision": MMModelEntry("nomic-vision", DEFAULT_NOMIC_VISION, build_nomic_vision, STATUS_REMOTE,
                                 "trust_remote_code; text side nomic-embed-text-v1.5"),
    "bge-vl": MMModelEntry("bge-vl", DEFAULT_BGE_VL, build_bge_vl, STATUS_REMOTE,
                           "trust_remote_code; BGE-VL-base by default (the paper does not name the size; the "
                           "released Task 3/4 code has only BGE-VL-large, which the bge-vl preset uses)"),
}


def build_mm_encoder(name: str, **kwargs) -> MultimodalEncoder:
    """Build a registered encoder by paper name (:data:`MM_MODELS`) or ``open_clip:<arch>[@<pretrained>]``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    if name.startswith("open_clip:"):
        arch, _, pretrained = name.removeprefix("open_clip:").partition("@")
        return build_open_clip(arch, pretrained or None, **kwargs)
    if name not in MM_MODELS:
        raise KeyError(f"unknown multimodal model {name!r}; known: {sorted(MM_MODELS)} or open_clip:<arch>@<tag>")
    return MM_MODELS[name].build(**kwargs)


# ---------------------------------------------------------------------------------------------------------
# query construction (MM-BRIGHT §4.1)
# ---------------------------------------------------------------------------------------------------------

def build_query_vectors(
    text_vecs: np.ndarray,
    image_vecs_per_query: Sequence[np.ndarray | None],
    image_mode: Literal["first", "mean", "none"] = "first",
    fusion: Literal["mean", "text", "image"] = "mean",
    blank_vec: np.ndarray | None = None,
) -> np.ndarray:
    """Query vectors from text vectors and per-query image vectors.

    Paper protocol (MM-BRIGHT §4.1, the default ``image_mode="first"``, ``fusion="mean"``): the query's FIRST
    image (``blank_vec`` when it has none), query vector ``normalise((t + i) / 2)``.

    Args:
        text_vecs: ``(q, d)`` text vectors.
        image_vecs_per_query: ``q`` entries, each ``(m_i, d)`` (``m_i`` may be 0) or None.
        image_mode: ``"first"`` (paper), ``"mean"`` (all images; an extension), ``"none"`` (text only).
        fusion: ``"mean"`` (paper), ``"text"``, ``"image"``.
        blank_vec: ``(d,)``; required when some query has no image and images are used.

    Returns:
        ``(q, d)`` float32, L2-normalised rows.

    Raises:
        ValueError: bad modes, length/dimension mismatch, ``fusion="image"`` with ``image_mode="none"``, or a
            query without image and no ``blank_vec``.
    """
    if image_mode not in ("first", "mean", "none"):
        raise ValueError(f"image_mode must be first/mean/none, got {image_mode!r}")
    if fusion not in ("mean", "text", "image"):
        raise ValueError(f"fusion must be mean/text/image, got {fusion!r}")
    t = l2_normalize(np.asarray(text_vecs, dtype=np.float32))
    q, d = t.shape
    if len(image_vecs_per_query) != q:
        raise ValueError(f"{q} text vectors but {len(image_vecs_per_query)} image entries")
    if fusion == "text" or (image_mode == "none" and fusion == "mean"):
        return t
    if image_mode == "none":
        raise ValueError("fusion='image' needs images (image_mode='first' or 'mean')")
    img = np.empty_like(t)
    for r, vecs in enumerate(image_vecs_per_query):
        vecs = None if vecs is None else np.asarray(vecs, dtype=np.float32).reshape(-1, d)
        if vecs is None or vecs.shape[0] == 0:
            if blank_vec is None:
                raise ValueError(f"query {r} has no image and no blank_vec was given (MM-BRIGHT §4.1 blank image)")
            img[r] = np.asarray(blank_vec, dtype=np.float32).reshape(d)
        elif image_mode == "first":
            img[r] = vecs[0]
        else:
            img[r] = l2_normalize(l2_normalize(vecs).mean(axis=0))
    img = l2_normalize(img)
    if fusion == "image":
        return img
    return l2_normalize((t + img) / 2.0)


def pair_vectors(text_vecs: np.ndarray, image_vecs: np.ndarray | Sequence[np.ndarray | None] | None) -> np.ndarray:
    """Task-4 (passage, image) vectors ``normalise((t + i) / 2)``; a pair without image is its normalised text vector.

    Args:
        text_vecs: ``(n, d)``.
        image_vecs: ``(n, d)``, a length-``n`` sequence of ``(d,)`` vectors or None, or None.

    Returns:
        ``(n, d)`` float32, L2-normalised.
    """
    t = l2_normalize(np.asarray(text_vecs, dtype=np.float32))
    if image_vecs is None:
        return t
    if len(image_vecs) != t.shape[0]:
        raise ValueError(f"{t.shape[0]} text vectors but {len(image_vecs)} image entries")
    out = t.copy()
    for r, v in enumerate(image_vecs):
        if v is not None:
            out[r] = (t[r] + l2_normalize(np.asarray(v, dtype=np.float32).reshape(1, -1))[0]) / 2.0
    return l2_normalize(out)


def make_mm_encoder(system: dict):
    """Build the encoder of a validated ``kind: mm`` system. ``random_init`` builds the real architecture
    with seeded random weights (offline runs; tables label the row untrained)."""
    name = system["encoder"]
    kw = {"device": system.get("device"), "batch_size": system["batch_size"], "half": system.get("half", True)}
    if system.get("random_init"):
        torch.manual_seed(system["seed"])
        if not name.startswith("open_clip:"):
            raise ValueError(f"random_init is supported for open_clip:<arch> encoders, not {name!r}")
        enc = build_mm_encoder(name.split("@")[0], **kw)
        enc.revision = f"random-init:seed={system['seed']}"
        return enc
    if system.get("model"):
        kw["model_id"] = system["model"]
    if system.get("revision") and not name.startswith("open_clip:"):
        kw["revision"] = system["revision"]
    return build_mm_encoder(name, **kw)
