"""Jina-CLIP v1 (Koukounas et al. 2024) through its remote code; untested offline."""

from __future__ import annotations

import numpy as np
import torch

from mmir.encoders.multimodal.base import MultimodalEncoder, hub_or_local_revision

DEFAULT_JINA_CLIP = "jinaai/jina-clip-v1"


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
        revision = hub_or_local_revision(model, model_id, revision)
    return JinaClipEncoder(model, model_id=model_id, revision=revision, device=device, batch_size=batch_size,
                           half=half)

