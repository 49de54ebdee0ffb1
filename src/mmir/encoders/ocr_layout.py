"""OCR lines and their layout: :class:`OcrLine` (box, text, score) and the reading order every OCR engine's lines
are joined in (rows top to bottom joined with newlines, lines left to right joined with spaces)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
