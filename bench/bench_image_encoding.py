"""Benchmark: batched DataLoader image encoding (mmir) vs a per-image loop, same open_clip model, CPU.

Both paths start from encoded image bytes and end with one L2-normalised vector per image, with the SAME
open_clip ViT-B-32 (random weights: no weights are reachable offline; speed does not depend on the values)
and the same preprocessing transform:

* per-image loop: ``Image.open -> convert("RGB") -> preprocess -> model.encode_image(x[None])`` under
  ``torch.no_grad()``, one image at a time (the usual naive script);
* mmir: :meth:`MultimodalEncoder.encode_image_bytes` - safe decoding + preprocessing in DataLoader worker
  processes, ``batch_size`` images per forward pass under ``torch.inference_mode()``.

Images: the first ``--n`` images of ``../shared/data/openstax/document_images/*.parquet`` (column ``bytes``) when
present, else synthetic PNGs. The two outputs are checked to agree (max abs difference printed).

Usage: ``.venv/bin/python bench/bench_image_encoding.py [--n 256] [--batch-size 64] [--workers 1]``
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import sys
import time
from pathlib import Path

import numpy as np


def load_images(n: int, data_dir: str) -> tuple[list[bytes], str]:
    files = sorted(glob.glob(os.path.join(data_dir, "document_images", "*.parquet")))
    if files:
        import pyarrow.parquet as pq

        datas: list[bytes] = []
        for f in files:
            col = pq.read_table(f, columns=["bytes"]).column("bytes").to_pylist()
            datas.extend(col)
        if len(datas) >= n:
            return datas[:n], f"openstax ({', '.join(Path(f).name for f in files)})"
        src = f"openstax ({len(datas)} images, repeated)"
        return (datas * (n // len(datas) + 1))[:n], src
    from PIL import Image

    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        w, h = int(rng.integers(300, 900)), int(rng.integers(200, 700))
        arr = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="PNG")
        out.append(buf.getvalue())
    return out, "synthetic PNG"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=256, help="images to encode")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1, help="DataLoader workers of the mmir pipeline")
    ap.add_argument("--arch", default="ViT-B-32")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "openstax"))
    args = ap.parse_args()

    import torch
    from PIL import Image

    from mmir.encoders.multimodal import build_open_clip, l2_normalize

    datas, source = load_images(args.n, args.data_dir)
    torch.manual_seed(0)
    enc = build_open_clip(args.arch, pretrained=None, device="cpu", batch_size=args.batch_size)
    model, preprocess = enc.model, enc.preprocess
    print(f"model: open_clip {args.arch} (random weights), CPU, torch threads: {torch.get_num_threads()}, "
          f"cores: {os.cpu_count()}")
    print(f"images: {len(datas)} from {source}, mean {np.mean([len(d) for d in datas]) / 1024:.0f} KiB each")

    def per_image_loop(items):
        out = []
        with torch.no_grad():
            for b in items:
                img = Image.open(io.BytesIO(b)).convert("RGB")
                x = preprocess(img).unsqueeze(0)
                out.append(model.encode_image(x)[0].numpy())
        return l2_normalize(np.stack(out))

    # warm-up (allocators, oneDNN kernels) on a few images, not timed
    per_image_loop(datas[:2])
    enc.encode_image_bytes(datas[: min(len(datas), args.batch_size)], batch_size=args.batch_size, num_workers=0)

    t0 = time.perf_counter()
    ref = per_image_loop(datas)
    t_loop = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = enc.encode_image_bytes(datas, batch_size=args.batch_size, num_workers=args.workers)
    t_ours = time.perf_counter() - t0

    loop_ips, ours_ips = len(datas) / t_loop, len(datas) / t_ours
    print(f"per-image loop : {loop_ips:7.2f} images/s  ({t_loop:.1f} s)")
    print(f"mmir batched   : {ours_ips:7.2f} images/s  ({t_ours:.1f} s; batch_size={args.batch_size}, "
          f"num_workers={args.workers})")
    print(f"speed-up       : {ours_ips / loop_ips:.2f}x (target >= 3x)")
    diff = float(np.abs(got - ref).max())
    print(f"max |difference| between the two outputs: {diff:.2e}")
    # note: the loop skips EXIF orientation / transparency handling, so an image using them could differ
    return 0


if __name__ == "__main__":
    sys.exit(main())
