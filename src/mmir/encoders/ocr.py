"""``ocr`` captioner: the text printed in an image, read with RapidOCR (PP-OCRv4 ONNX, offline on CPU).

Lines in reading order (:func:`reading_order`): rows top to bottom joined with newlines, lines left to right
joined with spaces; lines below ``min_score`` dropped. Cached in SQLite under ``sha256(engine_version || image
bytes)``, the engine version naming the rapidocr release, threshold and layout rule.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mmir.data.images import DEFAULT_MAX_PIXELS, decode_image

#: bump when the layout rule (row grouping, joining) changes: it is part of every cache key
LAYOUT_VERSION = "rows-v1"


@dataclass(frozen=True)
class OcrLine:
    """One recognised line: ``box`` = four ``(x, y)`` corners in pixels, ``text``, recognition ``score`` in [0, 1]."""

    box: tuple[tuple[float, float], ...]
    text: str
    score: float

    @property
    def top(self) -> float:
        return min(p[1] for p in self.box)

    @property
    def bottom(self) -> float:
        return max(p[1] for p in self.box)

    @property
    def left(self) -> float:
        return min(p[0] for p in self.box)

    @property
    def cy(self) -> float:
        return (self.top + self.bottom) / 2


def reading_order(lines: Sequence[OcrLine]) -> list[list[OcrLine]]:
    """Group lines into rows (top to bottom, within half the row's median line height), each sorted left to right."""
    rows: list[list[OcrLine]] = []
    for ln in sorted(lines, key=lambda l: (l.cy, l.left)):
        if rows:
            row = rows[-1]
            centre = sum(l.cy for l in row) / len(row)
            height = float(np.median([l.bottom - l.top for l in row + [ln]]))
            if abs(ln.cy - centre) <= max(height, 1.0) / 2:
                row.append(ln)
                continue
        rows.append([ln])
    return [sorted(r, key=lambda l: l.left) for r in rows]


def lines_to_text(lines: Sequence[OcrLine]) -> str:
    """Text of the lines in reading order: a space between items of a row, a newline between rows."""
    return "\n".join(" ".join(l.text.strip() for l in row if l.text.strip()) for row in reading_order(lines)).strip()


class OcrCaptioner:
    """Image -> text with RapidOCR, cached in SQLite (``cache_path=None`` disables caching).

    Args:
        min_score: lines recognised with a lower score are dropped (RapidOCR's default is 0.5).

    Raises (on first use):
        ImportError: rapidocr-onnxruntime is not installed (``pip install rapidocr-onnxruntime==1.4.4``).
    """

    name = "ocr"

    def __init__(self, cache_path: str | Path | None = None, *, min_score: float = 0.5, engine=None,
                 max_pixels: int = DEFAULT_MAX_PIXELS):
        self.min_score = float(min_score)
        self.max_pixels = max_pixels
        self._engine = engine
        try:
            lib_version = importlib.metadata.version("rapidocr-onnxruntime")
        except importlib.metadata.PackageNotFoundError:
            lib_version = "unknown"
        self.engine_version = f"rapidocr-onnxruntime=={lib_version};min_score={self.min_score};{LAYOUT_VERSION}"
        self.calls = 0  # OCR engine runs (cache misses) in this process
        self._db = None
        if cache_path is not None:
            cache_path = Path(cache_path)
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(cache_path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS ocr (key TEXT PRIMARY KEY, engine TEXT, text TEXT, lines TEXT)"
            )
            self._db.commit()

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

    def _get_engine(self):
        if self._engine is None:
            from rapidocr_onnxruntime import RapidOCR

            self._engine = RapidOCR()
        return self._engine

    def read_lines(self, data: bytes, *, source: str = "image") -> list[OcrLine]:
        """Recognised lines with ``score >= min_score``, unordered (no cache).

        Raises:
            CorruptImage, ImageTooLarge: from :func:`~mmir.data.images.decode_image`, naming ``source``.
        """
        img = decode_image(data, source=source, max_pixels=self.max_pixels)
        bgr = np.ascontiguousarray(np.asarray(img)[:, :, ::-1])
        result, _elapse = self._get_engine()(bgr)
        self.calls += 1
        lines = []
        for box, text, score in result or []:
            if float(score) >= self.min_score and str(text).strip():
                lines.append(OcrLine(tuple((float(x), float(y)) for x, y in box), str(text), float(score)))
        return lines

    def caption(self, data: bytes, *, source: str = "image") -> str:
        """The image's text in reading order (``""`` when none), from the cache when present.

        Raises:
            CorruptImage, ImageTooLarge: the bytes do not decode (not cached).
        """
        return self.caption_many([data], sources=[source])[0]

    def caption_many(self, datas: Sequence[bytes], *, sources: Sequence[str] | None = None) -> list[str]:
        """Captions for many images; cached ones are not recomputed, new ones are stored as they finish."""
        sources = list(sources) if sources is not None else [f"image[{i}]" for i in range(len(datas))]
        if len(sources) != len(datas):
            raise ValueError(f"{len(datas)} images but {len(sources)} sources")
        keys = [self.key(d) for d in datas]
        found = self._lookup(keys)
        out: list[str] = []
        for data, key, src in zip(datas, keys, sources, strict=True):
            if key not in found:
                lines = self.read_lines(data, source=src)
                text = lines_to_text(lines)
                self._store(key, text, lines)
                found[key] = text
            out.append(found[key])
        return out

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
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
