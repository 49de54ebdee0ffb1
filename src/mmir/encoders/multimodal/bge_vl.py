"""BGE-VL (MegaPairs, Zhou et al. 2024) through its remote code; untested offline."""

from __future__ import annotations

import os
import tempfile

import torch

from mmir.encoders.multimodal.base import MultimodalEncoder, hub_or_local_revision

DEFAULT_BGE_VL = "BAAI/BGE-VL-base"


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
        revision = hub_or_local_revision(model, model_id, revision)
    return BgeVlEncoder(model, model_id=model_id, revision=revision, device=device, batch_size=batch_size, half=half)

