"""mmir.data.images: every image kind decodes to 8-bit RGB, bad bytes raise errors naming the source."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

from mmir.core.errors import DataError
from mmir.data.images import (
    BLANK_SIZE,
    CorruptImage,
    ImageTally,
    ImageTooLarge,
    blank_image,
    decode_image,
    image_size,
    load_image_for_role,
    resolve_inside,
)


def _encode(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _px(img: Image.Image, xy) -> tuple[int, int, int]:
    return tuple(int(v) for v in img.getpixel(xy))


def _check_rgb(img: Image.Image, size) -> None:
    assert img.mode == "RGB"
    assert img.size == size
    assert np.asarray(img).dtype == np.uint8


def test_plain_rgb_png_roundtrip():
    arr = np.random.default_rng(0).integers(0, 256, (7, 9, 3), dtype=np.uint8)
    img = decode_image(_encode(Image.fromarray(arr), "PNG"), source="t.png")
    _check_rgb(img, (9, 7))
    np.testing.assert_array_equal(np.asarray(img), arr)


def test_rgba_composited_on_white():
    im = Image.new("RGBA", (4, 2), (255, 0, 0, 0))  # fully transparent red
    im.putpixel((1, 0), (0, 0, 255, 255))  # opaque blue
    im.putpixel((2, 0), (0, 0, 0, 128))  # half-transparent black
    out = decode_image(_encode(im, "PNG"), source="rgba.png")
    _check_rgb(out, (4, 2))
    assert _px(out, (0, 0)) == (255, 255, 255)
    assert _px(out, (1, 0)) == (0, 0, 255)
    assert all(abs(c - 127) <= 1 for c in _px(out, (2, 0)))


def test_la_composited_on_white():
    im = Image.new("LA", (3, 1), (0, 0))  # transparent black
    im.putpixel((1, 0), (50, 255))
    out = decode_image(_encode(im, "PNG"), source="la.png")
    _check_rgb(out, (3, 1))
    assert _px(out, (0, 0)) == (255, 255, 255)
    assert _px(out, (1, 0)) == (50, 50, 50)


def test_palette_with_transparency_composited_on_white():
    im = Image.new("P", (3, 1), 0)
    im.putpalette([0, 0, 0, 0, 255, 0] + [0] * (254 * 3))  # index 0 black, index 1 green
    im.putpixel((1, 0), 1)
    raw = _encode(im, "PNG", transparency=0)  # index 0 is transparent
    assert Image.open(io.BytesIO(raw)).mode == "P"
    out = decode_image(raw, source="p.png")
    assert _px(out, (0, 0)) == (255, 255, 255)
    assert _px(out, (1, 0)) == (0, 255, 0)


def test_palette_gif_with_transparency():
    im = Image.new("P", (2, 1), 0)
    im.putpalette([9, 9, 9, 200, 10, 10] + [0] * (254 * 3))
    im.putpixel((1, 0), 1)
    out = decode_image(_encode(im, "GIF", transparency=0), source="t.gif")
    assert _px(out, (0, 0)) == (255, 255, 255)
    assert _px(out, (1, 0)) == (200, 10, 10)


def test_cmyk_jpeg_and_tiff():
    im = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # pure red in CMYK
    for fmt in ("JPEG", "TIFF"):
        out = decode_image(_encode(im, fmt), source=f"cmyk.{fmt}")
        _check_rgb(out, (8, 8))
        r, g, b = _px(out, (4, 4))
        assert r > 240 and g < 15 and b < 15, (fmt, (r, g, b))


def test_16bit_greyscale_scaled_to_8bit():
    arr = np.array([[0, 257 * 100, 65535]], dtype=np.uint16)
    im = Image.fromarray(arr)
    raw = _encode(im, "PNG")
    assert Image.open(io.BytesIO(raw)).mode.startswith("I")
    out = decode_image(raw, source="g16.png")
    _check_rgb(out, (3, 1))
    assert [_px(out, (x, 0)) for x in range(3)] == [(0, 0, 0), (100, 100, 100), (255, 255, 255)]


def test_16bit_tiff_scaled_to_8bit():
    arr = np.array([[1000, 30000]], dtype=np.uint16)
    out = decode_image(_encode(Image.fromarray(arr), "TIFF"), source="g16.tif")
    assert _px(out, (0, 0))[0] == round(1000 / 257)
    assert _px(out, (1, 0))[0] == round(30000 / 257)


def test_exif_orientation_applied():
    # 4 wide x 2 high, left half red, right half blue; orientation 6 = rotate 90 degrees clockwise on display
    arr = np.zeros((32, 64, 3), dtype=np.uint8)
    arr[:, :32] = (255, 0, 0)
    arr[:, 32:] = (0, 0, 255)
    exif = Image.Exif()
    exif[0x0112] = 6
    raw = _encode(Image.fromarray(arr), "JPEG", exif=exif.tobytes(), quality=95)
    out = decode_image(raw, source="rot.jpg")
    _check_rgb(out, (32, 64))  # rotated: now 32 wide, 64 high
    top, bottom = _px(out, (16, 8)), _px(out, (16, 56))
    assert top[0] > 200 and top[2] < 60  # red half on top after a clockwise turn
    assert bottom[2] > 200 and bottom[0] < 60


def test_animated_gif_gives_first_frame():
    frames = [Image.new("RGB", (5, 5), c) for c in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    assert Image.open(io.BytesIO(buf.getvalue())).n_frames == 3
    out = decode_image(buf.getvalue(), source="anim.gif")
    _check_rgb(out, (5, 5))
    assert _px(out, (2, 2)) == (255, 0, 0)


def test_animated_webp_gives_first_frame():
    frames = [Image.new("RGB", (16, 16), c) for c in ((0, 200, 0), (200, 0, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, format="WEBP", save_all=True, append_images=frames[1:], lossless=True)
    out = decode_image(buf.getvalue(), source="anim.webp")
    assert _px(out, (8, 8)) == (0, 200, 0)


@pytest.mark.parametrize("fmt,kw", [("WEBP", {"lossless": True}), ("BMP", {}), ("TIFF", {}), ("PNG", {})])
def test_lossless_formats_exact(fmt, kw):
    arr = np.random.default_rng(1).integers(0, 256, (6, 10, 3), dtype=np.uint8)
    out = decode_image(_encode(Image.fromarray(arr), fmt, **kw), source=f"x.{fmt}")
    np.testing.assert_array_equal(np.asarray(out), arr)


def test_rgba_webp_composited():
    im = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    out = decode_image(_encode(im, "WEBP", lossless=True), source="a.webp")
    assert _px(out, (1, 1)) == (255, 255, 255)


def test_truncated_bytes_raise_corrupt_naming_source():
    arr = np.random.default_rng(2).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    raw = _encode(Image.fromarray(arr), "PNG")
    with pytest.raises(CorruptImage) as ei:
        decode_image(raw[: len(raw) // 2], source="docs.parquet:dom/img_1.png")
    assert "docs.parquet:dom/img_1.png" in str(ei.value)
    assert isinstance(ei.value, DataError)
    jpg = _encode(Image.fromarray(arr), "JPEG")
    with pytest.raises(CorruptImage):
        decode_image(jpg[:200], source="cut.jpg")


@pytest.mark.parametrize("data", [b"", os.urandom(0) + b"\x00" * 10, bytes(range(256)) * 4, b"GIF89a garbage"])
def test_random_or_empty_bytes_raise_corrupt(data):
    with pytest.raises(CorruptImage, match="src-x"):
        decode_image(data, source="src-x")


def test_non_bytes_input_raises_corrupt():
    with pytest.raises(CorruptImage):
        decode_image("not bytes", source="s")  # type: ignore[arg-type]


def test_bomb_over_max_pixels_names_count_and_limit():
    raw = _encode(Image.new("L", (200, 100), 0), "PNG")
    with pytest.raises(ImageTooLarge) as ei:
        decode_image(raw, source="bomb.png", max_pixels=10_000)
    e = ei.value
    assert (e.pixels, e.max_pixels) == (20_000, 10_000)
    msg = str(e)
    assert "bomb.png" in msg and "20,000" in msg and "10,000" in msg and "200x100" in msg
    assert decode_image(raw, source="ok.png", max_pixels=20_000).size == (200, 100)


def test_image_size_reads_header_only():
    raw = _encode(Image.new("RGB", (30, 20)), "PNG")
    assert image_size(raw, source="s") == (30, 20)
    with pytest.raises(CorruptImage):
        image_size(b"nope", source="s")


def test_blank_image():
    b = blank_image()
    _check_rgb(b, (BLANK_SIZE, BLANK_SIZE))
    assert BLANK_SIZE == 224
    assert np.asarray(b).min() == 255


def test_role_rule_and_tally():
    good = _encode(Image.new("RGB", (3, 3), (1, 2, 3)), "PNG")
    tally = ImageTally(max_examples=1)
    assert load_image_for_role(good, source="g", role="corpus", domain="d", tally=tally).size == (3, 3)
    assert load_image_for_role(b"xx", source="c1", role="corpus", domain="d", tally=tally) is None
    assert load_image_for_role(b"yy", source="c2", role="corpus", domain="d", tally=tally) is None
    q = load_image_for_role(b"zz", source="q1", role="query", domain="e", tally=tally)
    assert q.size == (224, 224) and np.asarray(q).min() == 255
    big = load_image_for_role(good, source="q2", role="query", domain="e", tally=tally, max_pixels=4)
    assert np.asarray(big).min() == 255
    assert tally.counts["d"] == {"ok": 1, "corrupt": 2, "too_large": 0, "dropped": 2, "blank_substituted": 0}
    assert tally.counts["e"] == {"ok": 0, "corrupt": 1, "too_large": 1, "dropped": 0, "blank_substituted": 2}
    assert [s for s, _ in tally.examples["d"]] == ["c1"]  # max_examples=1
    m = tally.metrics()
    assert m["images/d/dropped"] == 2.0 and m["images/e/too_large"] == 1.0
    rep = tally.report()
    assert rep["counts"]["e"]["blank_substituted"] == 2 and "blank" in rep["rule"]
    other = ImageTally()
    other.record_ok("d", 5)
    tally.merge(other)
    assert tally.counts["d"]["ok"] == 6 and tally.total("corrupt") == 3
    with pytest.raises(ValueError):
        load_image_for_role(good, source="g", role="doc", domain="d")  # type: ignore[arg-type]


def test_resolve_inside_accepts_relative(tmp_path):
    (tmp_path / "a").mkdir()
    p = resolve_inside(tmp_path, "a/b.png")
    assert p == (tmp_path / "a" / "b.png").resolve()
    assert resolve_inside(tmp_path, "a/../c.png") == (tmp_path / "c.png").resolve()


@pytest.mark.parametrize(
    "bad", ["/etc/passwd", "../x.png", "a/../../x.png", "C:\\x.png", "\\\\server\\share", "", "a\0b"]
)
def test_resolve_inside_rejects_escapes(tmp_path, bad):
    with pytest.raises(DataError):
        resolve_inside(tmp_path, bad)


def test_resolve_inside_rejects_symlink_leaving_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sub" / "link").symlink_to(outside)
    (root / "inner").symlink_to(root / "sub")
    with pytest.raises(DataError, match="escapes"):
        resolve_inside(root, "sub/link/secret.png")
    assert resolve_inside(root, "inner/x.png") == (root / "sub" / "x.png").resolve()
