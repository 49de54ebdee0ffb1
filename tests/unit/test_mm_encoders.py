"""mmir.encoders.multimodal with TINY randomly initialised models of the real architectures.

No weights can be downloaded here, so every encoder is checked against a direct call of the underlying
library (transformers / open_clip) on the same inputs: our vectors must equal the library's features,
L2-normalised. Tokenizers are built offline from tiny vocabularies (or open_clip's bundled BPE).
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from mmir.data.images import CorruptImage, ImageTally, blank_image
from mmir.encoders import multimodal as mm
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.retrieval.fusion import build_query_vectors

LONG_TEXT = " ".join(["the cat sat on the mat and looked at the graph"] * 46)  # 506 words
TEXTS = ["the cat", "a diagram of the heart, with labels", "x", LONG_TEXT]


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    sizes = [(40, 30), (64, 64), (31, 57)]
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _norm(t: torch.Tensor) -> np.ndarray:
    return F.normalize(t.float(), dim=-1).detach().numpy()


def _byte_level_vocab(extra_merges: list[tuple[str, str]], word_end: str = "") -> tuple[dict, list]:
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    if word_end:
        for c in alphabet:
            vocab[c + word_end] = len(vocab)
    for a, b in extra_merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab, extra_merges


# ---------------------------------------------------------------------------------------------------------
# fixtures: tiny real architectures
# ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_clip():
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizer,
    )

    vocab, merges = _byte_level_vocab([("t", "h"), ("th", "e</w>"), ("c", "a"), ("ca", "t</w>")], word_end="</w>")
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tok = CLIPTokenizer(vocab=vocab, merges=merges)
    ip = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    proc = CLIPProcessor(image_processor=ip, tokenizer=tok)
    torch.manual_seed(0)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=77, eos_token_id=tok.eos_token_id,
                         bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16,
    )
    model = CLIPModel(cfg).eval()
    enc = mm.build_clip("test/tiny-clip", revision="random", model=model, processor=proc, device="cpu", batch_size=2)
    return enc, model, proc


@pytest.fixture(scope="module")
def tiny_siglip():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        SiglipConfig,
        SiglipImageProcessor,
        SiglipModel,
        SiglipProcessor,
    )

    words = ["<pad>", "<unk>", "</s>"]
    words += "the a cat dog diagram of graph heart with labels x sat on mat and looked at".split()
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="</s>")
    proc = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok)
    torch.manual_seed(1)
    cfg = SiglipConfig(
        text_config=dict(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16, pad_token_id=0, bos_token_id=None,
                         eos_token_id=2),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8),
    )
    model = SiglipModel(cfg).eval()
    enc = mm.build_siglip("test/tiny-siglip", revision="random", model=model, processor=proc, device="cpu",
                          batch_size=3)
    return enc, model, proc


@pytest.fixture(scope="module")
def tiny_open_clip(tmp_path_factory):
    import open_clip

    cfg_dir = tmp_path_factory.mktemp("oc")
    (cfg_dir / "mmir-test-tiny.json").write_text(json.dumps({
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
    }))
    open_clip.add_model_config(cfg_dir / "mmir-test-tiny.json")
    torch.manual_seed(2)
    enc = mm.build_open_clip("mmir-test-tiny", pretrained=None, device="cpu", batch_size=2)
    return enc, open_clip


@pytest.fixture(scope="module")
def tiny_gme():
    from transformers import (
        Qwen2Tokenizer,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    vocab, merges = _byte_level_vocab([("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a")])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tok.add_special_tokens({"additional_special_tokens": specials})
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials + ["<|endoftext|>"]}
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28),
                            tokenizer=tok, video_processor=Qwen2VLVideoProcessor())
    torch.manual_seed(3)
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]},
                         bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    instr = mm.GME_INSTRUCTIONS["document"]
    enc = mm.build_gme("test/tiny-gme", revision="random", model=model, processor=proc, device="cpu", batch_size=2,
                       recipe=mm.GmeRecipe(query_instruction=instr, min_image_tokens=4, max_image_tokens=16))
    return enc, model, proc


# ---------------------------------------------------------------------------------------------------------
# transformers CLIP
# ---------------------------------------------------------------------------------------------------------

def _clip_ref_text(model, tok, texts, max_len=77):
    enc = tok(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        return _norm(model.get_text_features(**enc).pooler_output), enc


def test_clip_text_matches_library(tiny_clip):
    enc, model, proc = tiny_clip
    got = enc.encode_text(TEXTS)
    ref, tokens = _clip_ref_text(model, proc.tokenizer, TEXTS)
    assert tokens["input_ids"].shape[1] == 77  # the long text hit the limit
    assert got.dtype == np.float32 and got.shape == (4, 16) == (4, enc.dim)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_clip_long_text_truncated_not_an_error(tiny_clip):
    enc, _, _ = tiny_clip
    assert len(LONG_TEXT.split()) > 500
    full = enc.encode_text([LONG_TEXT])
    prefix = enc.encode_text([" ".join(LONG_TEXT.split()[:200])])  # far more than 77 tokens too
    shorter = enc.encode_text([" ".join(LONG_TEXT.split()[:10])])
    np.testing.assert_allclose(full, prefix, atol=1e-6)  # only the first 77 tokens count
    assert not np.allclose(full, shorter, atol=1e-4)


def test_clip_images_match_library(tiny_clip):
    enc, model, proc = tiny_clip
    imgs = _images()
    got = enc.encode_images(imgs)
    with torch.no_grad():
        ref = _norm(model.get_image_features(**proc(images=imgs, return_tensors="pt")).pooler_output)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # an RGBA image is composited on white before preprocessing
    rgba = Image.new("RGBA", (20, 20), (0, 0, 0, 0))
    np.testing.assert_allclose(enc.encode_images([rgba]), enc.encode_images([Image.new("RGB", (20, 20), "white")]),
                               atol=1e-6)


@pytest.mark.parametrize("workers", [0, 1])
def test_clip_image_bytes_pipeline_equals_in_memory(tiny_clip, workers):
    enc, _, _ = tiny_clip
    imgs = _images()
    got = enc.encode_image_bytes([_png(im) for im in imgs], batch_size=2, num_workers=workers)
    np.testing.assert_allclose(got, enc.encode_images(imgs), atol=1e-6)


def test_broken_bytes_raise_blank_or_drop(tiny_clip):
    enc, _, _ = tiny_clip
    imgs = _images()
    datas = [_png(imgs[0]), b"not an image", _png(imgs[1])]
    srcs = ["q/a.png", "q/broken.png", "q/c.png"]
    with pytest.raises(CorruptImage, match="q/broken.png"):
        enc.encode_image_bytes(datas, sources=srcs)
    tally = ImageTally()
    q = enc.encode_image_bytes(datas, sources=srcs, on_error="blank", tally=tally, domain="stats")
    np.testing.assert_allclose(q[1], enc.encode_images([blank_image()])[0], atol=1e-6)
    np.testing.assert_allclose(q[[0, 2]], enc.encode_images(imgs[:2]), atol=1e-6)
    assert tally.counts["stats"]["blank_substituted"] == 1 and tally.counts["stats"]["ok"] == 2
    tally2 = ImageTally()
    vecs, kept = enc.encode_corpus_image_bytes(datas, sources=srcs, tally=tally2, domain="stats", batch_size=1)
    assert kept.tolist() == [0, 2] and vecs.shape == (2, enc.dim)
    np.testing.assert_allclose(vecs, enc.encode_images(imgs[:2]), atol=1e-6)
    assert tally2.counts["stats"]["dropped"] == 1 and tally2.examples["stats"][0][0] == "q/broken.png"


def test_clip_cache_spec_and_embedding_cache(tiny_clip, tmp_path):
    enc, _, _ = tiny_clip
    spec = enc.cache_spec
    assert spec["model"] == "test/tiny-clip" and spec["revision"] == "random"
    assert spec["dtype"] == "float32" and spec["preprocessing"]["max_text_tokens"] == 77
    assert enc.cache_kind("image") == "image"
    datas = [_png(im) for im in _images()]
    with EmbeddingCache(tmp_path, spec) as cache:
        keys = [content_key(encoder_key(spec), enc.cache_kind("image"), b) for b in datas]
        m1, s1 = cache.encode(datas, keys, lambda xs: enc.encode_image_bytes(xs))
        m2, s2 = cache.encode(datas, keys, lambda xs: enc.encode_image_bytes(xs))
    assert s1["misses"] == 3 and s2 == {"hits": 3, "misses": 0, "model_calls": 0}
    np.testing.assert_array_equal(m1, m2)


def test_empty_inputs(tiny_clip):
    enc, _, _ = tiny_clip
    assert enc.encode_text([]).shape == (0, 16)
    assert enc.encode_images([]).shape == (0, 16)
    assert enc.encode_image_bytes([]).shape == (0, 16)


# ---------------------------------------------------------------------------------------------------------
# SigLIP
# ---------------------------------------------------------------------------------------------------------

def test_siglip_text_and_images_match_library(tiny_siglip):
    enc, model, proc = tiny_siglip
    assert enc.max_text_tokens == 16
    got = enc.encode_text(TEXTS)
    tokens = proc.tokenizer(TEXTS, padding="max_length", truncation=True, max_length=16, return_tensors="pt")
    with torch.no_grad():
        ref = _norm(model.get_text_features(input_ids=tokens["input_ids"]).pooler_output)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    imgs = _images()
    with torch.no_grad():
        iref = _norm(model.get_image_features(**proc(images=imgs, return_tensors="pt")).pooler_output)
    np.testing.assert_allclose(enc.encode_images(imgs), iref, atol=1e-5)
    assert enc.cache_spec["family"] == "siglip" and enc.cache_spec["preprocessing"]["text_padding"] == "max_length"


# ---------------------------------------------------------------------------------------------------------
# open_clip
# ---------------------------------------------------------------------------------------------------------

def test_open_clip_matches_library(tiny_open_clip):
    enc, open_clip = tiny_open_clip
    got = enc.encode_text(TEXTS)
    tokens = open_clip.tokenize(TEXTS)
    assert tokens.shape == (4, 77)  # the bundled BPE tokenizer truncates the 500-word text
    with torch.no_grad():
        ref = _norm(enc.model.encode_text(tokens))
    np.testing.assert_allclose(got, ref, atol=1e-5)
    imgs = _images()
    with torch.no_grad():
        iref = _norm(enc.model.encode_image(torch.stack([enc.preprocess(im) for im in imgs])))
    np.testing.assert_allclose(enc.encode_images(imgs), iref, atol=1e-5)
    np.testing.assert_allclose(enc.encode_image_bytes([_png(im) for im in imgs], num_workers=1), iref, atol=1e-5)
    assert enc.dim == 16 and enc.cache_spec["revision"] == "random-init"
    assert enc.cache_spec["model"] == "open_clip:mmir-test-tiny"


# ---------------------------------------------------------------------------------------------------------
# GME (Qwen2-VL)
# ---------------------------------------------------------------------------------------------------------

def _gme_prompt(instruction: str, body: str) -> str:
    # the template of the model card's gme_inference.py, written out literally
    return (f"<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
            "<|im_start|>assistant\n<|endoftext|>")


def _gme_ref(model, proc, prompts, images=None):
    """Library call: Qwen2VLModel merges the image features itself; sequential positions; last real token."""
    proc.tokenizer.padding_side = "right"
    x = proc(text=prompts, images=images, padding=True, truncation=True, max_length=1800, return_tensors="pt")
    b, n = x["input_ids"].shape
    pos = torch.arange(n).view(1, 1, -1).expand(3, b, -1)
    kw = {k: x[k] for k in ("pixel_values", "image_grid_thw") if k in x}
    with torch.no_grad():
        h = model.model(input_ids=x["input_ids"], attention_mask=x["attention_mask"], position_ids=pos,
                        **kw).last_hidden_state
    last = x["attention_mask"].sum(1) - 1
    return _norm(h[torch.arange(b), last]), x


def test_gme_text_matches_library_with_instructions(tiny_gme):
    enc, model, proc = tiny_gme
    texts = TEXTS[:3] + [LONG_TEXT + " " + LONG_TEXT]  # ~2,300 tokens of the tiny byte-level BPE
    docs = enc.encode_text(texts, role="document")
    ref, x = _gme_ref(model, proc, [_gme_prompt(mm.GME_DEFAULT_INSTRUCTION, t) for t in texts])
    assert x["input_ids"].shape[1] == 1800  # the 1,000-word text was truncated to max_length
    assert docs.shape == (4, 32) and enc.dim == 32
    np.testing.assert_allclose(docs, ref, atol=1e-5)
    queries = enc.encode_text(TEXTS[:2], role="query")
    qref, _ = _gme_ref(model, proc, [_gme_prompt(mm.GME_INSTRUCTIONS["document"], t) for t in TEXTS[:2]])
    np.testing.assert_allclose(queries, qref, atol=1e-5)
    assert not np.allclose(queries, docs[:2], atol=1e-3)
    assert enc.role_sensitive and enc.cache_kind("text", "query") == "text:query"


def test_gme_images_match_library(tiny_gme):
    enc, model, proc = tiny_gme
    imgs = _images()
    got = enc.encode_images(imgs)
    fetched = [mm.gme_fetch_image(im) for im in imgs]
    vision = "<|vision_start|><|image_pad|><|vision_end|>"
    ref, x = _gme_ref(model, proc, [_gme_prompt(mm.GME_DEFAULT_INSTRUCTION, vision)] * 3, images=fetched)
    assert x["image_grid_thw"].shape == (3, 3)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    np.testing.assert_allclose(enc.encode_image_bytes([_png(im) for im in imgs], num_workers=0), ref, atol=1e-5)
    fused = enc.encode_fused(["the cat"], [imgs[0]], role="query")
    fref, _ = _gme_ref(model, proc, [_gme_prompt(mm.GME_INSTRUCTIONS["document"], vision + "the cat")],
                       images=fetched[:1])
    np.testing.assert_allclose(fused, fref, atol=1e-5)


def test_qwen_smart_resize():
    assert mm.qwen_smart_resize(100, 50) == (112, 56)
    assert mm.qwen_smart_resize(10, 10) == (56, 56)  # up to the 4*28*28 minimum
    h, w = mm.qwen_smart_resize(20000, 15000)
    assert h % 28 == 0 and w % 28 == 0 and h * w <= 16384 * 28 * 28 and abs(h / w - 4 / 3) < 0.02


# ---------------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------------

def test_registry_names_and_status(tiny_clip):
    from mmir.config.models import MULTI_IMAGE_ENCODERS

    assert set(mm.MM_MODELS) == {"clip", "siglip", "gme-2b", "gme-7b", "jina-clip", "nomic-vision", "bge-vl",
                                 "qwen3-vl-embedding-2b", "qwen3-vl-embedding-8b"}
    # the config check of image_mode all and the registry name the same multi-image encoders
    assert {n for n, e in mm.MM_MODELS.items() if e.multi_image} == set(MULTI_IMAGE_ENCODERS)
    assert mm.GmeEncoder.multi_image and mm.Qwen3VLEmbeddingEncoder.multi_image and not mm.HFDualEncoder.multi_image
    allowed = {mm.STATUS_VERIFIED, mm.STATUS_RANDOM, mm.STATUS_REMOTE}
    assert all(e.status in allowed for e in mm.MM_MODELS.values())
    for name in ("jina-clip", "nomic-vision", "bge-vl"):
        assert mm.MM_MODELS[name].status == mm.STATUS_REMOTE
    assert mm.MM_MODELS["clip"].model_id == "openai/clip-vit-large-patch14"
    assert mm.MM_MODELS["siglip"].model_id == "google/siglip-so400m-patch14-384"
    assert mm.MM_MODELS["gme-7b"].model_id == "Alibaba-NLP/gme-Qwen2-VL-7B-Instruct"
    _, model, proc = tiny_clip
    enc = mm.build_mm_encoder("clip", model=model, processor=proc, device="cpu")
    assert isinstance(enc, mm.HFDualEncoder) and enc.cache_spec["model"] == "openai/clip-vit-large-patch14"
    with pytest.raises(KeyError, match="known"):
        mm.build_mm_encoder("nope")


# ---------------------------------------------------------------------------------------------------------
# query construction (MM-BRIGHT §4.1, mmir.retrieval.fusion) with a real encoder
# ---------------------------------------------------------------------------------------------------------

def test_blank_substitution_with_real_encoder(tiny_clip):
    enc, _, _ = tiny_clip
    t = enc.encode_text(["a graph", "the cat"], role="query")
    blank = enc.encode_images([blank_image()])[0]
    img = enc.encode_images(_images()[:1])
    q = build_query_vectors(t, [img, None], blank_vec=blank)
    for r, iv in enumerate([img[0], blank]):
        v = t[r] + iv
        np.testing.assert_allclose(q[r], v / np.linalg.norm(v), atol=1e-6)


def test_local_fingerprint_tracks_content(tmp_path):
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    fp1 = mm.local_fingerprint(tmp_path)
    assert fp1.startswith("local:") and fp1 == mm.local_fingerprint(tmp_path)
    (tmp_path / "config.json").write_text('{"a": 2}')
    assert mm.local_fingerprint(tmp_path) != fp1


def test_sources_length_checked(tiny_clip):
    enc, _, _ = tiny_clip
    with pytest.raises(ValueError, match="sources"):
        enc.encode_image_bytes([_png(_images()[0])], sources=["a", "b"])
