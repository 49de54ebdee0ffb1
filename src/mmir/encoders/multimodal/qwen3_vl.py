"""Qwen3-VL-Embedding 2B/8B (Li et al. 2026, arXiv 2601.04720), following ``src/models/qwen3_vl_embedding.py`` of
QwenLM/Qwen3-VL-Embedding (``Qwen3VLEmbedder``) on transformers' own ``Qwen3VLModel``."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from PIL import Image

from mmir.data.images import to_rgb
from mmir.encoders.multimodal.base import MultimodalEncoder, Role, default_device, hf_token_lengths, hub_or_local_revision
from mmir.encoders.multimodal.gme import qwen_smart_resize

DEFAULT_QWEN3_VL_2B = "Qwen/Qwen3-VL-Embedding-2B"
DEFAULT_QWEN3_VL_8B = "Qwen/Qwen3-VL-Embedding-8B"
#: the embedder's default instruction (documents, and queries without one)
QWEN3_VL_DEFAULT_INSTRUCTION = "Represent the user's input."
_FACTOR = 32  # image_patch_size 16 x spatial merge 2


@dataclass(frozen=True)
class Qwen3VLRecipe:
    """The settings of ``Qwen3VLEmbedder`` (its module constants).

    Attributes:
        query_instruction: the system instruction of queries (None: the default one, as documents).
        min_pixels, max_pixels: image area bounds (4 and 1800 x 32 x 32).
        max_length: tokens of a prompt with text (8192).
    """

    query_instruction: str | None = None
    min_pixels: int = 4 * _FACTOR * _FACTOR
    max_pixels: int = 1800 * _FACTOR * _FACTOR
    max_length: int = 8192


def _punctuated(instruction: str) -> str:
    """The embedder's rule: an instruction ends with punctuation (a ``.`` is added otherwise)."""
    instruction = instruction.strip()
    if instruction and not unicodedata.category(instruction[-1]).startswith("P"):
        instruction += "."
    return instruction


@dataclass(frozen=True)
class Qwen3VLFetch:
    """Picklable image preprocessing of the embedder (``qwen_vl_utils`` with ``image_patch_size=16``): RGB, both
    sides multiples of 32, area within ``[min_pixels, max_pixels]``; the processor then does not resize."""

    min_pixels: int
    max_pixels: int

    def __call__(self, img: Image.Image) -> Image.Image:
        img = to_rgb(img)
        w, h = img.size
        rh, rw = qwen_smart_resize(h, w, factor=_FACTOR, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        return img if (rw, rh) == (w, h) else img.resize((rw, rh))  # PIL default resample, as qwen_vl_utils


class Qwen3VLEmbeddingEncoder(MultimodalEncoder):
    """Qwen3-VL-Embedding: the prompt the Qwen3-VL chat template renders for the embedder's conversation,
    ``<|im_start|>system\\n{instruction}<|im_end|>\\n<|im_start|>user\\n{a vision block per image}{text}<|im_end|>\\n
    <|im_start|>assistant\\n``, written out (as :class:`~mmir.encoders.multimodal.gme.GmeEncoder` does); the
    embedding is the final hidden state of the last non-padding token (right padding).

    Several images in one input (``image_mode: all``) are placed in order before the text, as the embedder's
    ``format_model_input`` does with an image list; such a prompt holds no text and is not truncated.
    """

    family = "qwen3-vl-embedding"
    multi_image = True

    def __init__(self, model, processor, *, model_id: str, revision: str | None, recipe: Qwen3VLRecipe = Qwen3VLRecipe(),
                 device: str | None = None, batch_size: int = 8, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.processor.tokenizer.padding_side = "right"  # as the embedder
        self.recipe = recipe
        self._dim = int(model.config.text_config.hidden_size)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """None: the weights' own dtype (bfloat16 on CUDA, as the embedder's examples; float32 on CPU)."""
        return None

    @property
    def role_sensitive(self) -> bool:
        return self.recipe.query_instruction is not None

    @property
    def text_token_limit(self) -> int:
        return self.recipe.max_length

    def _token_lengths(self, texts, role):
        return hf_token_lengths(self.processor.tokenizer, [self._prompt(t, 0, role) for t in texts])

    def preprocessing(self) -> dict:
        return {
            "template": "Qwen3VLEmbedder (system/user, generation prompt, last token)",
            "default_instruction": QWEN3_VL_DEFAULT_INSTRUCTION,
            "query_instruction": self.recipe.query_instruction,
            "min_pixels": self.recipe.min_pixels,
            "max_pixels": self.recipe.max_pixels,
            "fetch_image": "smart_resize(32), PIL default resample, processor do_resize=False",
            "max_length": self.recipe.max_length,
            "pooling": "last-token",
        }

    def _prompt(self, text: str | None, n_images: int, role: Role) -> str:
        query = role == "query" and self.recipe.query_instruction
        instruction = _punctuated(self.recipe.query_instruction) if query else QWEN3_VL_DEFAULT_INSTRUCTION
        body = "<|vision_start|><|image_pad|><|vision_end|>" * n_images + (text or "")
        if not n_images and text is None:
            body = "NULL"  # the embedder's placeholder for an empty input
        return (f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
                "<|im_start|>assistant\n")

    def _embed(self, texts: Sequence[str | None], image_sets: Sequence[Sequence[Image.Image]] | None, role: Role) -> torch.Tensor:
        """Features of row ``i``: the images of ``image_sets[i]`` (in order; None: text only), then ``texts[i]``."""
        counts = [len(s) for s in image_sets] if image_sets is not None else [0] * len(texts)
        prompts = [self._prompt(t, n, role) for t, n in zip(texts, counts)]
        images = [im for s in image_sets for im in s] if image_sets is not None else None
        cut = not any(counts)  # image tokens are never cut
        inputs = self.processor(text=prompts, images=images or None, padding=True, truncation=cut,
                                max_length=self.recipe.max_length if cut else None, do_resize=False, return_tensors="pt")
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        hidden = self.model(**inputs).last_hidden_state
        mask = inputs["attention_mask"]
        last = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def _encode_text_batch(self, texts, role):
        return self._embed(texts, None, role)

    def image_transform(self):
        return Qwen3VLFetch(self.recipe.min_pixels, self.recipe.max_pixels)

    def _encode_image_batch(self, batch, role):
        return self._embed([None] * len(batch), [[im] for im in batch], role)

    def _encode_image_set_batch(self, sets, role):
        return self._embed([None] * len(sets), sets, role)


def build_qwen3_vl_embedding(model_id: str = DEFAULT_QWEN3_VL_2B, revision: str | None = "main", *, model=None,
                             processor=None, recipe: Qwen3VLRecipe = Qwen3VLRecipe(), device: str | None = None,
                             batch_size: int = 8, half: bool = True, **load_kwargs) -> Qwen3VLEmbeddingEncoder:
    """Qwen3-VL-Embedding via transformers' ``Qwen3VLModel`` (bfloat16 on CUDA when ``half``, else float32).

    Raises:
        OSError: the weights cannot be reached (offline: name a local copy with ``model:``).
    """
    if model is None or processor is None:
        from transformers import AutoProcessor, Qwen3VLModel

        dev = torch.device(device or default_device())
        dtype = torch.bfloat16 if (dev.type == "cuda" and half) else torch.float32
        model = Qwen3VLModel.from_pretrained(model_id, revision=revision, dtype=dtype, **load_kwargs)
        processor = AutoProcessor.from_pretrained(model_id, revision=revision, padding_side="right", **load_kwargs)
        revision = hub_or_local_revision(model, model_id, revision)
    return Qwen3VLEmbeddingEncoder(model, processor, model_id=model_id, revision=revision, recipe=recipe, device=device,
                                   batch_size=batch_size, half=half)
