"""open_clip models (``open_clip:<arch>[@<pretrained>]``), the random-weights encoder of the offline runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

from mmir.encoders.multimodal.base import MultimodalEncoder, hf_token_lengths
from mmir.encoders.multimodal.batching import stack_collate


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
        return hf_token_lengths(inner, texts) if inner is not None and callable(inner) else None

    def preprocessing(self) -> dict:
        import open_clip

        return {"transform": repr(self.preprocess), "context_length": getattr(self.tokenizer, "context_length", None),
                "tokenizer": type(self.tokenizer).__name__, "open_clip": open_clip.__version__}

    def _encode_text_batch(self, texts, role):
        return self.model.encode_text(self.tokenizer(texts).to(self.device))

    def image_transform(self):
        return self.preprocess

    def collate_items(self):
        return stack_collate

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

