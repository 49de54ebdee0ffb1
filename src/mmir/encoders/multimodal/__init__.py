"""Multimodal (image + text) encoders behind one interface (:class:`MultimodalEncoder`, in ``base``), one module
per model family, and the registry of MM-BRIGHT §4.1's model names (:data:`MM_MODELS`, in ``registry``).

Outputs are ``(n, d)`` float32 L2-normalised rows. The query and pair fusion of MM-BRIGHT §4.1 lives in
:mod:`mmir.retrieval.fusion`. See the README, "Tasks 2–4 (multimodal)".
"""

from mmir.encoders.fingerprint import local_fingerprint
from mmir.encoders.multimodal.base import MultimodalEncoder, Role, default_device, features_tensor, l2_normalize
from mmir.encoders.multimodal.bge_vl import DEFAULT_BGE_VL, BgeVlEncoder, build_bge_vl
from mmir.encoders.multimodal.gme import (
    DEFAULT_GME_2B,
    DEFAULT_GME_7B,
    GME_DEFAULT_INSTRUCTION,
    GME_INSTRUCTIONS,
    GmeEncoder,
    GmeRecipe,
    build_gme,
    gme_fetch_image,
    qwen_smart_resize,
)
from mmir.encoders.multimodal.hf_dual import (
    CLIP_TEXT,
    DEFAULT_CLIP,
    DEFAULT_SIGLIP,
    SIGLIP_TEXT,
    HFDualEncoder,
    TextRecipe,
    build_clip,
    build_siglip,
)
from mmir.encoders.multimodal.jina_clip import DEFAULT_JINA_CLIP, JinaClipEncoder, build_jina_clip
from mmir.encoders.multimodal.nomic_vision import (
    DEFAULT_NOMIC_TEXT,
    DEFAULT_NOMIC_VISION,
    NOMIC_TEXT_REVISION,
    NomicVisionEncoder,
    build_nomic_vision,
)
from mmir.encoders.multimodal.openclip import OpenClipEncoder, build_open_clip
from mmir.encoders.multimodal.qwen3_vl import (
    DEFAULT_QWEN3_VL_2B,
    DEFAULT_QWEN3_VL_8B,
    QWEN3_VL_DEFAULT_INSTRUCTION,
    Qwen3VLEmbeddingEncoder,
    Qwen3VLRecipe,
    build_qwen3_vl_embedding,
)
from mmir.encoders.multimodal.registry import (
    MM_MODELS,
    STATUS_RANDOM,
    STATUS_REMOTE,
    STATUS_VERIFIED,
    MMModelEntry,
    build_mm_encoder,
    check_image_mode,
    make_mm_encoder,
)

__all__ = [
    "CLIP_TEXT", "DEFAULT_BGE_VL", "DEFAULT_CLIP", "DEFAULT_GME_2B", "DEFAULT_GME_7B", "DEFAULT_JINA_CLIP", "DEFAULT_NOMIC_TEXT",
    "DEFAULT_NOMIC_VISION", "DEFAULT_SIGLIP", "GME_DEFAULT_INSTRUCTION", "GME_INSTRUCTIONS", "MM_MODELS",
    "NOMIC_TEXT_REVISION", "SIGLIP_TEXT", "DEFAULT_QWEN3_VL_2B", "DEFAULT_QWEN3_VL_8B", "QWEN3_VL_DEFAULT_INSTRUCTION",
    "Qwen3VLEmbeddingEncoder", "Qwen3VLRecipe", "build_qwen3_vl_embedding", "check_image_mode", "STATUS_RANDOM",
    "STATUS_REMOTE", "STATUS_VERIFIED", "BgeVlEncoder", "GmeEncoder", "GmeRecipe",
    "HFDualEncoder", "JinaClipEncoder", "MMModelEntry", "MultimodalEncoder", "NomicVisionEncoder", "OpenClipEncoder",
    "Role", "TextRecipe", "build_bge_vl", "build_clip", "build_gme", "build_jina_clip", "build_mm_encoder", "build_nomic_vision",
    "build_open_clip", "build_siglip", "default_device", "features_tensor", "gme_fetch_image", "l2_normalize",
    "local_fingerprint", "make_mm_encoder", "qwen_smart_resize",
]
