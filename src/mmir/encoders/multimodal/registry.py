"""The multimodal retrievers of MM-BRIGHT §4.1 by paper name (:data:`MM_MODELS`) and the encoder of a ``kind: mm``
system (:func:`make_mm_encoder`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from mmir.config.models import MMSystem, parse
from mmir.encoders.multimodal.base import MultimodalEncoder
from mmir.encoders.multimodal.bge_vl import DEFAULT_BGE_VL, build_bge_vl
from mmir.encoders.multimodal.gme import DEFAULT_GME_2B, DEFAULT_GME_7B, GmeRecipe, build_gme
from mmir.encoders.multimodal.hf_dual import DEFAULT_CLIP, DEFAULT_SIGLIP, build_clip, build_siglip
from mmir.encoders.multimodal.jina_clip import DEFAULT_JINA_CLIP, build_jina_clip
from mmir.encoders.multimodal.nomic_vision import DEFAULT_NOMIC_VISION, build_nomic_vision
from mmir.encoders.multimodal.openclip import build_open_clip
from mmir.encoders.multimodal.qwen3_vl import DEFAULT_QWEN3_VL_2B, DEFAULT_QWEN3_VL_8B, Qwen3VLRecipe, build_qwen3_vl_embedding

STATUS_VERIFIED = "verified offline"
STATUS_RANDOM = "code path tested with random weights"
STATUS_REMOTE = "untested offline because it needs remote code"


@dataclass(frozen=True)
class MMModelEntry:
    """One multimodal retriever of MM-BRIGHT §4.1: hub id, builder and how far it was tested here."""

    name: str
    model_id: str
    builder: Callable[..., MultimodalEncoder]
    status: str
    notes: str = ""
    builder_kwargs: dict = field(default_factory=dict)
    multi_image: bool = False  # the model takes several images in one input (image_mode all)

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
                           "Qwen2VLForConditionalGeneration; tiny random Qwen2VLConfig in tests", multi_image=True),
    "gme-7b": MMModelEntry("gme-7b", DEFAULT_GME_7B, build_gme, STATUS_RANDOM,
                           "same code as gme-2b, larger checkpoint", multi_image=True),
    "qwen3-vl-embedding-2b": MMModelEntry("qwen3-vl-embedding-2b", DEFAULT_QWEN3_VL_2B, build_qwen3_vl_embedding,
                                          STATUS_RANDOM, "Qwen3VLModel; tiny random Qwen3VLConfig in tests", multi_image=True),
    "qwen3-vl-embedding-8b": MMModelEntry("qwen3-vl-embedding-8b", DEFAULT_QWEN3_VL_8B, build_qwen3_vl_embedding,
                                          STATUS_RANDOM, "same code as qwen3-vl-embedding-2b, larger checkpoint",
                                          multi_image=True),
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



def make_mm_encoder(system: MMSystem | Mapping[str, Any]) -> MultimodalEncoder:
    """The encoder of a ``kind: mm`` system (:class:`~mmir.config.models.MMSystem`; a params-slice dict is parsed
    into one). ``random_init`` builds the real architecture with seeded random weights (offline runs; tables label
    the row untrained).

    Raises:
        ConfigError: a dict that is not a valid mm system. ValueError: ``random_init`` for a non-open_clip encoder;
            ``image_mode: all`` for an encoder that takes one image (the message names ``stack`` and ``mean``).
    """
    if isinstance(system, Mapping):
        system = parse(MMSystem, dict(system), key="system")
    name = system.encoder
    kw = {"device": system.device, "batch_size": system.batch_size, "half": system.half}
    if system.random_init:
        torch.manual_seed(system.seed)
        if not name.startswith("open_clip:"):
            raise ValueError(f"random_init is supported for open_clip:<arch> encoders, not {name!r}")
        enc = build_mm_encoder(name.split("@")[0], **kw)
        enc.revision = f"random-init:seed={system.seed}"
        return check_image_mode(enc, system.image_mode)
    if system.model:
        kw["model_id"] = system.model
    if system.revision and not name.startswith("open_clip:"):
        kw["revision"] = system.revision
    if system.query_instruction is not None:
        if name.startswith(("gme-", "qwen3-vl-embedding-")):
            recipe = GmeRecipe if name.startswith("gme-") else Qwen3VLRecipe
            kw["recipe"] = recipe(query_instruction=system.query_instruction)
        else:
            raise ValueError(f"query_instruction is read by the gme and qwen3-vl-embedding encoders, not {name!r}")
    return check_image_mode(build_mm_encoder(name, **kw), system.image_mode)


def check_image_mode(encoder: MultimodalEncoder, image_mode: str) -> MultimodalEncoder:
    """``encoder``, after checking it can take ``image_mode``.

    Raises:
        ValueError: ``all`` for an encoder that takes one image (the message names ``stack`` and ``mean``).
    """
    if image_mode == "all" and not encoder.multi_image:
        raise ValueError(f"image_mode all: {encoder.model_id} ({encoder.family}) takes one image per input; use image_mode "
                         "stack (the images stacked into one) or mean (the mean of their vectors)")
    return encoder
