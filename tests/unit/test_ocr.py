"""mmir.encoders.ocr: reading order, SQLite cache, and real RapidOCR on an image rendered with Pillow."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image, ImageDraw, ImageFont

from mmir.data.images import CorruptImage
from mmir.encoders.ocr import OcrCaptioner, OcrLine, lines_to_text, reading_order


def _line(text, x, y, w=80, h=20):
    return OcrLine(((x, y), (x + w, y), (x + w, y + h), (x, y + h)), text, 0.9)


def test_reading_order_rows_then_left_to_right():
    lines = [
        _line("d", 300, 62),  # row 2, right (slightly lower than "c")
        _line("b", 200, 10),  # row 1, right
        _line("c", 10, 58),  # row 2, left
        _line("a", 10, 12),  # row 1, left (a few pixels lower than "b")
        _line("e", 50, 120),  # row 3
    ]
    rows = reading_order(lines)
    assert [[l.text for l in r] for r in rows] == [["a", "b"], ["c", "d"], ["e"]]
    assert lines_to_text(lines) == "a b\nc d\ne"
    assert lines_to_text([]) == ""


def _rendered_png() -> bytes:
    img = Image.new("RGB", (760, 260), "white")
    d = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=56)
    d.text((30, 30), "FIRST", fill="black", font=font)
    d.text((30, 150), "SECOND", fill="black", font=font)
    d.text((480, 150), "THIRD", fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def rapidocr():
    return pytest.importorskip("rapidocr_onnxruntime", reason="rapidocr-onnxruntime is not installed")


def test_ocr_reads_rendered_words_and_caches(rapidocr, tmp_path):
    data = _rendered_png()
    db = tmp_path / "ocr" / "cache.sqlite"
    with OcrCaptioner(db) as cap:
        text = cap.caption(data, source="rendered.png")
        assert cap.calls == 1
        assert text.split("\n")[0].strip().upper() == "FIRST"
        words = text.upper().split()
        assert words.index("FIRST") < words.index("SECOND") < words.index("THIRD")
        assert text.count("\n") == 1  # two rows
        assert cap.caption(data) == text and cap.calls == 1  # cached
    with OcrCaptioner(db) as again:  # a rerun: free (no engine is even loaded)
        assert again.caption_many([data, data]) == [text, text]
        assert again.calls == 0 and again._pool._engine is None
    with OcrCaptioner(db, min_score=0.6) as other:  # another engine setting: new key
        assert other.key(data) != OcrCaptioner(None).key(data)


def test_ocr_blank_image_gives_empty_text(rapidocr):
    buf = io.BytesIO()
    Image.new("RGB", (100, 60), "white").save(buf, format="PNG")
    assert OcrCaptioner(None).caption(buf.getvalue()) == ""


def test_ocr_corrupt_bytes_name_source(tmp_path):
    with OcrCaptioner(tmp_path / "c.sqlite") as cap, pytest.raises(CorruptImage, match="bad.png"):
        cap.caption(b"garbage", source="bad.png")


def test_cache_key_depends_on_engine_version_and_bytes():
    a, b = OcrCaptioner(None), OcrCaptioner(None, min_score=0.7)
    assert a.key(b"x") != a.key(b"y")
    assert a.key(b"x") != b.key(b"x")
    assert "rapidocr-onnxruntime==" in a.engine_version and a.cache_spec["captioner"] == "ocr"
    assert a.key(b"x") == hashlib.sha256(a.engine_version.encode() + b"\0" + b"x").hexdigest()
