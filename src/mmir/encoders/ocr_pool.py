"""An OCR engine over many images on ``workers`` processes, each building its engine once (:class:`OcrPool`).

``workers == 1`` runs in this process (OpenVINO's engine on one worker process). Otherwise a ``spawn`` process
pool: a fresh interpreter per worker, since forking a process that already runs threads (pyarrow's pool,
onnxruntime's) can deadlock. The pool takes the images with the most engine work first (:func:`work`, from the image
header), so a large image does not start last and leave the other workers idle at the end; results come back as
they finish, each with its input index, and each image is read by the same engine settings whichever worker takes
it, so the output does not depend on the number of workers or the order. A script that starts a pool must keep its
top level under ``if __name__ == "__main__"`` (spawn imports the main script in every worker).
"""

from __future__ import annotations

import io
import multiprocessing
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from PIL import Image

from mmir.data.images import DEFAULT_MAX_PIXELS, CorruptImage, ImageTooLarge, decode_image
from mmir.encoders.ocr_engines import EngineSpec
from mmir.encoders.ocr_layout import OcrLine


@dataclass(frozen=True)
class ReadResult:
    """What OCR made of one image: its ``lines`` (all, unfiltered), or an ``error`` (the message). ``corrupt``: the
    bytes do not decode (:class:`~mmir.data.images.CorruptImage`, :class:`~mmir.data.images.ImageTooLarge`); an
    error without it is the engine failing on a decodable image."""

    lines: tuple[OcrLine, ...] = ()
    error: str | None = None
    corrupt: bool = False


def read_one(engine, data: bytes, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> ReadResult:
    """Decode and OCR one image; a decoding or engine failure is returned (never raised), so one bad image never
    stops the others."""
    try:
        img = decode_image(data, source=source, max_pixels=max_pixels)
    except (CorruptImage, ImageTooLarge) as e:
        return ReadResult(error=str(e), corrupt=True)
    try:
        return ReadResult(tuple(engine.read(img)))
    except Exception as e:  # counted and reported by the caller with this message; not cached, so a rerun retries
        return ReadResult(error=f"{source}: {type(e).__name__}: {e}")


_worker_engine = None
_worker_max_pixels = DEFAULT_MAX_PIXELS


def _init_worker(spec: EngineSpec, max_pixels: int) -> None:
    global _worker_engine, _worker_max_pixels
    _worker_engine, _worker_max_pixels = spec.build(), max_pixels


def _work(item: tuple[bytes, str]) -> ReadResult:
    return read_one(_worker_engine, item[0], item[1], _worker_max_pixels)


#: RapidOCR's detector scales an image's short side up to this many pixels (its ``Det.limit_side_len``, type min)
DET_SHORT_SIDE = 736


def work(data: bytes, engine: str = "rapidocr") -> float:
    """Relative engine work of one image, for scheduling only: the pixels the engine sees, from the header (no
    decoding). rapidocr: the short side scaled up to :data:`DET_SHORT_SIDE` (a wide strip costs more than its pixels);
    tesseract: width x height. 0 when the header does not parse (a corrupt image fails fast)."""
    try:
        w, h = Image.open(io.BytesIO(data)).size
    except Exception:  # any header error: decode_image reports it properly in the worker
        return 0.0
    short, long = min(w, h), max(w, h)
    if engine == "rapidocr" and 0 < short < DET_SHORT_SIDE:
        return DET_SHORT_SIDE * long * DET_SHORT_SIDE / short
    return float(w * h)


class OcrPool:
    """``map_unordered(items)`` OCRs ``(bytes, source)`` items on up to ``workers`` processes; the engine of ``spec``
    is built once per worker (once in this process when ``workers == 1``, except OpenVINO's), the pool started on first use and kept
    until :meth:`close`."""

    def __init__(self, spec: EngineSpec, workers: int = 1, max_pixels: int = DEFAULT_MAX_PIXELS):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.spec, self.workers, self.max_pixels = spec, workers, max_pixels
        self._engine = None
        self._executor: ProcessPoolExecutor | None = None

    def map_unordered(self, items: Iterable[tuple[bytes, str]]) -> Iterator[tuple[int, ReadResult]]:
        """``(index into items, ReadResult)`` for every item, each yielded as soon as it is done: in input order on
        one worker; on several, the items with the most :func:`work` are handed out first."""
        items = list(items)
        if not items:
            return
        # OpenVINO never runs in the calling process: loaded into the unit-test process (torch, pyarrow, mlflow, ...) it
        # corrupted the interpreter's heap, a segfault in CPython's tuple free list minutes later even when no image
        # went through it; a spawned worker holds only the OCR stack
        inline = self.spec.runtime != "openvino"
        if inline and (self.workers == 1 or len(items) == 1 and self._executor is None):
            if self._engine is None:
                self._engine = self.spec.build()
            for i, (data, source) in enumerate(items):
                yield i, read_one(self._engine, data, source, self.max_pixels)
            return
        if self._executor is None:
            # all `workers`, whatever this first call holds (OpenVINO's may hold one image): a spawn pool starts its
            # processes only as submitted work needs them
            self._executor = ProcessPoolExecutor(max_workers=self.workers,
                                                 mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_init_worker, initargs=(self.spec, self.max_pixels))
        cost = [work(data, self.spec.engine) for data, _ in items]
        order = sorted(range(len(items)), key=lambda i: -cost[i])  # stable: equal work keeps input order
        futures = {self._executor.submit(_work, items[i]): i for i in order}  # the executor hands them out FIFO
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        self._engine = None
