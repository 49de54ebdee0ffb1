"""Tiny randomly initialised late-interaction checkpoints of the real architectures, saved in their real formats:
a ModernBERT ColBERT in PyLate's save layout (as lightonai/GTE-ModernColBERT-v1 and Reason-ModernColBERT are
published: modules.json with ``pylate.models.Dense.Dense``, [Q]/[D] prefixes and lengths in
config_sentence_transformers.json), a ColQwen2.5 (``colpali_engine.models.ColQwen2_5``) with its processor, and a
ColPali (PaliGemma: SigLIP vision tower + Gemma text model) with its processor, full and as a LoRA adapter saved by peft
(vidore/colpali-v1.3 is such an adapter on vidore/colpaligemma-3b-pt-448-base)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tiny_models import WORDS, byte_level_vocab

COLPALI_IMAGE_TOKENS = 16  # (32 px / 8 px patches)^2; the real ColPali: (448 / 14)^2 = 1,024

COLBERT_DIM, QUERY_LENGTH, DOCUMENT_LENGTH = 16, 12, 20


def modernbert_tokenizer():
    """A WordLevel tokenizer framed as ModernBERT's (``[CLS] $A [SEP]``, [MASK] for query expansion) with PyLate's
    ``[Q] ``/``[D] `` prefix tokens added."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab = {w: i for i, w in enumerate(specials + [w for w in WORDS if w not in specials])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                  pad_token="[PAD]", mask_token="[MASK]")
    tok.add_tokens(["[Q] ", "[D] "])
    return tok


def save_pylate_colbert(path: Path, seed: int = 0) -> tuple[Path, torch.Tensor]:
    """A 2-layer ModernBERT + a (16, 32) projection in PyLate's save layout; returns (path, projection weight)."""
    from safetensors.torch import save_file
    from transformers import ModernBertConfig, ModernBertModel

    tok = modernbert_tokenizer()
    torch.manual_seed(seed)
    cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           max_position_embeddings=512, global_attn_every_n_layers=1, local_attention=64, pad_token_id=3,
                           cls_token_id=1, sep_token_id=2, bos_token_id=1, eos_token_id=2)
    ModernBertModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    weight = torch.randn(COLBERT_DIM, 32)
    (path / "1_Dense").mkdir()
    save_file({"linear.weight": weight}, path / "1_Dense" / "model.safetensors")
    dump = lambda name, obj: (path / name).write_text(json.dumps(obj))  # noqa: E731
    dump("1_Dense/config.json", {"in_features": 32, "out_features": COLBERT_DIM, "bias": False,
                                 "activation_function": "torch.nn.modules.linear.Identity", "use_residual": False})
    dump("modules.json", [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                          {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}])
    dump("config_sentence_transformers.json", {
        "model_type": "ColBERT", "query_prefix": "[Q] ", "document_prefix": "[D] ", "query_length": QUERY_LENGTH,
        "document_length": DOCUMENT_LENGTH, "attend_to_expansion_tokens": False, "skiplist_words": [".", ","],
        "similarity_fn_name": "MaxSim", "prompts": {}, "default_prompt_name": None})
    dump("sentence_bert_config.json", {"max_seq_length": DOCUMENT_LENGTH, "do_lower_case": False})
    return path, weight


def save_colqwen2_5(path: Path, seed: int = 0) -> Path:
    """A tiny ColQwen2_5 (Qwen2.5-VL text and vision towers, 128-d projection) and its ColQwen2_5_Processor."""
    from colpali_engine.models import ColQwen2_5, ColQwen2_5_Processor
    from transformers import Qwen2_5_VLConfig, Qwen2Tokenizer, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    vocab, merges = byte_level_vocab([("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("c", "a")])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    specials = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
                "<|endoftext|>"]
    tok.add_special_tokens({"additional_special_tokens": specials, "pad_token": "<|endoftext|>"})
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
    proc = ColQwen2_5_Processor(image_processor=Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28),
                                tokenizer=tok, video_processor=Qwen2VLVideoProcessor())
    torch.manual_seed(seed)
    cfg = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                                 "mrope_section": [4, 2, 2]},
                         bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=32, fullatt_block_indexes=[0]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    ColQwen2_5(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


def save_colpali(path: Path, seed: int = 0) -> Path:
    """A tiny ColPali (PaliGemma: a 1-layer SigLIP on 32-px images, a 2-layer Gemma, the 128-d projection) and its
    ColPaliProcessor (a WordLevel tokenizer with Gemma's <bos>/<eos>/<pad>; the processor adds <image> and the
    <locNNNN>/<segNNN> tokens as PaliGemma's)."""
    from colpali_engine.models import ColPali, ColPaliProcessor
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PaliGemmaConfig, PreTrainedTokenizerFast, SiglipImageProcessor

    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(specials + [w for w in WORDS if w not in specials])}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")
    proc = ColPaliProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}, image_seq_length=COLPALI_IMAGE_TOKENS),
                            tokenizer=tok)
    torch.manual_seed(seed)
    cfg = PaliGemmaConfig(
        text_config=dict(model_type="gemma", vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, pad_token_id=0, eos_token_id=1, bos_token_id=2),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32,
                           patch_size=8, projection_dim=32),
        image_token_index=proc.image_token_id, projection_dim=32, hidden_size=32, vocab_size=len(tok))
    ColPali(cfg).save_pretrained(path)
    proc.save_pretrained(path)
    return path


#: vidore/colpali-v1.3's LoRA targets: the text model's projections and the 128-d output projection
COLPALI_LORA_TARGETS = "(.*(language_model).*(down_proj|gate_proj|up_proj|k_proj|q_proj|v_proj|o_proj).*$|.*(custom_text_proj).*$)"


def save_colpali_adapter(path: Path, base: Path, seed: int = 1, transformers4_keys: bool = False):
    """A LoRA adapter (rank 4) made by peft on the ColPali at ``base`` with random ``lora_B`` (peft starts it at zero,
    which would leave the model unchanged), saved by ``save_pretrained`` (its adapter_config.json names ``base``), with
    the processor beside it as on the hub. ``transformers4_keys``: its weights renamed to the module names of
    transformers 4 (``model.language_model.model.layers...``), the names vidore/colpali-v1.3 was saved with.

    Returns the in-memory peft model, the reference the loaded adapter must equal."""
    from colpali_engine.models import ColPali, ColPaliProcessor
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file, save_file

    model = get_peft_model(ColPali.from_pretrained(base), LoraConfig(r=4, lora_alpha=8, target_modules=COLPALI_LORA_TARGETS,
                                                                     init_lora_weights="gaussian"))
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.save_pretrained(path)
    ColPaliProcessor.from_pretrained(base).save_pretrained(path)
    if transformers4_keys:
        f = path / "adapter_model.safetensors"
        old = "base_model.model.model.model.language_model."
        sd = {k.replace(old, "base_model.model.model.language_model.model."): v for k, v in load_file(f).items()}
        assert any(k.startswith("base_model.model.model.language_model.model.") for k in sd)
        save_file(sd, f, metadata={"format": "pt"})
    return model.eval()
