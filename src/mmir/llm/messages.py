"""Chat messages: structure checks, image payloads, the canonical form hashed into cache keys, text-only
flattening and assembly from segments.

A message is ``{"role": "system"|"user"|"assistant", "content": str | parts}``; parts are ``{"type": "text"}``,
``{"type": "image", "image": bytes | PIL.Image.Image}`` (ours) and ``{"type": "image_url"}`` (passed through).
:func:`canonical_messages` / :func:`messages_sha256` define the cache key's ``input_sha256``.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmir.llm.errors import UnsupportedInputError

Message = Mapping[str, Any]

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def image_to_bytes(image: Any) -> tuple[bytes, str]:
    """``(data, mime)`` of an image part's payload (bytes-like, or a PIL image encoded as PNG).

    Raises:
        UnsupportedInputError: the payload is neither, or the bytes are not a recognisable image.
    """
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        for magic, mime in _MAGIC:
            if data.startswith(magic):
                return data, mime
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return data, "image/webp"
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data)) as im:
                fmt = im.format
        except (UnidentifiedImageError, OSError) as e:
            raise UnsupportedInputError(f"image part holds {len(data)} bytes that are not a known image format") from e
        return data, Image.MIME.get(fmt or "", "application/octet-stream")
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - pillow is a hard dependency
        raise UnsupportedInputError("image part is not bytes and Pillow is not installed") from e
    if isinstance(image, Image.Image):
        im = image
        if im.mode not in ("1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"):
            im = im.convert("RGBA" if "A" in im.mode else "RGB")
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    raise UnsupportedInputError(f"image part must hold bytes or a PIL image, got {type(image).__name__}")


def image_digest(image: Any) -> dict[str, str]:
    """Content hash of an image payload: sha256 of the encoded bytes, or for a PIL image of its mode, size
    and raw pixels (independent of how Pillow would encode it)."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        data, mime = image_to_bytes(image)
        return {"sha256": hashlib.sha256(data).hexdigest(), "mime": mime}
    from PIL import Image

    if isinstance(image, Image.Image):
        h = hashlib.sha256(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
        h.update(image.tobytes())
        return {"sha256": h.hexdigest(), "mime": "image/x-pil-pixels"}
    raise UnsupportedInputError(f"image part must hold bytes or a PIL image, got {type(image).__name__}")


def message_parts(message: Message, index: int) -> list[Mapping[str, Any]]:
    """The content of message ``index`` as a list of validated parts."""
    if not isinstance(message, Mapping):
        raise UnsupportedInputError(f"message {index} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise UnsupportedInputError(f"message {index} has no 'role' string")
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, Sequence) or isinstance(content, (bytes, bytearray)):
        raise UnsupportedInputError(f"message {index} ('{role}'): content must be a string or a list of parts")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            out.append(part)
        elif kind == "image" and "image" in part:
            out.append(part)
        elif kind == "image_url" and isinstance(part.get("image_url"), Mapping) and "url" in part["image_url"]:
            out.append(part)
        else:
            raise UnsupportedInputError(
                f"message {index} ('{role}'), part {j}: expected {{'type': 'text', 'text': str}}, "
                f"{{'type': 'image', 'image': bytes|PIL.Image}} or {{'type': 'image_url', 'image_url': {{'url': str}}}}"
            )
    return out


def validate_messages(messages: Sequence[Message]) -> None:
    """Check the structure of ``messages``; raises :class:`UnsupportedInputError` naming the bad message."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise UnsupportedInputError("messages must be a non-empty list of chat message dicts")
    for i, m in enumerate(messages):
        message_parts(m, i)


def has_images(messages: Sequence[Message]) -> bool:
    """True when any message holds an ``image`` or ``image_url`` part."""
    return any(p["type"] != "text" for i, m in enumerate(messages) for p in message_parts(m, i))


def canonical_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """JSON-serialisable form of ``messages`` for hashing: images become ``{"type": "image", "sha256": ...}``
    (sha256 of the encoded bytes; a PIL image by its mode, size and pixels), ``image_url`` parts keep their
    URL, string content becomes one text part. Other message keys (``name``, ...) are kept as strings."""
    validate_messages(messages)
    out = []
    for i, m in enumerate(messages):
        parts = []
        for p in message_parts(m, i):
            if p["type"] == "text":
                parts.append({"type": "text", "text": p["text"]})
            elif p["type"] == "image":
                parts.append({"type": "image", **image_digest(p["image"])})
            else:
                parts.append({"type": "image_url", "url": str(p["image_url"]["url"])})
        extra = {k: str(v) for k, v in m.items() if k not in ("role", "content")}
        out.append({"role": m["role"], "content": parts, **extra})
    return out


def messages_sha256(messages: Sequence[Message]) -> str:
    """Hex sha256 of :func:`canonical_messages` as canonical JSON."""
    blob = json.dumps(canonical_messages(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def text_only_messages(messages: Sequence[Message], backend: str) -> list[dict[str, str]]:
    """``messages`` with content flattened to plain strings (text parts joined by blank lines).

    Raises:
        UnsupportedInputError: a message holds an image part; ``backend`` names the backend in the message.
    """
    validate_messages(messages)
    out = []
    for i, m in enumerate(messages):
        texts = []
        for p in message_parts(m, i):
            if p["type"] != "text":
                raise UnsupportedInputError(
                    f"backend '{backend}' takes no images, but message {i} ('{m['role']}') holds an "
                    f"'{p['type']}' part; caption the image first or use a vision backend"
                )
            texts.append(p["text"])
        out.append({"role": m["role"], "content": "\n\n".join(texts)})
    return out



def decoded_image(image: Any, source: str) -> Any:
    """An image part's payload as an 8-bit RGB PIL image via :func:`mmir.data.images.decode_image`.

    Raises:
        UnsupportedInputError: the payload is not an image, is corrupt, or exceeds the pixel limit.
    """
    from PIL import Image

    from mmir.core.errors import DataError
    from mmir.data.images import decode_image, to_rgb

    if isinstance(image, Image.Image):
        return to_rgb(image)
    if not isinstance(image, (bytes, bytearray, memoryview)):
        raise UnsupportedInputError(f"{source}: image part must hold bytes or a PIL image, got {type(image).__name__}")
    try:
        return decode_image(bytes(image), source=source)
    except DataError as e:
        raise UnsupportedInputError(str(e)) from e


# ------------------------------------------------------------------------------------------ segments
@dataclass(frozen=True)
class ImagePart:
    """An image inside a prompt assembled from segments: encoded bytes (already thumbnailed by the caller)."""

    data: bytes


Segment = str | ImagePart


def user_messages(segments: Sequence[Segment]) -> list[dict[str, Any]]:
    """One user message from ``segments`` (strings and :class:`ImagePart` s); a plain string content when no image."""
    parts: list[dict[str, Any]] = []
    for seg in segments:
        if isinstance(seg, ImagePart):
            parts.append({"type": "image", "image": seg.data})
        elif parts and parts[-1]["type"] == "text":
            parts[-1]["text"] += seg
        elif seg:
            parts.append({"type": "text", "text": seg})
    if all(p["type"] == "text" for p in parts):
        return [{"role": "user", "content": "".join(p["text"] for p in parts)}]
    return [{"role": "user", "content": parts}]
