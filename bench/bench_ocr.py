"""Benchmark: the OCR stage (:class:`mmir.encoders.ocr.OcrCaptioner` on ``--threads`` worker processes, RapidOCR and
Tesseract) against RapidOCR called one image at a time, on the shared openstax images, in one run.

Every path turns the same image bytes into caption text (lines scored >= 0.5, mmir's reading order):

* baseline: ``rapidocr_onnxruntime.RapidOCR()`` with its defaults (onnxruntime chooses its threads), called on one
  image after the other in this process, its model loaded before the clock starts;
* stage, rapidocr: ``OcrCaptioner(workers=--threads)``: one process a thread, each loading the engine once (one
  onnxruntime thread each, with onnxruntime's memory arena, no spinning, the detector's input normalised from a
  table), the images with the most detector pixels handed out first; the pool's start-up is inside the time;
* stage, tesseract: the same with ``engine="tesseract"`` (the tesseract binary through pytesseract);
* with ``--serial``: the stage on one worker too (both engines).

The images are cut into ``--rounds`` chunks; every path reads each chunk in turn, in an order that rotates round by
round, so a change in the machine's load during the run falls on every path alike (the stage's engines and worker
processes stay up across rounds; their start-up counts in the stage's time). No cache (every image is read). Prints
images/s of each path, its ratio to the baseline, where the baseline's time goes (decoding, and RapidOCR's own
elapsed times of detection, angle classification and recognition), how many captions of the
stage's RapidOCR equal the baseline's, the character error rate of Tesseract's text against RapidOCR's (Levenshtein
distance from rapidfuzz, summed over images / summed RapidOCR characters, whitespace runs collapsed), and the load
average before and after (other processes on the machine slow every path).

Images: ``document_images`` and ``examples_images`` of both openstax domains (``--data-dir``), ``--limit`` of them
evenly spaced (0 = all).

Usage: ``.venv/bin/python bench/bench_ocr.py [--limit 200] [--threads 2] [--serial]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def load_images(data_dir: Path, limit: int) -> tuple[list[bytes], list[str]]:
    import pandas as pd

    datas, sources = [], []
    for sub in ("document_images", "examples_images"):
        for f in sorted((data_dir / sub).glob("*.parquet")):
            df = pd.read_parquet(f, columns=["path", "bytes"])
            datas += list(df["bytes"])
            sources += list(df["path"])
    if limit and limit < len(datas):
        idx = [round(i * (len(datas) - 1) / (limit - 1)) for i in range(limit)] if limit > 1 else [0]
        datas, sources = [datas[i] for i in idx], [sources[i] for i in idx]
    return datas, sources


class Baseline:
    """RapidOCR with its defaults, one image at a time; the same decoding, score filter and layout as the stage."""

    def __init__(self):
        from rapidocr_onnxruntime import RapidOCR

        self.engine = RapidOCR()  # loaded before the clock starts
        # seconds in decoding, in RapidOCR's call, and RapidOCR's own split of it (the elapsed times it returns)
        self.split = dict.fromkeys(("decode", "rapidocr", "detection", "angle classification", "recognition"), 0.0)

    def __call__(self, datas: list[bytes], sources: list[str]) -> list[str]:
        import numpy as np

        from mmir.data.images import CorruptImage, ImageTooLarge, decode_image
        from mmir.encoders.ocr_layout import OcrLine, lines_to_text

        texts = []
        for data, src in zip(datas, sources):
            t0 = time.perf_counter()
            try:
                img = decode_image(data, source=src)
            except (CorruptImage, ImageTooLarge):
                texts.append("")
                continue
            bgr = np.ascontiguousarray(np.asarray(img)[:, :, ::-1])
            t1 = time.perf_counter()
            result, elapse = self.engine(bgr)
            self.split["decode"] += t1 - t0
            self.split["rapidocr"] += time.perf_counter() - t1
            for part, sec in zip(("detection", "angle classification", "recognition"), elapse or []):
                self.split[part] += sec
            lines = [OcrLine(tuple((float(x), float(y)) for x, y in b), str(t), float(s)) for b, t, s in result or []]
            texts.append(lines_to_text([l for l in lines if l.score >= 0.5 and l.text.strip()]))
        return texts

    def close(self):
        pass


class Stage:
    """The OCR stage (no cache) on ``workers`` processes, started on the first call (inside its time)."""

    def __init__(self, engine: str, workers: int):
        self.engine, self.workers, self.ocr, self.counts = engine, workers, None, {}

    def __call__(self, datas: list[bytes], sources: list[str]) -> list[str]:
        from mmir.encoders.ocr import OcrCaptioner

        if self.ocr is None:
            self.ocr = OcrCaptioner(None, engine=self.engine, workers=self.workers, device="cpu")
        out = self.ocr.read_many(datas, sources=sources)
        self.counts = dict(self.ocr.counts)
        return [o.text for o in out]

    def close(self):
        if self.ocr is not None:
            self.ocr.close()


def cer(hyp: list[str], ref: list[str]) -> tuple[float, int, int]:
    """(summed edits / summed reference characters, edits, reference characters), whitespace runs collapsed."""
    from rapidfuzz.distance import Levenshtein

    edits = chars = 0
    for h, r in zip(hyp, ref, strict=True):
        h, r = " ".join(h.split()), " ".join(r.split())
        edits += Levenshtein.distance(h, r)
        chars += len(r)
    return (edits / chars if chars else 0.0), edits, chars


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("MMIR_SHARED_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
                    + "/openstax")
    ap.add_argument("--limit", type=int, default=200, help="images, evenly spaced over all of them (0 = all)")
    ap.add_argument("--threads", type=int, default=2, help="worker processes of the stage")
    ap.add_argument("--serial", action="store_true", help="also time the stage on one worker")
    ap.add_argument("--rounds", type=int, default=5, help="chunks every path reads in turn (rotating order)")
    args = ap.parse_args()
    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        print(f"no openstax data at {data_dir} (set --data-dir or MMIR_SHARED_DATA)", file=sys.stderr)
        return 2
    datas, sources = load_images(data_dir, args.limit)
    load0 = os.getloadavg()
    print(f"{len(datas)} openstax images ({sum(map(len, datas)) / 1e6:.1f} MB), {os.cpu_count()} CPUs, "
          f"stage workers {args.threads}, load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)

    paths = {"baseline": Baseline(), f"stage rapidocr x{args.threads}": Stage("rapidocr", args.threads),
             f"stage tesseract x{args.threads}": Stage("tesseract", args.threads)}
    if args.serial:
        paths |= {"stage rapidocr x1": Stage("rapidocr", 1), "stage tesseract x1": Stage("tesseract", 1)}
    names = list(paths)
    seconds = dict.fromkeys(names, 0.0)
    got: dict[str, list[str]] = {n: [] for n in names}
    rounds = max(1, min(args.rounds, len(datas)))
    cuts = [round(i * len(datas) / rounds) for i in range(rounds + 1)]
    for r in range(rounds):
        chunk = slice(cuts[r], cuts[r + 1])
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.perf_counter()
            got[name] += paths[name](datas[chunk], sources[chunk])
            seconds[name] += time.perf_counter() - t0
        print(f"round {r + 1}/{rounds}: {cuts[r + 1]} images, load average {os.getloadavg()[0]:.2f}", flush=True)
    for p in paths.values():
        p.close()
    rate = {n: len(datas) / seconds[n] for n in names}
    for n in names:
        counts = f" (statuses {paths[n].counts})" if isinstance(paths[n], Stage) else ""
        print(f"{n}: {seconds[n]:.1f} s, {rate[n]:.3f} images/s, {rate[n] / rate['baseline']:.2f}x the baseline{counts}")
    split = paths["baseline"].split
    total = split["decode"] + split["rapidocr"]
    other = split["rapidocr"] - split["detection"] - split["angle classification"] - split["recognition"]
    print("baseline time: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in split.items() if k != "rapidocr")
          + f", resizing, cropping and the rest {100 * other / total:.0f}% (RapidOCR's own elapsed times)")
    base = got["baseline"]
    texts = {(n.split()[1], int(n.split("x")[-1])): got[n] for n in names if n != "baseline"}
    same = sum(a == b for a, b in zip(texts[("rapidocr", args.threads)], base))
    print(f"stage rapidocr x{args.threads} captions equal to the baseline's: {same} of {len(base)}")
    if ("rapidocr", 1) in texts:
        print(f"stage rapidocr x1 == x{args.threads} (byte for byte): {texts[('rapidocr', 1)] == texts[('rapidocr', args.threads)]}")
    rate_cer, edits, chars = cer(texts[("tesseract", args.threads)], base)
    nonempty = sum(bool(t.strip()) for t in base)
    print(f"Tesseract vs RapidOCR character error rate: {rate_cer:.3f} ({edits} edits / {chars} RapidOCR characters; "
          f"{nonempty} of {len(base)} images with RapidOCR text)")
    load1 = os.getloadavg()
    print(f"load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print(f"speed-up stage rapidocr x{args.threads} / one at a time: {rate[f'stage rapidocr x{args.threads}'] / rate['baseline']:.2f}x "
          f"(target >= 1.8x on 2 cores); tesseract x{args.threads}: {rate[f'stage tesseract x{args.threads}'] / rate['baseline']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
