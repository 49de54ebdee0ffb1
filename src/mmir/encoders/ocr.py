"""``ocr`` captioner: the text printed in an image, read with RapidOCR (PP-OCRv4 ONNX on OpenVINO or onnxruntime, offline, CPU or CUDA) or
Tesseract (:mod:`mmir.encoders.ocr_engines`), on ``workers`` processes (:mod:`mmir.encoders.ocr_pool`).

Lines in reading order (:func:`~mmir.encoders.ocr_layout.reading_order`): rows top to bottom joined with newlines,
lines left to right joined with spaces; lines below ``min_score`` dropped. Cached in SQLite under
``sha256(engine_version || NUL || image bytes)``; ``engine_version`` names the engine with its library versions and
the settings that change the text (provider, language models), ``min_score`` and the layout rule.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mmir.core.errors import MmirError
from mmir.core.paths import project_path
from mmir.data.images import DEFAULT_MAX_PIXELS, decode_image
from mmir.encoders.ocr_engines import EngineSpec, resolve_device
from mmir.encoders.ocr_layout import LAYOUT_VERSION, OcrLine, lines_to_text, reading_order
from mmir.encoders.ocr_pool import OcrPool

__all__ = ["LAYOUT_VERSION", "OcrCaptioner", "OcrLine", "OcrText", "lines_to_text", "reading_order"]

#: errors kept per captioner for the job log (the counts are complete)
MAX_ERRORS_KEPT = 5


@dataclass(frozen=True)
class OcrText:
    """The caption of one image: ``text`` ("" when none or on failure), ``status`` ``cached`` | ``read`` |
    ``corrupt`` (does not decode) | ``failed`` (the engine raised), and ``error`` (the message) for the last two."""

    text: str
    status: str
    error: str | None = None


class OcrCaptioner:
    """Image -> text with an OCR engine, cached in SQLite (``cache_path=None`` disables caching).

    Args:
        engine: ``rapidocr`` (rapidocr-onnxruntime) or ``tesseract`` (the binary through pytesseract).
        min_score: lines recognised with a lower score are dropped (RapidOCR's default is 0.5).
        device: rapidocr's onnxruntime provider, ``cpu`` | ``cuda`` | ``None`` (cuda when offered);
            :func:`~mmir.encoders.ocr_engines.resolve_device` falls back to cpu with a logged warning.
        lang: Tesseract language models (``eng``, ``eng+deu``).
        workers: processes that OCR the cache misses (1 = in this process, OpenVINO's on one worker), each with one engine thread.
        runtime: what runs rapidocr's models on a CPU, ``onnxruntime`` | ``openvino`` (:class:`~mmir.encoders.
            ocr_engines.OpenVinoSession`); on cuda always onnxruntime.

    Raises (on construction):
        MmirError: engine tesseract without the binary or a language model; ImportError: rapidocr-onnxruntime or
            pytesseract missing.
    """

    name = "ocr"

    def __init__(self, cache_path: str | Path | None = None, *, engine: str = "rapidocr", min_score: float = 0.5,
                 device: str | None = None, lang: str = "eng", workers: int = 1, max_pixels: int = DEFAULT_MAX_PIXELS,
                 runtime: str = "openvino"):
        self.min_score = float(min_score)
        self.max_pixels = max_pixels
        device = resolve_device(device) if engine == "rapidocr" else "cpu"
        runtime = runtime if engine == "rapidocr" and device == "cpu" else "onnxruntime"  # a GPU runs onnxruntime's CUDA
        self.spec = EngineSpec(engine, device, lang, threads=1, runtime=runtime)
        self.engine_version = f"{self.spec.identity()};min_score={self.min_score};{LAYOUT_VERSION}"
        self.workers = workers
        self.calls = 0  # engine runs (cache misses) in this process's captioner
        self.counts: Counter[str] = Counter()  # statuses of every image asked for
        self.errors: list[str] = []  # the first MAX_ERRORS_KEPT error messages
        self._pool = OcrPool(self.spec, workers, max_pixels)
        self._db = None
        if cache_path is not None:
            cache_path = project_path(str(cache_path))  # ~ and $VARS: the default lies under ~/.cache/mmir
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(cache_path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS ocr (key TEXT PRIMARY KEY, engine TEXT, text TEXT, lines TEXT)"
            )
            self._db.commit()

    @classmethod
    def from_config(cls, captioner, cache_path: str | Path | None, workers: int = 1) -> OcrCaptioner:
        """From an :class:`~mmir.config.models.OCRCaptioner` (the validated ``captioners.<name>`` entry)."""
        return cls(cache_path, engine=captioner.engine, min_score=captioner.min_score, device=captioner.device,
                   lang=captioner.lang, workers=workers, runtime=captioner.runtime)

    @property
    def cache_spec(self) -> dict:
        """What determines a caption: the captioner name and the engine version string."""
        return {"captioner": self.name, "engine": self.engine_version}

    def key(self, data: bytes) -> str:
        """Cache key of one image: hex ``sha256(engine_version || NUL || image bytes)``."""
        h = hashlib.sha256(self.engine_version.encode())
        h.update(b"\0")
        h.update(data)
        return h.hexdigest()

    def cached(self, datas: Sequence[bytes]) -> list[str | None]:
        """The cached caption of each image under this captioner's key, ``None`` for a miss (no engine runs)."""
        keys = [self.key(d) for d in datas]
        found = self._lookup(keys)
        return [found.get(k) for k in keys]

    def read_many(self, datas: Sequence[bytes], *, sources: Sequence[str] | None = None) -> list[OcrText]:
        """One :class:`OcrText` per image, in order. Cached images are not recomputed; the misses (each distinct
        image once) are read on the pool (largest first) and stored as they finish, so an interrupted run resumes. A corrupt image
        or an engine failure is an ``OcrText`` with its error, counted in :attr:`counts`, never raised or cached."""
        sources = list(sources) if sources is not None else [f"image[{i}]" for i in range(len(datas))]
        if len(sources) != len(datas):
            raise ValueError(f"{len(datas)} images but {len(sources)} sources")
        keys = [self.key(d) for d in datas]
        found: dict[str, OcrText] = {k: OcrText(t, "cached") for k, t in self._lookup(keys).items()}
        todo = {k: (d, s) for k, d, s in zip(keys, datas, sources, strict=True) if k not in found}
        todo_keys = list(todo)
        for i, res in self._pool.map_unordered(todo.values()):
            key = todo_keys[i]
            if res.error is not None:
                found[key] = OcrText("", "corrupt" if res.corrupt else "failed", res.error)
                continue
            self.calls += 1
            lines = [l for l in res.lines if l.score >= self.min_score and l.text.strip()]
            text = lines_to_text(lines)
            self._store(key, text, lines)
            found[key] = OcrText(text, "read")
        out = [found[k] for k in keys]
        self.counts.update(o.status for o in out)
        # the first errors in input order (the pool finishes images in any order)
        errors = [found[k].error for k in todo_keys if found[k].error is not None]
        self.errors += errors[: max(0, MAX_ERRORS_KEPT - len(self.errors))]
        return out

    def caption_many(self, datas: Sequence[bytes], *, sources: Sequence[str] | None = None) -> list[str]:
        """Captions for many images (:meth:`read_many`), raising on the first bad one.

        Raises:
            CorruptImage, ImageTooLarge: an image does not decode (naming its source); MmirError: the engine failed.
        """
        sources = list(sources) if sources is not None else [f"image[{i}]" for i in range(len(datas))]
        out = self.read_many(datas, sources=sources)
        for o, data, src in zip(out, datas, sources, strict=True):
            if o.status == "corrupt":
                decode_image(data, source=src, max_pixels=self.max_pixels)  # raises the decoding error again
            if o.status in ("corrupt", "failed"):
                raise MmirError(f"OCR failed: {o.error}")
        return [o.text for o in out]

    def caption(self, data: bytes, *, source: str = "image") -> str:
        """The image's text in reading order (``""`` when none), from the cache when present.

        Raises:
            CorruptImage, ImageTooLarge: the bytes do not decode (not cached); MmirError: the engine failed.
        """
        return self.caption_many([data], sources=[source])[0]

    def _lookup(self, keys: Sequence[str]) -> dict[str, str]:
        if self._db is None or not keys:
            return {}
        found: dict[str, str] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 900):
            chunk = uniq[i : i + 900]
            q = f"SELECT key, text FROM ocr WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(dict(self._db.execute(q, chunk).fetchall()))
        return found

    def _store(self, key: str, text: str, lines: Sequence[OcrLine]) -> None:
        if self._db is None:
            return
        payload = json.dumps([{"box": l.box, "text": l.text, "score": l.score} for l in lines], ensure_ascii=False)
        self._db.execute("INSERT OR REPLACE INTO ocr VALUES (?, ?, ?, ?)", (key, self.engine_version, text, payload))
        self._db.commit()

    def close(self) -> None:
        self._pool.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
