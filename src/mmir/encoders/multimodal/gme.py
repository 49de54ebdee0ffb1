"""GME-Qwen2-VL 2B/7B (Zhang et al. 2024), following the ``gme_inference.py`` of its model card."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from mmir.data.images import to_rgb
from mmir.encoders.multimodal.base import MultimodalEncoder, Role, default_device, hf_token_lengths, hub_or_local_revision

DEFAULT_GME_2B = "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct"
DEFAULT_GME_7B = "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct"

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


@dataclass(frozen=True)
class GmeRecipe:
    """The prompt and size settings of ``gme_inference.py`` (model card).

    Attributes:
        query_instruction: the system instruction of queries (None: the default one, as documents).
        min_image_tokens, max_image_tokens: image area bounds, ``* 28 * 28`` pixels.
        max_length: tokens of a prompt, image tokens included.
    """

    query_instruction: str | None = None
    min_image_tokens: int = 256
    max_image_tokens: int = 1280
    max_length: int = 1800


class GmeEncoder(MultimodalEncoder):
    """GME-Qwen2-VL (Zhang et al. 2024) following the ``gme_inference.py`` of its model card.

    Prompt ``<|im_start|>system\\n{instruction}<|im_end|>\\n<|im_start|>user\\n{image tokens}{text}<|im_end|>...``;
    queries use ``query_instruction``, documents the default ``"You are a helpful assistant."``. Embedding: final
    hidden state of the last non-padding token; prompts truncated at ``max_length`` (1800) tokens.

    Several images in one input (``image_mode: all``, :meth:`encode_image_sets`): one vision block per image, in order,
    where the model card puts its one image (the Qwen2-VL chat template's layout of an image list); such a prompt
    holds no text and is not truncated (cutting it would cut image tokens).
    """

    family = "gme"
    multi_image = True

    def __init__(self, model, processor, *, model_id: str, revision: str | None, recipe: GmeRecipe = GmeRecipe(),
                 device: str | None = None, batch_size: int = 8, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.processor.tokenizer.padding_side = "right"  # as in the model card
        self.query_instruction = recipe.query_instruction
        self.min_image_tokens, self.max_image_tokens = recipe.min_image_tokens, recipe.max_image_tokens
        self.max_length = recipe.max_length
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
        return hf_token_lengths(self.processor.tokenizer, [self._prompt(t, 0, role) for t in texts])

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

    def _prompt(self, text: str | None, n_images: int, role: Role) -> str:
        use_query = role == "query" and self.query_instruction
        instruction = self.query_instruction if use_query else GME_DEFAULT_INSTRUCTION
        body = "<|vision_start|><|image_pad|><|vision_end|>" * n_images + (text or "")
        return (f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
                "<|im_start|>assistant\n<|endoftext|>")

    def _embed(self, texts: Sequence[str | None], image_sets: Sequence[Sequence[Image.Image]] | None, role: Role) -> torch.Tensor:
        """Features of row ``i``: ``texts[i]`` after the images of ``image_sets[i]`` (in order; None: text only)."""
        counts = [len(s) for s in image_sets] if image_sets is not None else [0] * len(texts)
        prompts = [self._prompt(t, n, role) for t, n in zip(texts, counts)]
        images = [im for s in image_sets for im in s] if image_sets is not None else None
        cut = max(counts, default=0) <= 1  # several images: no text to cut, and cutting would cut image tokens
        inputs = self.processor(text=prompts, images=images, padding=True, truncation=cut,
                                max_length=self.max_length if cut else None, return_tensors="pt")
        input_ids = inputs["input_ids"].to(self.device)
        attention_mask = inputs["attention_mask"].to(self.device)
        vlm = self.model.model  # Qwen2VLModel: .visual, .language_model
        embeds = vlm.get_input_embeddings()(input_ids)
        if images:
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
        return self._embed([None] * len(batch), [[im] for im in batch], role)

    def _encode_image_set_batch(self, sets, role):
        return self._embed([None] * len(sets), sets, role)

    def encode_fused(self, texts: Sequence[str], images: Sequence[Image.Image], *, role: Role = "query") -> np.ndarray:
        """GME's fused ``(n, dim)`` embedding of (text, image) pairs; not the MM-BRIGHT §4.1 protocol (ablations only)."""
        if len(texts) != len(images):
            raise ValueError(f"{len(texts)} texts but {len(images)} images")
        out = []
        with self._ctx():
            for i in range(0, len(texts), self.batch_size):
                imgs = [gme_fetch_image(im) for im in images[i : i + self.batch_size]]
                out.append(self._to_numpy(self._embed(list(texts[i : i + self.batch_size]), [[im] for im in imgs], role)))
        return np.concatenate(out) if out else self._empty()


def build_gme(model_id: str = DEFAULT_GME_2B, revision: str | None = "main", *, model=None, processor=None,
              recipe: GmeRecipe = GmeRecipe(), device: str | None = None, batch_size: int = 8, half: bool = True,
              **load_kwargs) -> GmeEncoder:
    """GME-Qwen2-VL 2B/7B via transformers (float16 on CUDA as the model card, float32 on CPU).

    Pixels: ``recipe.min/max_image_tokens * 28 * 28`` as in the model card.
    """
    if model is None or processor is None:
        from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

        dev = torch.device(device or default_device())
        dtype = torch.float16 if dev.type == "cuda" else torch.float32
        model = Qwen2VLForConditionalGeneration.from_pretrained(model_id, revision=revision, dtype=dtype,
                                                                **load_kwargs)
        # the image area bounds of gme_inference.py (min_pixels / max_pixels), as transformers 5 names them
        size = {"shortest_edge": recipe.min_image_tokens * 28 * 28, "longest_edge": recipe.max_image_tokens * 28 * 28}
        processor = AutoProcessor.from_pretrained(model_id, revision=revision, size=size, **load_kwargs)
        revision = hub_or_local_revision(model, model_id, revision)
    return GmeEncoder(model, processor, model_id=model_id, revision=revision, recipe=recipe, device=device,
                      batch_size=batch_size, half=half)

