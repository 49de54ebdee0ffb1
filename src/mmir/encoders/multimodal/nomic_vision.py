"""Nomic Embed Vision v1.5 with Nomic Embed Text v1.5 (Nussbaum et al. 2024) through their remote code; untested
offline."""

from __future__ import annotations

import torch

from mmir.encoders.multimodal.base import MultimodalEncoder, hf_token_lengths, hub_or_local_revision
from mmir.encoders.multimodal.batching import HFPixelTransform, stack_collate

DEFAULT_NOMIC_VISION = "nomic-ai/nomic-embed-vision-v1.5"
DEFAULT_NOMIC_TEXT = "nomic-ai/nomic-embed-text-v1.5"
#: the nomic-embed-text-v1.5 commit of the MTEB model meta of nomic-embed-vision-v1.5 (``text_model_revision``)
NOMIC_TEXT_REVISION = "a03db6748c80237063eb0546ac6b627eca2318cb"


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
        return hf_token_lengths(self.tokenizer, [prefix + t for t in texts])

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
        return HFPixelTransform(self.image_processor)

    def collate_items(self):
        return stack_collate

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
    rev_v = hub_or_local_revision(vision, model_id, revision)
    rev_t = hub_or_local_revision(text, text_model_id, text_revision)
    rev = f"{rev_v}+{rev_t}"
    return NomicVisionEncoder(vision, image_processor, text, tokenizer, model_id=f"{model_id}+{text_model_id}",
                              revision=rev, device=device, batch_size=batch_size, half=half)

