"""Benchmark: the OCR stage (:class:`mmir.encoders.ocr.OcrCaptioner` on ``--threads`` worker processes, RapidOCR and
Tesseract) against RapidOCR called one image at a time, on the shared openstax images, in one run.

Every path turns the same image bytes into caption text (lines scored >= 0.5, mmir's reading order):

* baseline: ``rapidocr_onnxruntime.RapidOCR()`` with its defaults (onnxruntime chooses its threads), called on one
  image after the other in this process, its model loaded before the clock starts;
* stage, rapidocr/onnxruntime: ``OcrCaptioner(workers=--threads, runtime="onnxruntime")``: one process a thread,
  each loading the engine once (one onnxruntime thread each, with onnxruntime's memory arena, no spinning, the
  detector's input normalised from a table), the images with the most detector pixels handed out first; the pool's
  start-up is inside the time;
* stage, rapidocr/openvino: the same on the default runtime, RapidOCR's ONNX models compiled by OpenVINO (float32);
* stage, tesseract: the same with ``engine="tesseract"`` (the tesseract binary through pytesseract);
* with ``--serial``: the stage on one worker too (every path).

The images are cut into ``--rounds`` chunks; every path reads each chunk in turn, in an order that rotates round by
round, so a change in the machine's load during the run falls on every path alike (the stage's engines and worker
processes stay up across rounds; their start-up counts in the stage's time). No cache (every image is read). Prints
images/s of each path, its ratio to the baseline, where the baseline's time goes (decoding, and RapidOCR's own
elapsed times of detection, angle classification and recognition), how many captions of each of the
stage's RapidOCR runtimes equal the baseline's, the character error rate of Tesseract's text against RapidOCR's (Levenshtein
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

    def __init__(self, engine: str, workers: int, runtime: str = "onnxruntime"):
        self.engine, self.workers, self.runtime, self.ocr, self.counts = engine, workers, runtime, None, {}

    def __call__(self, datas: list[bytes], sources: list[str]) -> list[str]:
        from mmir.encoders.ocr import OcrCaptioner

        if self.ocr is None:
            self.ocr = OcrCaptioner(None, engine=self.engine, workers=self.workers, device="cpu", runtime=self.runtime)
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

    n = args.threads
    workers = (n, 1) if args.serial else (n,)
    stages = {f"stage {engine}{'/' + runtime if engine == 'rapidocr' else ''} x{w}": (engine, w, runtime)
              for w in workers for engine, runtime in (("rapidocr", "onnxruntime"), ("rapidocr", "openvino"), ("tesseract", "onnxruntime"))}
    paths = {"baseline": Baseline()} | {name: Stage(*how) for name, how in stages.items()}
    names = list(paths)
    seconds = dict.fromkeys(names, 0.0)
    got: dict[str, list[str]] = {name: [] for name in names}
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
    rate = {name: len(datas) / seconds[name] for name in names}
    for name in names:
        counts = f" (statuses {paths[name].counts})" if isinstance(paths[name], Stage) else ""
        print(f"{name}: {seconds[name]:.1f} s, {rate[name]:.3f} images/s, {rate[name] / rate['baseline']:.2f}x the baseline{counts}")
    split = paths["baseline"].split
    total = split["decode"] + split["rapidocr"]
    other = split["rapidocr"] - split["detection"] - split["angle classification"] - split["recognition"]
    print("baseline time: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in split.items() if k != "rapidocr")
          + f", resizing, cropping and the rest {100 * other / total:.0f}% (RapidOCR's own elapsed times)")
    base = got["baseline"]
    nonempty = sum(bool(t.strip()) for t in base)
    for name in stages:
        if "rapidocr" in name:
            same = sum(a == b for a, b in zip(got[name], base))
            rate_cer, edits, _ = cer(got[name], base)
            print(f"{name} captions equal to the baseline's: {same} of {len(base)} (character error rate {rate_cer:.4f}, {edits} edits)")
    if args.serial:
        for runtime in ("rapidocr/onnxruntime", "rapidocr/openvino"):
            print(f"stage {runtime} x1 == x{n} (byte for byte): {got[f'stage {runtime} x1'] == got[f'stage {runtime} x{n}']}")
    rate_cer, edits, chars = cer(got[f"stage tesseract x{n}"], base)
    print(f"Tesseract vs RapidOCR character error rate: {rate_cer:.3f} ({edits} edits / {chars} RapidOCR characters; "
          f"{nonempty} of {len(base)} images with RapidOCR text)")
    load1 = os.getloadavg()
    print(f"load average after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print("speed-up over one at a time (target >= 1.8x on 2 cores): "
          + ", ".join(f"{name[len('stage '):]} {rate[name] / rate['baseline']:.2f}x" for name in stages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
