"""TransformersBackend with real transformers code paths: tiny randomly initialised Qwen2 (text) and Qwen2-VL
(vision) models of the real architectures, with real (small, word-level) tokenizers built offline; plus
an opt-in slow test loading the offline Qwen2.5-Coder-0.5B GGUF through transformers."""

from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from mmir.config.models import TransformersGenerator  # noqa: E402
from mmir.llm import (  # noqa: E402
    GenerationCache,
    TransformersBackend,
    UnsupportedInputError,
    make_backend,
)

WORDS = "the a of to and is in search query image question answer what how why reason document red blue colour".split()
SPECIALS = ["<pad>", "<eos>", "<unk>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|> "
    "{% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for w in ["system", "user", "assistant", *WORDS]:
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>"},
        additional_special_tokens=SPECIALS[3:],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok, vocab


@pytest.fixture(scope="module")
def text_backend():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok, vocab = _tokenizer()
    cfg = Qwen2Config(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      eos_token_id=1, pad_token_id=0, bos_token_id=3)
    torch.manual_seed(0)
    return TransformersBackend.from_objects(Qwen2ForCausalLM(cfg), tok, model_id="tiny-qwen2-random", revision="seed0")


def tiny_qwen2vl(tok, vocab: dict, max_positions: int = 512):
    """The processor and config of a tiny Qwen2-VL on the word-level tokenizer ``tok`` (``vocab``: its ids)."""
    from transformers import Qwen2VLConfig, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=4 * 56 * 56),
                            tokenizer=tok, video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                         rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]},
                         eos_token_id=1, pad_token_id=0, bos_token_id=3),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=vocab["<|image_pad|>"], video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"], vision_end_token_id=vocab["<|vision_end|>"],
        eos_token_id=1, pad_token_id=0, bos_token_id=3,
    )
    return proc, cfg


@pytest.fixture(scope="module")
def vision_backend():
    from transformers import Qwen2VLForConditionalGeneration

    tok, vocab = _tokenizer()
    proc, cfg = tiny_qwen2vl(tok, vocab)
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(cfg)
    return TransformersBackend.from_objects(model, proc, model_id="tiny-qwen2vl-random", revision="seed0")


Q = [{"role": "user", "content": "what is the search query"}]


def test_text_model_generates_greedy_and_seeded(text_backend):
    b = text_backend
    assert b.vision is False and b.device in ("cpu", "cuda")
    g = b.generate(Q, max_tokens=8)
    assert len(g.texts) == 1 and g.texts[0].strip()
    assert g.prompt_tokens > 3 and 1 <= g.completion_tokens <= 8
    assert g.finish_reasons[0] in ("stop", "length")
    assert b.generate(Q, max_tokens=8).texts == g.texts  # greedy is deterministic

    s1 = b.generate(Q, max_tokens=8, temperature=1.0, seed=1, n=2)
    s2 = b.generate(Q, max_tokens=8, temperature=1.0, seed=1, n=2)
    assert len(s1.texts) == 2 and s1.texts == s2.texts  # same seed, same samples
    assert b.usage.requests == 4


def test_text_model_rejects_images(text_backend):
    from PIL import Image

    msgs = [{"role": "user", "content": [{"type": "text", "text": "what"}, {"type": "image", "image": Image.new("RGB", (8, 8))}]}]
    with pytest.raises(UnsupportedInputError, match="takes no images"):
        text_backend.generate(msgs)


def test_vision_model_takes_pil_and_bytes_images(vision_backend, tmp_path):
    import io

    from PIL import Image

    b = vision_backend
    assert b.vision is True
    img = Image.new("RGB", (64, 48), (255, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format="JPEG")
    for payload in (img, buf.getvalue()):
        msgs = [{"role": "user", "content": [{"type": "image", "image": payload}, {"type": "text", "text": "what colour"}]}]
        g = b.generate(msgs, max_tokens=6)
        assert g.texts[0].strip() and g.prompt_tokens > 8  # the image expanded to patch tokens

    with GenerationCache(tmp_path / "gen.sqlite") as cache:
        r1 = cache.cached_generate(b, msgs, "caption_v1", "Describe.", max_tokens=6)
        r2 = cache.cached_generate(b, msgs, "caption_v1", "Describe.", max_tokens=6)
        other = [{"role": "user", "content": [{"type": "image", "image": Image.new("RGB", (64, 48), (0, 0, 255))},
                                              {"type": "text", "text": "what colour"}]}]
        r3 = cache.cached_generate(b, other, "caption_v1", "Describe.", max_tokens=6)
    assert r2["cached"] and r2["texts"] == r1["texts"]
    assert r3["key"] != r1["key"] and not r3["cached"]  # a different image is a different input


def test_make_backend_transformers_is_lazy():
    b = make_backend({"backend": "transformers", "model": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main"})
    assert isinstance(b, TransformersBackend) and b._model is None  # nothing loaded until the first call
    assert b.cache_identity() == {"backend": "transformers", "model": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "main"}


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MMIR_RUN_SLOW"), reason="about 1 minute on 2 CPU cores; set MMIR_RUN_SLOW=1")
@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="transformers needs the 'gguf' package to read GGUF")
def test_offline_gguf_through_transformers():
    from mmir.llm.offline import EXPECTED_SHA256, qwen05b_gguf_path

    p = qwen05b_gguf_path()
    b = TransformersBackend(TransformersGenerator(backend="transformers", model=str(p.parent), gguf_file=p.name,
                                                local_files_only=True))
    g = b.generate([{"role": "user", "content": "Name the capital of France in one word."}], max_tokens=8)
    assert "paris" in g.texts[0].lower()
    assert b.model_id == p.name and b.model_revision == EXPECTED_SHA256
