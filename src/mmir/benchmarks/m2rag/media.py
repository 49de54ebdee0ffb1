"""Image payloads for M2RAG prompts and pages: 512 px thumbnails, MIME types and data URIs (spec §2.2, §3, §6.5).

Thumbnails keep the aspect ratio and never enlarge (a distorting ``resize`` fallback as in the authors' code).
"""

from __future__ import annotations

import base64
import io
import logging

from mmir.data.images import decode_image
from mmir.llm.backends import image_to_bytes

log = logging.getLogger(__name__)

#: Side of the box images are shrunk into before they reach a model (spec §3, §6.5), in pixels.
THUMBNAIL_SIZE = 512
_LOSSLESS = {"image/png", "image/gif", "image/bmp"}


def thumbnail_bytes(data: bytes, *, size: int = THUMBNAIL_SIZE, source: str = "image") -> bytes:
    """Encoded ``data`` shrunk to fit ``size`` x ``size`` pixels (aspect kept, never enlarged, always re-encoded).

    Returns:
        PNG bytes for lossless sources (PNG/GIF/BMP), JPEG (quality 90) otherwise.

    Raises:
        mmir.data.images.CorruptImage / ImageTooLarge: undecodable bytes.
        ValueError: ``size < 1``.
    """
    if size < 1:
        raise ValueError(f"thumbnail size must be >= 1 px, got {size}")
    img = decode_image(data, source=source)
    try:
        _, mime = image_to_bytes(bytes(data))
    except ValueError:  # UnsupportedInputError: the header is not one we know; decode_image read it anyway
        mime = "application/octet-stream"
    try:
        img.thumbnail((size, size))
    except (OSError, ValueError) as e:  # the released code falls back to a plain (distorting) resize
        log.warning("%s: thumbnail failed (%s); resizing to %dx%d", source, e, size, size)
        img = img.resize((size, size))
    buf = io.BytesIO()
    if mime in _LOSSLESS:
        img.save(buf, format="PNG")
    else:
        img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def mime_type(data: bytes) -> str:
    """MIME type of encoded image bytes (``image/png``, ``image/jpeg``, ...).

    Raises:
        mmir.llm.backends.UnsupportedInputError: not a recognisable image.
    """
    return image_to_bytes(bytes(data))[1]


def data_uri(data: bytes) -> str:
    """``data:<mime>;base64,...`` URI of encoded image bytes, for self-contained HTML.

    Raises:
        mmir.llm.backends.UnsupportedInputError: not a recognisable image.
    """
    return f"data:{mime_type(data)};base64,{base64.b64encode(bytes(data)).decode('ascii')}"


def image_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels from the header of encoded bytes.

    Raises:
        mmir.data.images.CorruptImage: unreadable header.
    """
    from mmir.data.images import image_size as _size

    return _size(bytes(data), source="image")


__all__ = ["THUMBNAIL_SIZE", "data_uri", "image_size", "mime_type", "thumbnail_bytes"]
