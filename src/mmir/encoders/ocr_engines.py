"""OCR engines behind one call, ``engine.read(rgb_image) -> [OcrLine]`` (all lines, scores in [0, 1]):

- ``rapidocr``: PP-OCRv4 detection + recognition ONNX models of rapidocr-onnxruntime, on onnxruntime's CPU provider
  or, when onnxruntime offers it, its CUDA provider (:func:`resolve_device`); on a CPU, ``runtime="openvino"`` runs
  the same ONNX files on OpenVINO's CPU plugin in float32 (:class:`OpenVinoSession`);
- ``tesseract``: the ``tesseract`` binary (Debian ``tesseract-ocr``) through pytesseract; a line is a Tesseract
  text line (block, paragraph, line), its score the mean word confidence / 100.

:class:`EngineSpec` is what a worker process needs to build an engine (small, picklable); its :meth:`~EngineSpec.
identity` names everything of it that changes the text (library and binary versions, provider, language model
files) and is part of the OCR cache key (:mod:`mmir.encoders.ocr`). ``threads`` is not: it changes speed only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from mmir.core.errors import MmirError
from mmir.encoders.ocr_layout import OcrLine

log = logging.getLogger(__name__)

ENGINES = ("rapidocr", "tesseract")
#: what runs RapidOCR's ONNX models on a CPU (on CUDA: always onnxruntime)
RUNTIMES = ("onnxruntime", "openvino")
#: Tesseract page segmentation mode 11, sparse text (as much text as possible, in no particular order; the reading
#: order is mmir's layout rule): on the openstax figures (axis labels, scattered annotations) its character error
#: rate against RapidOCR is 0.38, against 0.50 with Tesseract's default 3 (fully automatic page segmentation), 30 images
TESSERACT_PSM = 11


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def cuda_available() -> bool:
    """onnxruntime offers the CUDA provider on a GPU (onnxruntime-gpu with a device)."""
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers() and onnxruntime.get_device() == "GPU"


def resolve_device(device: str | None) -> str:
    """``cpu`` or ``cuda``: ``None`` = cuda when :func:`cuda_available`, else cpu; ``cuda`` asked but not available
    falls back to cpu with a logged warning (the run goes on, only slower)."""
    if device == "cpu":
        return "cpu"
    if cuda_available():
        return "cuda"
    if device == "cuda":
        import onnxruntime

        log.warning("OCR device cuda asked, but onnxruntime %s offers only %s (install onnxruntime-gpu on a GPU machine): "
                    "running RapidOCR on cpu", onnxruntime.__version__, onnxruntime.get_available_providers())
    return "cpu"


@lru_cache(maxsize=None)
def tesseract_version() -> str:
    """``tesseract --version`` (e.g. ``5.3.0``).

    Raises:
        MmirError: the binary is missing (``apt-get install tesseract-ocr``).
    """
    import pytesseract

    try:
        return str(pytesseract.get_tesseract_version())
    except pytesseract.TesseractNotFoundError as e:
        raise MmirError("OCR engine tesseract: the tesseract binary is not installed or not on PATH "
                        "(Debian: apt-get install tesseract-ocr)") from e


@lru_cache(maxsize=None)
def tessdata_dir() -> Path:
    """The folder holding Tesseract's ``<lang>.traineddata`` (from ``tesseract --list-langs``)."""
    import pytesseract

    tesseract_version()
    out = subprocess.run([pytesseract.pytesseract.tesseract_cmd, "--list-langs"], capture_output=True, text=True, check=True)
    m = re.search(r'"([^"]+)"', out.stdout + out.stderr)
    if not m:
        raise MmirError(f"OCR engine tesseract: cannot find the tessdata folder in `tesseract --list-langs`: {out.stdout!r}")
    return Path(m.group(1))


@lru_cache(maxsize=None)
def traineddata_hash(lang: str) -> str:
    """First 12 hex digits of sha256 over the ``.traineddata`` files of ``lang`` (``eng+deu``: both, in order).

    Raises:
        MmirError: a language model is not installed (Debian: ``tesseract-ocr-<lang>``).
    """
    h = hashlib.sha256()
    for part in lang.split("+"):
        f = tessdata_dir() / f"{part}.traineddata"
        if not f.is_file():
            raise MmirError(f"OCR engine tesseract: no language model {f} for lang {lang!r} "
                            f"(Debian: apt-get install tesseract-ocr-{part})")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class EngineSpec:
    """An OCR engine as a worker builds it: ``engine`` (rapidocr | tesseract), ``device`` (rapidocr: a resolved
    ``cpu`` | ``cuda``), ``lang`` (tesseract), ``threads`` (threads of one engine instance), ``runtime`` (rapidocr on
    cpu: onnxruntime | openvino)."""

    engine: str = "rapidocr"
    device: str = "cpu"
    lang: str = "eng"
    threads: int = 1
    runtime: str = "onnxruntime"

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"OCR engine {self.engine!r}: one of {', '.join(ENGINES)}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"OCR device {self.device!r}: resolve it first (resolve_device)")
        if self.runtime not in RUNTIMES:
            raise ValueError(f"OCR runtime {self.runtime!r}: one of {', '.join(RUNTIMES)}")
        if self.runtime == "openvino" and (self.engine != "rapidocr" or self.device != "cpu"):
            raise ValueError(f"OCR runtime openvino runs rapidocr on cpu, not {self.engine} on {self.device}")

    def identity(self) -> str:
        """What of the engine changes its text: e.g. ``rapidocr-onnxruntime==1.4.4;onnxruntime==1.32.0;provider=cpu``,
        ``rapidocr-onnxruntime==1.4.4;openvino==2026.4.1;precision=f32`` or
        ``tesseract==5.3.0;pytesseract==0.3.13;lang=eng:<sha12 of eng.traineddata>;psm=11``."""
        if self.engine == "rapidocr" and self.runtime == "openvino":
            return f"rapidocr-onnxruntime=={_dist_version('rapidocr-onnxruntime')};openvino=={_dist_version('openvino')};precision=f32"
        if self.engine == "rapidocr":
            return (f"rapidocr-onnxruntime=={_dist_version('rapidocr-onnxruntime')};onnxruntime=={_onnxruntime_version()};"
                    f"provider={self.device}")
        return (f"tesseract=={tesseract_version()};pytesseract=={_dist_version('pytesseract')};"
                f"lang={self.lang}:{traineddata_hash(self.lang)};psm={TESSERACT_PSM}")

    def build(self):
        """A new engine (loads the models; in a worker, once)."""
        return RapidOcrEngine(self) if self.engine == "rapidocr" else TesseractEngine(self)


#: onnxruntime session settings mmir adds to RapidOCR's own (which turn the CPU memory arena off). The arena keeps
#: the detection model's large activations (16-32 channels at 736+ x 1,000+ pixels) allocated between runs instead
#: of mapping and zeroing fresh pages every image: about 15-20% less CPU per image on the openstax images, with
#: bitwise the same outputs (bench/bench_ocr.py compares the captions). Spinning off: a worker never spins waiting
#: for work of its own (it runs one thread) and never takes a core from the other workers.
SESSION_CONFIG = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}


class TableDetPreProcess:
    """RapidOCR's detector input (its ``DetPreProcess``: resize, ``(x / 255 - mean) / std`` in float64, CHW, float32)
    with the normalisation read from a 256-entry table of RapidOCR's own function: the same float32 values, as the
    function maps each 8-bit value alone, in a quarter of the time (a 736 x 1,024 image: ~10 ms instead of ~35 ms).
    Other inputs than 8-bit 3-channel images go to RapidOCR's own code."""

    def __init__(self, pre):
        self.pre = pre
        self.table = pre.normalize(np.arange(256, dtype=np.uint8)[None, :, None].repeat(3, axis=2))[0].astype(np.float32)

    def __call__(self, img: np.ndarray) -> np.ndarray | None:
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            return self.pre(img)
        resized = self.pre.resize(img)
        if resized is None:
            return None
        out = np.empty((1, 3, *resized.shape[:2]), dtype=np.float32)
        for c in range(3):
            np.take(self.table[:, c], resized[:, :, c], out=out[0, c])
        return out


class OpenVinoSession:
    """Stands in for RapidOCR's ``OrtInferSession`` (``session(x) -> [outputs]``): the same ONNX file compiled by
    OpenVINO's CPU plugin with ``threads`` threads, in float32 (OpenVINO would pick bfloat16 on CPUs with AMX or
    AVX512-BF16, which changes the text). OpenVINO fuses PP-LCNetV3's element-wise blocks into the convolutions that
    onnxruntime runs as separate memory-bound passes: one worker reads the openstax images 1.7-1.9x as fast, outputs
    within 1e-5 (``bench/bench_ocr.py`` compares the captions)."""

    def __init__(self, model_path: str | Path, threads: int):
        import openvino

        # no CPU pinning: OpenVINO pins each process's threads from the first core on, so the pool's one-thread workers
        # would all share core 0. The kernels it builds per input shape (every image has its own) are kept in a cache of
        # 1,000 entries, not its default 5,000: a worker then stays at ~1.35 GB instead of growing past 1.75 GB by its
        # 200th image, at the same speed (openstax images, one worker)
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                  "ENABLE_CPU_PINNING": False, "CPU_RUNTIME_CACHE_CAPACITY": 1000}
        self.compiled = openvino.Core().compile_model(str(model_path), "CPU", config)
        self._request = self.compiled.create_infer_request()

    def __call__(self, x: np.ndarray) -> list[np.ndarray]:
        out = self._request.infer({0: x})
        return [np.array(v) for v in out.to_tuple()]  # copies: the request reuses its buffers on the next call


class RapidOcrEngine:
    """RapidOCR with ``spec.threads`` onnxruntime intra-op threads (and OpenCV threads), the spec's provider,
    :data:`SESSION_CONFIG` with onnxruntime's CPU memory arena, and :class:`TableDetPreProcess`; with
    ``spec.runtime == "openvino"`` its three models run on :class:`OpenVinoSession` instead."""

    def __init__(self, spec: EngineSpec):
        import cv2
        from rapidocr_onnxruntime import RapidOCR
        from rapidocr_onnxruntime.utils import infer_engine

        cv2.setNumThreads(spec.threads)
        cuda = spec.device == "cuda"
        # RapidOCR builds its SessionOptions in a static method and offers no way to pass one; wrap it while the
        # three sessions are built (the engine is built once per worker process, before any other thread runs)
        session_cls = infer_engine.OrtInferSession
        own = session_cls.__dict__["_init_sess_opts"]

        def options(config):
            opts = own.__func__(config)
            opts.enable_cpu_mem_arena = True
            for key, value in SESSION_CONFIG.items():
                opts.add_session_config_entry(key, value)
            return opts

        session_cls._init_sess_opts = staticmethod(options)
        try:
            self._ocr = RapidOCR(intra_op_num_threads=spec.threads, inter_op_num_threads=1,
                                 det_use_cuda=cuda, cls_use_cuda=cuda, rec_use_cuda=cuda)
        finally:
            session_cls._init_sess_opts = own
        if spec.runtime == "openvino":
            # the attribute RapidOCR 1.4 calls its session in each part (the recogniser's differs)
            for part, attr in ((self._ocr.text_det, "infer"), (self._ocr.text_cls, "infer"), (self._ocr.text_rec, "session")):
                setattr(part, attr, OpenVinoSession(getattr(part, attr).session._model_path, spec.threads))
        det = self._ocr.text_det
        det.get_preprocess = lambda max_wh, own=det.get_preprocess: TableDetPreProcess(own(max_wh))

    def read(self, img) -> list[OcrLine]:
        """All recognised lines of an RGB PIL image."""
        bgr = np.ascontiguousarray(np.asarray(img)[:, :, ::-1])
        result, _elapse = self._ocr(bgr)
        return [OcrLine(tuple((float(x), float(y)) for x, y in box), str(text), float(score)) for box, text, score in result or []]


class TesseractEngine:
    """Tesseract through pytesseract's ``image_to_data`` (one ``tesseract`` process per image, ``OMP_THREAD_LIMIT``
    = ``spec.threads``)."""

    def __init__(self, spec: EngineSpec):
        import pytesseract

        traineddata_hash(spec.lang)  # fails early, naming the missing binary or language model
        os.environ["OMP_THREAD_LIMIT"] = str(spec.threads)  # read by the tesseract processes this one starts
        self._pt = pytesseract
        self._lang = spec.lang

    def read(self, img) -> list[OcrLine]:
        """Tesseract's text lines of an RGB PIL image: words of one (block, paragraph, line) joined by spaces, the box
        their union, the score their mean confidence / 100 (words with confidence -1 or no text are left out)."""
        d = self._pt.image_to_data(img, lang=self._lang, config=f"--psm {TESSERACT_PSM}", output_type=self._pt.Output.DICT)
        lines: dict[tuple[int, int, int], list[int]] = {}
        for i, word in enumerate(d["text"]):
            if int(d["level"][i]) == 5 and str(word).strip() and float(d["conf"][i]) >= 0:
                lines.setdefault((d["block_num"][i], d["par_num"][i], d["line_num"][i]), []).append(i)
        out = []
        for idx in lines.values():
            x0 = min(d["left"][i] for i in idx)
            y0 = min(d["top"][i] for i in idx)
            x1 = max(d["left"][i] + d["width"][i] for i in idx)
            y1 = max(d["top"][i] + d["height"][i] for i in idx)
            box = ((float(x0), float(y0)), (float(x1), float(y0)), (float(x1), float(y1)), (float(x0), float(y1)))
            score = sum(float(d["conf"][i]) for i in idx) / len(idx) / 100.0
            out.append(OcrLine(box, " ".join(str(d["text"][i]).strip() for i in idx), score))
        return out
