"""Safe image decoding for every image that enters the pipeline (query images, corpus images, OCR input).

:func:`decode_image` returns a loaded 8-bit RGB image whatever the format: transparency composited on white;
other modes converted (16-bit greyscale ``value / 257``, float data in [0, 1] x 255); EXIF orientation
applied; first frame of an animation. Failures name the source: :class:`CorruptImage`, :class:`ImageTooLarge`
(more than ``max_pixels``, default Pillow's 89,478,485, checked from the header).

Rule for bad images (:func:`load_image_for_role`, counted by :class:`ImageTally`): a bad corpus image (MM-BRIGHT
§3.1) is dropped from what is encoded and ranked (its judgments stay: :mod:`mmir.data.multimodal`); a bad query
image is replaced by the blank image (:func:`blank_image`, white 224x224), as the paper (§4.1) encodes a query
without an image, so the query set never changes. :func:`resolve_inside` guards file paths read from data.
"""

from __future__ import annotations

import io
import logging
import os
import re
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Literal

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from mmir.core.errors import DataError

log = logging.getLogger(__name__)

#: Pillow's default decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``), in pixels.
DEFAULT_MAX_PIXELS = 89_478_485
#: Side of the blank image that stands in for a missing or broken query image (MM-BRIGHT §4.1), in pixels.
BLANK_SIZE = 224

Role = Literal["corpus", "query"]


class CorruptImage(DataError):
    """Image bytes that cannot be decoded (empty, not an image, truncated, broken stream).

    ``file`` (from :class:`DataError`) is the source the caller passed, e.g. ``parquet-file:image-path``.
    """

    def __init__(self, source: str, message: str, row: int | None = None, field: str | None = None):
        super().__init__(source, f"corrupt image: {message}", row=row, field=field)
        self.source = source


class ImageTooLarge(DataError):
    """An image whose pixel count exceeds the decompression-bomb limit.

    Attributes ``pixels`` (width x height from the header) and ``max_pixels`` (the limit) are kept for reports.
    """

    def __init__(self, source: str, pixels: int, max_pixels: int, size: tuple[int, int] | None = None,
                 row: int | None = None, field: str | None = None):
        dims = f"{size[0]}x{size[1]} = " if size else ""
        super().__init__(
            source,
            f"image too large: {dims}{pixels:,} pixels exceeds the limit of {max_pixels:,} pixels "
            "(possible decompression bomb; raise max_pixels if the image is legitimate)",
            row=row,
            field=field,
        )
        self.source, self.pixels, self.max_pixels = source, pixels, max_pixels


def blank_image(size: int = BLANK_SIZE) -> Image.Image:
    """A white ``size`` x ``size`` RGB image: the stand-in for a query without (usable) image (MM-BRIGHT §4.1)."""
    return Image.new("RGB", (size, size), (255, 255, 255))


def _scale_to_uint8(img: Image.Image) -> Image.Image:
    """16/32-bit integer or float greyscale -> 8-bit ``L`` (see the module docstring for the scaling rule)."""
    arr = np.asarray(img)
    if img.mode == "F":
        arr = arr.astype(np.float64)
        if arr.size and np.nanmax(arr) <= 1.0:
            arr = arr * 255.0
        out = np.clip(np.nan_to_num(arr), 0, 255)
    else:
        arr = arr.astype(np.int64)
        if img.mode.startswith("I;16") or (arr.size and arr.max() > 255):
            out = np.clip(arr, 0, 65535) / 257.0  # 16-bit full scale -> 8-bit full scale
        else:
            out = np.clip(arr, 0, 255)
    return Image.fromarray(np.rint(out).astype(np.uint8))


def _has_transparency(img: Image.Image) -> bool:
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        return True
    return "transparency" in img.info and img.mode in ("P", "L", "RGB", "1", "I", "I;16")


def to_rgb(img: Image.Image) -> Image.Image:
    """Any loaded Pillow image -> 8-bit RGB with the rules of the module docstring (transparency on white,
    16-bit scaled, CMYK converted). Returns ``img`` itself when it is already RGB."""
    if img.mode in ("I", "F") or img.mode.startswith("I;16"):
        # tRNS on 16-bit greyscale is rare; the scaled image is treated as opaque
        return _scale_to_uint8(img).convert("RGB")
    if _has_transparency(img):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if img.mode == "RGB":
        return img
    return img.convert("RGB")


def image_size(data: bytes, *, source: str) -> tuple[int, int]:
    """``(width, height)`` from the image header, without decoding pixels.

    Raises:
        CorruptImage: the bytes are not a readable image.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                return im.size
    except Image.DecompressionBombError as e:
        raise CorruptImage(source, f"header declares a huge image ({e})") from e
    except UnidentifiedImageError as e:
        raise CorruptImage(source, f"cannot identify image: {describe_bytes(bytes(data))}") from e
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise CorruptImage(source, f"{type(e).__name__}: {_clean(e)}") from e


def decode_image(data: bytes, *, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Decode image bytes into a loaded 8-bit RGB image (mode rules in the module docstring).

    Args:
        source: where the bytes come from (file, parquet row, image path); named in every error.
        max_pixels: decompression-bomb limit on width x height, checked before decoding.

    Returns:
        An RGB :class:`PIL.Image.Image` (pixels loaded, no file handle kept).

    Raises:
        CorruptImage: empty, unidentifiable, truncated or otherwise undecodable bytes.
        ImageTooLarge: ``width * height > max_pixels``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptImage(source, f"expected bytes, got {type(data).__name__}")
    if len(data) == 0:
        raise CorruptImage(source, "empty byte string")
    try:
        with warnings.catch_warnings():
            # our own max_pixels check below replaces Pillow's warning; Pillow's hard error is mapped below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(bytes(data)))
    except Image.DecompressionBombError as e:
        raise ImageTooLarge(source, _pixels_from_bomb_message(str(e)), max_pixels) from e
    except UnidentifiedImageError as e:
        raise CorruptImage(source, f"cannot identify image: {describe_bytes(bytes(data))}") from e
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise CorruptImage(source, f"cannot identify image ({type(e).__name__}: {_clean(e)})") from e
    with im:
        w, h = im.size
        if w <= 0 or h <= 0:
            raise CorruptImage(source, f"invalid size {w}x{h}")
        if w * h > max_pixels:
            raise ImageTooLarge(source, w * h, max_pixels, size=(w, h))
        try:
            if getattr(im, "n_frames", 1) > 1:
                im.seek(0)  # animated: first frame
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                im.load()
        except (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error) as e:
            raise CorruptImage(source, f"cannot decode pixels ({type(e).__name__}: {_clean(e)})") from e
        img = _apply_exif_orientation(im, source)
        rgb = to_rgb(img)
        # detach from the file object (convert() already copies; a plain RGB image is copied here)
        return rgb.copy() if (rgb is im or rgb is img) else rgb


def _apply_exif_orientation(im: Image.Image, source: str) -> Image.Image:
    try:
        out = ImageOps.exif_transpose(im)
    except (OSError, ValueError, KeyError, TypeError, SyntaxError, struct.error) as e:
        # broken EXIF does not make the pixels unusable: keep the image as stored, and say so
        log.warning("%s: EXIF orientation not applied (%s: %s)", source, type(e).__name__, e)
        return im
    return im if out is None else out


_OBJECT_REPR = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")


def _clean(exc: BaseException) -> str:
    """An exception message without object reprs (``<_io.BytesIO object at 0x7f…>`` names nothing useful:
    the caller names the real source)."""
    return _OBJECT_REPR.sub("the image bytes", str(exc))


def describe_bytes(data: bytes) -> str:
    """What undecodable image bytes look like, for messages: empty, SVG/XML or HTML markup (which Pillow
    cannot rasterise, whatever the file name says), or the first bytes in hex."""
    if not data:
        return "empty byte string"
    head = data[:512].lstrip().lower()
    if head.startswith(b"<svg") or (head.startswith(b"<?xml") and b"<svg" in data[:4096].lower()):
        return f"SVG markup ({len(data):,} bytes), not a raster image Pillow can decode"
    if head.startswith((b"<!doctype html", b"<html")):
        return f"HTML ({len(data):,} bytes), not an image"
    if head.startswith(b"<?xml"):
        return f"XML ({len(data):,} bytes), not an image"
    return f"not a format Pillow reads ({len(data):,} bytes, starting {data[:8].hex(' ')})"


def _pixels_from_bomb_message(msg: str) -> int:
    """Pillow's DecompressionBombError message: 'Image size (N pixels) exceeds limit of M pixels ...'."""
    m = re.search(r"\((\d+) pixels\)", msg)
    return int(m.group(1)) if m else -1


# ---------------------------------------------------------------------------------------------------------
# counting good and bad images
# ---------------------------------------------------------------------------------------------------------

@dataclass
class ImageTally:
    """Per-domain counts ``ok``, ``corrupt``, ``too_large``, ``dropped``, ``blank_substituted``, with failing examples."""

    max_examples: int = 5
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    _KEYS = ("ok", "corrupt", "too_large", "dropped", "blank_substituted")

    def _row(self, domain: str) -> dict[str, int]:
        return self.counts.setdefault(domain, {k: 0 for k in self._KEYS})

    def record_ok(self, domain: str, n: int = 1) -> None:
        """Count ``n`` images of ``domain`` that decoded fine."""
        self._row(domain)["ok"] += n

    def record_failure(self, domain: str, error: DataError, role: Role) -> None:
        """Count one failed image: its kind (corrupt / too large) and the action the rule takes for ``role``."""
        row = self._row(domain)
        row["too_large" if isinstance(error, ImageTooLarge) else "corrupt"] += 1
        row["dropped" if role == "corpus" else "blank_substituted"] += 1
        ex = self.examples.setdefault(domain, [])
        if len(ex) < self.max_examples:
            ex.append((getattr(error, "source", error.file), str(error)))

    def merge(self, other: ImageTally) -> None:
        """Add ``other``'s counts and examples (up to ``max_examples``) into this tally."""
        for dom, row in other.counts.items():
            mine = self._row(dom)
            for k, v in row.items():
                mine[k] = mine.get(k, 0) + v
        for dom, ex in other.examples.items():
            mine_ex = self.examples.setdefault(dom, [])
            mine_ex.extend(ex[: max(0, self.max_examples - len(mine_ex))])

    def total(self, key: str) -> int:
        """Sum of one count over all domains."""
        return sum(row.get(key, 0) for row in self.counts.values())

    def metrics(self, prefix: str = "images") -> dict[str, float]:
        """Flat ``{"<prefix>/<domain>/<count>": value}`` for MLflow ``log_metrics`` (MLflow keys allow ``/``)."""
        out: dict[str, float] = {}
        for dom in sorted(self.counts):
            for k, v in self.counts[dom].items():
                out[f"{prefix}/{dom}/{k}"] = float(v)
        return out

    def report(self) -> dict:
        """JSON-serialisable ``{"counts": ..., "examples": ..., "rule": ...}`` for run reports."""
        return {
            "counts": {d: dict(r) for d, r in sorted(self.counts.items())},
            "examples": {d: [list(e) for e in ex] for d, ex in sorted(self.examples.items())},
            "rule": "corrupt/too-large corpus images are dropped; query images are replaced by a blank "
            f"{BLANK_SIZE}x{BLANK_SIZE} white image",
        }


def load_image_for_role(
    data: bytes,
    *,
    source: str,
    role: Role,
    domain: str,
    tally: ImageTally | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> Image.Image | None:
    """Decode one image under the bad-image rule: a bad one gives ``None`` (corpus) or :func:`blank_image` (query).

    Raises:
        ValueError: ``role`` is not ``"corpus"`` or ``"query"``.
    """
    if role not in ("corpus", "query"):
        raise ValueError(f"role must be 'corpus' or 'query', got {role!r}")
    try:
        img = decode_image(data, source=source, max_pixels=max_pixels)
    except (CorruptImage, ImageTooLarge) as e:
        if tally is not None:
            tally.record_failure(domain, e, role)
        action = "dropped from the image corpus" if role == "corpus" else "replaced by the blank image"
        log.warning("%s (%s)", e, action)
        return None if role == "corpus" else blank_image()
    if tally is not None:
        tally.record_ok(domain)
    return img


# ---------------------------------------------------------------------------------------------------------
# paths from data files
# ---------------------------------------------------------------------------------------------------------

def check_relative(rel_path: str, root: str | os.PathLike) -> str:
    """Check, without touching the file system, that a path read from data stays inside the dataset; returns it.

    Raises:
        DataError: empty path, a NUL byte, an absolute path (POSIX ``/x``, Windows ``C:\\x`` or
            ``\\\\server``), or ``..`` steps that leave the dataset. ``file`` names the path.
    """
    if not rel_path or "\0" in rel_path:
        raise DataError(rel_path, f"invalid path (empty or NUL byte) in the dataset at {root}")
    if PurePosixPath(rel_path).is_absolute() or PureWindowsPath(rel_path).is_absolute() or PureWindowsPath(rel_path).drive:
        raise DataError(rel_path, f"absolute path not allowed; paths are relative to the dataset at {root}")
    depth = 0
    for part in PurePosixPath(rel_path.replace("\\", "/")).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            raise DataError(rel_path, f"path leaves the dataset at {root} through '..'")
    return rel_path


def resolve_inside(root: str | os.PathLike, rel_path: str | os.PathLike) -> Path:
    """Join a relative path read from data onto ``root`` (symlinks resolved) and check it stays inside ``root``.

    Returns:
        The resolved absolute :class:`~pathlib.Path` (the file need not exist).

    Raises:
        DataError: ``rel_path`` is empty, contains a NUL byte, is absolute (POSIX ``/x``, Windows ``C:\\x``
            or ``\\\\server``), or escapes ``root`` through ``..`` or a symlink. ``file`` names ``rel_path``.
    """
    rel = os.fspath(rel_path)
    if not rel or "\0" in rel:
        raise DataError(rel, f"invalid path (empty or NUL byte) under root {root}")
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        raise DataError(rel, f"absolute path not allowed; paths must be relative to {root}")
    root_resolved = Path(root).resolve()
    candidate = (root_resolved / rel).resolve()
    if candidate != root_resolved and root_resolved not in candidate.parents:
        raise DataError(rel, f"path escapes the root {root_resolved} (resolves to {candidate})")
    return candidate
