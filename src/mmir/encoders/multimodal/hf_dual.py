"""transformers dual encoders with ``get_text_features`` / ``get_image_features``: CLIP and SigLIP
(MM-BRIGHT §4.1)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mmir.encoders.multimodal.base import MultimodalEncoder, features_tensor, hf_token_lengths, hub_or_local_revision
from mmir.encoders.multimodal.batching import HFPixelTransform, stack_collate

DEFAULT_CLIP = "openai/clip-vit-large-patch14"
DEFAULT_SIGLIP = "google/siglip-so400m-patch14-384"


@dataclass(frozen=True)
class TextRecipe:
    """How a dual encoder's text tower was trained to read text (every field is in the cache key).

    Attributes:
        family: the cache-key family, ``"clip"`` or ``"siglip"``.
        padding: ``"longest"`` (CLIP) or ``"max_length"`` (SigLIP, as trained).
        pass_attention_mask: give the text tower the attention mask (CLIP; SigLIP was trained without one).
        max_tokens: None = ``text_config.max_position_embeddings`` (CLIP 77, SigLIP 64).
    """

    family: str
    padding: str
    pass_attention_mask: bool
    max_tokens: int | None = None


CLIP_TEXT = TextRecipe("clip", padding="longest", pass_attention_mask=True)
SIGLIP_TEXT = TextRecipe("siglip", padding="max_length", pass_attention_mask=False)


class HFDualEncoder(MultimodalEncoder):
    """A transformers dual encoder with ``get_text_features`` / ``get_image_features`` (CLIP, SigLIP); ``text``
    says how its text tower reads (:data:`CLIP_TEXT`, :data:`SIGLIP_TEXT`)."""

    family = "hf-dual"

    def __init__(self, model, processor, *, model_id: str, revision: str | None, text: TextRecipe = CLIP_TEXT,
                 device: str | None = None, batch_size: int = 32, half: bool = True):
        super().__init__(model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)
        self.family = text.family
        self.model = model.to(self.device).eval()
        self.processor = processor
        self.text_padding, self.pass_attention_mask = text.padding, text.pass_attention_mask
        tc = model.config.text_config
        self.max_text_tokens = int(text.max_tokens or tc.max_position_embeddings)
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
        return hf_token_lengths(self.processor.tokenizer, texts)

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
        return HFPixelTransform(self.processor.image_processor)

    def collate_items(self):
        return stack_collate

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
        revision = hub_or_local_revision(model, model_id, revision)
    return HFDualEncoder(model, processor, model_id=model_id, revision=revision, text=CLIP_TEXT, device=device,
                         batch_size=batch_size, half=half)


def build_siglip(model_id: str = DEFAULT_SIGLIP, revision: str | None = "main", *, model=None, processor=None,
                 device: str | None = None, batch_size: int = 32, half: bool = True,
                 **load_kwargs) -> HFDualEncoder:
    """transformers SigLIP (MM-BRIGHT §4.1 "SigLIP"); text padded to ``max_length`` (64) as in training."""
    if model is None or processor is None:
        from transformers import AutoProcessor, SiglipModel

        model = SiglipModel.from_pretrained(model_id, revision=revision, **load_kwargs)
        processor = AutoProcessor.from_pretrained(model_id, revision=revision, **load_kwargs)
        revision = hub_or_local_revision(model, model_id, revision)
    return HFDualEncoder(model, processor, model_id=model_id, revision=revision, text=SIGLIP_TEXT, device=device,
                         batch_size=batch_size, half=half)

