"""Full-size encoders on one GPU (issue 20 item 4): the paper's architectures, randomly initialised (the compute
does not depend on the weights), run through mmir's own encoder classes in bf16/fp16 with SDPA attention.

* ``e5-mistral-7b``: ``MistralConfig`` of intfloat/e5-mistral-7b-instruct through
  :class:`mmir.encoders.hf_text.HFTextEncoder` (last-token pooling, 4,096 tokens, token-budget batches);
* ``gte-qwen2-7b``: ``Qwen2Config`` of Alibaba-NLP/gte-Qwen2-7B-instruct through the same class (8,192 tokens);
* ``gme-7b``: ``Qwen2VLConfig`` of Alibaba-NLP/gme-Qwen2-VL-7B-Instruct through
  :class:`mmir.encoders.multimodal.gme.GmeEncoder` (texts and images; 1,800 tokens; fixed batches);
* ``clip-vit-l-14``: open_clip ``ViT-L-14`` through :class:`mmir.encoders.multimodal.openclip.OpenClipEncoder`.

Documents: lengths drawn from MM-BRIGHT's (``../shared/data/mm-bright-stats``: 2,499,273 documents, 5.5 GB of
text, i.e. a mean of 2,200 characters; the per-document distribution is not published, so a log-normal with that
mean and sigma 1.2 is assumed, at 4 characters a token, truncated at the model's limit). A byte-level tokenizer
without merges makes ``n`` characters ``n`` tokens. FLOPs (forward, PaLM's count): ``2 N + 4 L d T`` per token
(``N`` non-embedding parameters, ``L`` layers, ``d`` attention width, ``T`` the sequence length), padding not
counted; MFU = FLOP/s over the device's dense bf16 peak.
"""

from __future__ import annotations

import gc
import math
import resource
import time

import numpy as np
import torch

#: MM-BRIGHT's corpus (../shared/data/mm-bright-stats/README.md): documents and characters of text
MMBRIGHT_DOCS = 2_499_273
MMBRIGHT_CHARS = 5.5e9
CHARS_PER_TOKEN = 4
LENGTH_SIGMA = 1.2
#: dense bf16/fp16 tensor-core peaks (TFLOP/s, no sparsity) by device name
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.1, "L4": 121.0, "A10": 125.0}

#: the architectures: hub configs of the paper's models (config.json of each repository)
FULLSIZE = {
    "e5-mistral-7b": {"kind": "text", "config": "MistralConfig", "max_length": 4096, "batch_tokens": 32768, "batch_size": 64,
                      "cfg": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                                  rms_norm_eps=1e-5, sliding_window=None)},
    "gte-qwen2-7b": {"kind": "text", "config": "Qwen2Config", "max_length": 8192, "batch_tokens": 32768, "batch_size": 64,
                     "cfg": dict(vocab_size=151646, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                 num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=131072,
                                 rms_norm_eps=1e-6)},
    "gme-7b": {"kind": "gme", "max_length": 1800, "batch_size": 16,
               "text": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                            num_attention_heads=28, num_key_value_heads=4, rms_norm_eps=1e-6,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}),
               "vision": dict(depth=32, embed_dim=1280, hidden_size=3584, num_heads=16, mlp_ratio=4, patch_size=14,
                              spatial_merge_size=2, temporal_patch_size=2)},
    "clip-vit-l-14": {"kind": "clip", "arch": "ViT-L-14", "batch_size": 128},
}
#: the same architectures at toy size (``--tiny``): the code path, on any device
TINY = {
    "e5-mistral-7b": {"max_length": 64, "batch_tokens": 256, "batch_size": 8,
                      "cfg": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2)},
    "gte-qwen2-7b": {"max_length": 64, "batch_tokens": 256, "batch_size": 8,
                     "cfg": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2)},
    "gme-7b": {"max_length": 96, "batch_size": 4,
               "text": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}),
               "vision": dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2)},
    "clip-vit-l-14": {"arch": "tiny", "batch_size": 4},
}


def doc_lengths(n: int, max_tokens: int, seed: int = 0) -> np.ndarray:
    """``(n,)`` token counts drawn from MM-BRIGHT's document lengths (module docstring), at most ``max_tokens``."""
    mean_tokens = MMBRIGHT_CHARS / MMBRIGHT_DOCS / CHARS_PER_TOKEN
    mu = math.log(mean_tokens) - LENGTH_SIGMA**2 / 2  # a log-normal's mean is exp(mu + sigma^2 / 2)
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(mu, LENGTH_SIGMA, size=n).round().astype(int), 1, max_tokens)


def forward_flops(n_params: int, layers: int, width: int, lengths) -> float:
    """Forward FLOPs of sequences of ``lengths`` tokens: ``sum_i (2 N + 4 L d T_i) T_i`` (PaLM, appendix B)."""
    t = np.asarray(lengths, dtype=np.float64)
    return float(np.sum((2.0 * n_params + 4.0 * layers * width * t) * t))


def non_embedding_params(module: torch.nn.Module) -> int:
    """Parameters of ``module`` outside its embedding tables (they are looked up, not multiplied)."""
    emb = sum(p.numel() for m in module.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters(recurse=False))
    return sum(p.numel() for p in module.parameters()) - emb


def byte_tokenizer(max_length: int, specials: list[str] | None = None):
    """transformers' Qwen2Tokenizer over a byte-level vocabulary without merges: ``"x" * n`` is ``n`` tokens."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    vocab = {c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}
    tok = Qwen2Tokenizer(vocab=vocab, merges=[])
    tok.add_special_tokens({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                            "additional_special_tokens": specials or []})
    tok.model_max_length = max_length
    return tok


def peak_tflops(device: str, given: float | None) -> float | None:
    if given:
        return given
    if device != "cuda":
        return None
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device: str):
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t0


def _images(n: int, data_dir: str | None) -> list[bytes]:
    """``n`` PNG/JPEG bytes: the openstax corpus images when present, else synthetic 640x480 PNGs."""
    import io
    from pathlib import Path

    from PIL import Image

    out: list[bytes] = []
    if data_dir:
        for f in sorted(Path(data_dir, "document_images").glob("*.parquet")):
            import pandas as pd

            out += [bytes(b) for b in pd.read_parquet(f, columns=["bytes"])["bytes"]][: n - len(out)]
            if len(out) >= n:
                return out
    rng = np.random.default_rng(0)
    while len(out) < n:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def _dtype(device: str) -> torch.dtype:
    return torch.bfloat16 if device == "cuda" else torch.float32


def _text_arch(name: str, spec: dict, device: str, n_docs: int) -> dict:
    import transformers

    from mmir.config.models import HFTextSystem
    from mmir.encoders.hf_text import HFTextEncoder

    tok = byte_tokenizer(spec["max_length"])
    cfg = getattr(transformers, spec["config"])(**(spec["cfg"] | {"vocab_size": max(spec["cfg"].get("vocab_size", 0), len(tok))}))
    cfg._attn_implementation = "sdpa"
    with torch.device(device):
        model = transformers.AutoModel.from_config(cfg, dtype=_dtype(device), attn_implementation="sdpa")
    enc = HFTextEncoder(HFTextSystem(kind="dense", backend="hf-last-token", model=f"random/{name}", max_length=spec["max_length"],
                                     batch_size=spec["batch_size"], batch_tokens=spec["batch_tokens"], append_eos=True,
                                     device=device, dtype="bfloat16"))
    enc.adopt(model, tok)
    room = spec["max_length"] - len(enc._head) - len(enc._tail)
    lengths = doc_lengths(n_docs, room)
    texts = ["x" * int(n) for n in lengths]
    enc.encode_documents(texts[: min(8, len(texts))])  # warm-up (kernels, allocator)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    vecs, dt = _timed(lambda: enc.encode_documents(texts), device)
    tokens = lengths + len(enc._head) + len(enc._tail)
    n_params = non_embedding_params(model)
    flops = forward_flops(n_params, cfg.num_hidden_layers, cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads),
                          tokens)
    return {"arch": name, "params_b": sum(p.numel() for p in model.parameters()) / 1e9, "docs": len(texts),
            "tokens_per_s": float(tokens.sum()) / dt, "docs_per_s": len(texts) / dt, "images_per_s": None,
            "flops": flops, "seconds": dt, "dim": int(vecs.shape[1]), "mean_tokens": float(tokens.mean())}


def _gme_arch(name: str, spec: dict, device: str, n_docs: int, images: list[bytes]) -> dict:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    from mmir.encoders.multimodal.gme import GmeRecipe, build_gme

    specials = ["<|im_start|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    tok = byte_tokenizer(spec["max_length"], specials)
    ids = {s: tok.convert_tokens_to_ids(s) for s in [*specials, "<|im_end|>", "<|endoftext|>"]}
    tiny = spec["vision"]["depth"] < 4
    tokens_min, tokens_max = (4, 16) if tiny else (256, 1280)  # gme_inference.py: 256..1280 image tokens
    size = {"shortest_edge": tokens_min * 28 * 28, "longest_edge": tokens_max * 28 * 28}
    proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(size=size),
                            tokenizer=tok, video_processor=Qwen2VLVideoProcessor())
    text = spec["text"] | {"vocab_size": max(spec["text"].get("vocab_size", 0), len(tok)), "bos_token_id": None,
                           "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"]}
    cfg = Qwen2VLConfig(text_config=text, vision_config=spec["vision"], image_token_id=ids["<|image_pad|>"],
                        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                        vision_end_token_id=ids["<|vision_end|>"], attn_implementation="sdpa")
    dtype = torch.float16 if device == "cuda" else torch.float32  # the model card's precision
    with torch.device(device):
        model = Qwen2VLForConditionalGeneration._from_config(cfg, dtype=dtype)
    enc = build_gme(f"random/{name}", revision="random-init", model=model, processor=proc, device=device,
                    batch_size=spec["batch_size"], recipe=GmeRecipe(min_image_tokens=tokens_min, max_image_tokens=tokens_max,
                                                                     max_length=spec["max_length"]))
    frame = len(tok(enc._prompt("", False, "document"))["input_ids"])
    lengths = doc_lengths(n_docs, spec["max_length"] - frame)
    texts = ["x" * int(n) for n in lengths]
    enc.encode_text(texts[:2])
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _, dt = _timed(lambda: enc.encode_text(texts), device)
    _, dti = _timed(lambda: enc.encode_image_bytes(images, num_workers=2), device)
    lm = model.model.language_model
    tc = cfg.text_config
    tokens = lengths + frame
    flops = forward_flops(non_embedding_params(lm), tc.num_hidden_layers, tc.hidden_size, tokens)
    return {"arch": name, "params_b": sum(p.numel() for p in model.parameters()) / 1e9, "docs": len(texts),
            "tokens_per_s": float(tokens.sum()) / dt, "docs_per_s": len(texts) / dt, "images_per_s": len(images) / dti,
            "flops": flops, "seconds": dt, "dim": enc.dim, "mean_tokens": float(tokens.mean())}


def _clip_arch(name: str, spec: dict, device: str, images: list[bytes]) -> dict:
    import open_clip

    from mmir.encoders.multimodal.openclip import build_open_clip

    if spec["arch"] == "tiny":
        model = open_clip.model.CLIP(embed_dim=32, vision_cfg=open_clip.model.CLIPVisionCfg(layers=1, width=32, head_width=16,
                                                                                               patch_size=16, image_size=32),
                                     text_cfg=open_clip.model.CLIPTextCfg(layers=1, width=32, heads=2))
        preprocess = open_clip.image_transform(32, is_train=False)
        enc = build_open_clip("ViT-L-14", None, model=model, preprocess=preprocess, device=device, batch_size=spec["batch_size"])
        patches, vis = 4, model.visual
    else:
        enc = build_open_clip(spec["arch"], None, device=device, batch_size=spec["batch_size"])
        vis = enc.model.visual
        patches = (224 // 14) ** 2
    enc.encode_image_bytes(images[:2], num_workers=2)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _, dt = _timed(lambda: enc.encode_image_bytes(images, num_workers=2), device)
    layers = len(vis.transformer.resblocks)
    width = vis.transformer.width
    tokens = np.full(len(images), patches + 1)
    flops = forward_flops(non_embedding_params(vis), layers, width, tokens)
    return {"arch": name, "params_b": sum(p.numel() for p in enc.model.parameters()) / 1e9, "docs": 0, "tokens_per_s": None,
            "docs_per_s": None, "images_per_s": len(images) / dt, "flops": flops, "seconds": dt, "dim": enc.dim,
            "mean_tokens": float(tokens.mean())}


def run_fullsize(args, cuda: bool) -> list[dict]:
    """Run each architecture of ``args.only`` (default all) and print the table; returns its rows."""
    device = "cuda" if cuda else "cpu"
    peak = peak_tflops(device, args.peak_tflops)
    n_docs = 16 if args.tiny and args.fullsize_docs == 512 else args.fullsize_docs
    n_images = 4 if args.tiny and args.fullsize_images == 64 else args.fullsize_images
    images = _images(n_images, None if args.tiny else args.data)
    rows = []
    for name in args.only or list(FULLSIZE):
        spec = FULLSIZE[name] | (TINY[name] if args.tiny else {})
        torch.manual_seed(0)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        kind = FULLSIZE[name]["kind"]
        if kind == "text":
            row = _text_arch(name, spec, device, n_docs)
        elif kind == "gme":
            row = _gme_arch(name, spec, device, n_docs, images)
        else:
            row = _clip_arch(name, spec, device, images)
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else \
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        row["mfu"] = (row["flops"] / row["seconds"]) / (peak * 1e12) if peak else None
        row["hours_mmbright"] = MMBRIGHT_DOCS / row["docs_per_s"] / 3600 if row["docs_per_s"] else None
        rows.append(row)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    where = torch.cuda.get_device_name(0) if cuda else "CPU"
    print(f"\nfull-size architectures ({'TINY configs: code path only' if args.tiny else 'random weights'}) on {where}; "
          f"peak {peak or 'unknown'} TFLOP/s; {n_docs} documents of MM-BRIGHT's lengths, {n_images} images")

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)

    print(f"{'architecture':14s} {'params B':>8s} {'tokens/s':>10s} {'docs/s':>8s} {'images/s':>9s} {'peak GiB':>9s} "
          f"{'MFU':>6s} {'h for 2.5M docs':>16s}")
    for r in rows:
        print(f"{r['arch']:14s} {r['params_b']:8.3f} {f(r['tokens_per_s'], '10.0f')} {f(r['docs_per_s'], '8.1f')} "
              f"{f(r['images_per_s'], '9.1f')} {r['peak_gib']:9.2f} {f(r['mfu'], '6.1%')} {f(r['hours_mmbright'], '16.1f')}")
    return rows
