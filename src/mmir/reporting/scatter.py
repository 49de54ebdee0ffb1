"""Per-query scatter plots of two systems (A on the vertical axis, B on the horizontal), as inline SVG.

Values (the primary measure, in [0, 1]) are binned on a :data:`GRID` × :data:`GRID` grid so a plot's size is bounded
whatever the number of queries (MM-BRIGHT: 2,803); a bin's circle grows with the square root of its count and its
``<title>`` gives the count and the bin. Points above the diagonal (A wins) are blue, below (B wins) orange, on it
grey. The plotted counts are the ``<svg>``'s ``data-*`` attributes (``data-n``, ``data-above``, ``data-below``,
``data-on``), so a reader or a test can check them. Text is escaped; the SVG loads nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from html import escape

from mmir.evaluation.compare import TIE_TOLERANCE, paired

#: bins per axis
GRID = 50
COLORS = {"above": "#1f5fbf", "below": "#d9730d", "on": "#7a8594"}


def _bin(v: float) -> int:
    return min(GRID - 1, max(0, int(float(v) * GRID)))


def _range(i: int) -> str:
    return f"{i / GRID:.2f}–{(i + 1) / GRID:.2f}"


def scatter_svg(a: Mapping[Hashable, float], b: Mapping[Hashable, float], name_a: str, name_b: str, size: int = 170,
                title: str | None = None) -> str:
    """An SVG scatter of ``a`` (y) against ``b`` (x) over their paired keys (values in [0, 1]; others clipped)."""
    pad, top = 30, 18 if title else 6
    inner = size - pad - 6
    keys = paired(a, b)
    bins: Counter = Counter()
    side = {"above": 0, "below": 0, "on": 0}
    for k in keys:
        x, y = float(b[k]), float(a[k])
        s = "on" if abs(y - x) <= TIE_TOLERANCE else "above" if y > x else "below"
        side[s] += 1
        bins[(_bin(x), _bin(y), s)] += 1
    h = size + top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="scatter" width="{size}" height="{h}" viewBox="0 0 {size} {h}" '
           f'role="img" data-n="{len(keys)}" data-above="{side["above"]}" data-below="{side["below"]}" data-on="{side["on"]}" '
           f'aria-label="{escape(f"{name_a} (y) against {name_b} (x), {len(keys)} queries")}">']
    if title:
        out.append(f'<text x="{pad}" y="12" font-size="11" font-weight="bold">{escape(title)}</text>')
    x0, y0 = pad, top + inner
    out.append(f'<rect x="{x0}" y="{top}" width="{inner}" height="{inner}" fill="#fafbfc" stroke="#c6ced8"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + inner}" y2="{top}" stroke="#b0b8c4" stroke-dasharray="3,3"/>')
    for t in (0, 0.5, 1):
        out.append(f'<text x="{x0 + t * inner:.1f}" y="{y0 + 11}" font-size="9" text-anchor="middle">{t:g}</text>')
        out.append(f'<text x="{x0 - 3}" y="{y0 - t * inner + 3:.1f}" font-size="9" text-anchor="end">{t:g}</text>')
    out.append(f'<text x="{x0 + inner / 2:.1f}" y="{y0 + 22}" font-size="10" text-anchor="middle">{escape(name_b)}</text>')
    out.append(f'<text x="10" y="{top + inner / 2:.1f}" font-size="10" text-anchor="middle" '
               f'transform="rotate(-90 10 {top + inner / 2:.1f})">{escape(name_a)}</text>')
    cell = inner / GRID
    for (bx, by, s), n in sorted(bins.items()):
        cx, cy = x0 + (bx + 0.5) * cell, y0 - (by + 0.5) * cell
        r = min(1.6 + 1.2 * (n ** 0.5 - 1), inner / 8)
        what = f'{n} quer{"y" if n == 1 else "ies"}: {escape(name_b)} {_range(bx)}, {escape(name_a)} {_range(by)}'
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{COLORS[s]}" fill-opacity="0.6"><title>{what}</title></circle>')
    out.append("</svg>")
    return "".join(out)
