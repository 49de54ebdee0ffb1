"""Thumbnails of the images the query pages show (query images, gold and retrieved images), made once per image.

A thumbnail is a JPEG at most :data:`MAX_SIDE` pixels on its longer side (aspect kept, never enlarged), decoded by
:func:`mmir.data.images.decode_image` (EXIF orientation, transparency on white). It is made once into the cache
(``results/cache/thumbnails/<sha[:2]>/<sha256>-<side>-q<quality>.jpg``: the key holds the image's sha256 and every
setting that changes the thumbnail) and hard-linked (copied where links fail) into the report's
``queries/thumbs/``, so a rerun of the report decodes nothing again and the report folder stays self-contained.
An image that cannot be decoded gets no thumbnail (the page shows its path) and is counted.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mmir.core.io import write_bytes

log = logging.getLogger("mmir.reporting.thumbnails")

#: longer side of a thumbnail, in pixels
MAX_SIDE = 160
#: JPEG quality of a thumbnail (Pillow's scale, 1-95)
QUALITY = 70


@dataclass
class Thumbnails:
    """Thumbnails made into ``cache`` and placed into ``out`` (the report's ``queries/thumbs``).

    Counts: ``made`` (decoded and written to the cache), ``cached`` (found in the cache), ``placed`` (distinct files
    in ``out``), ``failed`` (undecodable images; ``failures``: their sources, first 20).
    """

    cache: Path
    out: Path
    max_side: int = MAX_SIDE
    quality: int = QUALITY
    made: int = 0
    cached: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)
    _placed: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self):
        self.cache, self.out = Path(self.cache), Path(self.out)

    @property
    def placed(self) -> int:
        return sum(v is not None for v in self._placed.values())

    def name(self, sha256: str) -> str:
        """The file name of an image's thumbnail (its cache key)."""
        return f"{sha256}-{self.max_side}-q{self.quality}.jpg"

    def render(self, data: bytes, source: str) -> bytes:
        """The JPEG thumbnail of image bytes.

        Raises:
            DataError: the bytes are not a decodable image (:class:`mmir.data.images.CorruptImage`, ``ImageTooLarge``).
        """
        from mmir.data.images import decode_image

        img = decode_image(data, source=source)
        img.thumbnail((self.max_side, self.max_side))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=self.quality, optimize=True)
        return buf.getvalue()

    def get(self, sha256: str, data, source: str) -> str | None:
        """The thumbnail's file name in :attr:`out` (made or taken from the cache, then placed); None when the image
        cannot be decoded (counted). ``data``: the image bytes, or a callable returning them (called on a miss only)."""
        from mmir.core.errors import DataError

        if sha256 in self._placed:
            return self._placed[sha256]
        name = self.name(sha256)
        cached = self.cache / name[:2] / name
        if cached.is_file():
            self.cached += 1
        else:
            try:
                write_bytes(cached, self.render(data() if callable(data) else data, source))
                self.made += 1
            except DataError as exc:
                self.failed += 1
                if len(self.failures) < 20:
                    self.failures.append(f"{source}: {exc}")
                self._placed[sha256] = None
                return None
        target = self.out / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(cached, target)
            except OSError:  # another file system, or links not allowed
                shutil.copyfile(cached, target)
        self._placed[sha256] = name
        return name

    def counts(self) -> dict[str, int]:
        return {"thumbnails": self.placed, "thumbnails_made": self.made, "thumbnails_cached": self.cached,
                "images_undecodable": self.failed}
