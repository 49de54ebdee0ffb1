"""Image resolution for MOSAIC items (spec §6.3, ``resolve_best_image_for_item``).

Seeds: local paths and ``file://`` read from disk; direct image URLs downloaded (>= 1,024 bytes, non-HTML; one
referer retry on 401/403); web pages scored by candidate (``og:image`` 1.00, ``<source srcset>`` 0.85, ``<img>``
0.50-0.60 + 0.35*Jaccard(caption, alt+title), ``<a href=*.img>`` 0.30; top 18, up to 5 downloaded; the
social-preview quirk of spec §10.9 kept). Deviations: no ``r.jina.ai`` retry; bytes must decode (Pillow).
"""

from __future__ import annotations

import io
import math
import os
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from mmir.benchmarks.mmdr.fetch import Fetcher, FetchResult, file_url_path
from mmir.benchmarks.mmdr.report_parser import (
    LOCAL_SCHEME,
    looks_like_image_url,
    tokenize_words,
)

BAD_URL_WORDS = ("logo", "icon", "favicon", "avatar", "sprite", "placeholder", "default", "folder",
                 "loading", "blank", "spacer", "ads", "tracker")
REASONS = ("ok", "dead_link", "blocked", "not_image", "too_small_or_placeholder", "no_image_found", "download_failed")


@dataclass(frozen=True)
class ResolverConfig:
    """Resolver constants (spec §6.3): ``min_bytes`` 1,024; ``max_candidates`` 18; ``max_downloads`` 5;
    candidate base scores; the URL words that disqualify a candidate."""

    min_bytes: int = 1024
    max_candidates: int = 18
    max_downloads: int = 5
    meta_score: float = 1.00
    source_srcset_score: float = 0.85
    img_srcset_base: float = 0.60
    img_src_base: float = 0.50
    caption_weight: float = 0.35
    width_bonus_cap: float = 0.05
    anchor_score: float = 0.30
    bad_url_words: tuple[str, ...] = BAD_URL_WORDS


@dataclass
class ResolvedImage:
    """Outcome of resolving one seed; ``reason`` one of :data:`REASONS`."""

    ok: bool
    seed: str
    data: bytes | None = None
    content_type: str = ""
    image_url: str | None = None
    reason: str = "ok"
    detail: str = ""
    num_candidates: int = 0
    tried: list[str] = field(default_factory=list)


def _reason_from_fetch(res: FetchResult) -> str:
    msg = f"{res.status or ''} {res.error or ''}".lower()
    if res.status in (404, 410) or "404" in msg or "410" in msg or "not found" in msg or "unknown document" in msg:
        return "dead_link"
    if res.status in (401, 403) or "401" in msg or "403" in msg or "forbidden" in msg or "unauthorized" in msg:
        return "blocked"
    return "download_failed"


def _is_decodable_image(data: bytes) -> bool:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
        return True
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return False


def _jaccard(a: str, b: str) -> float:
    sa, sb = {w.lower() for w in tokenize_words(a)}, {w.lower() for w in tokenize_words(b)}
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


_ATTR = r"""\b{name}\s*=\s*["']([^"']*)["']"""


def _attr(tag: str, name: str) -> str | None:
    m = re.search(_ATTR.format(name=re.escape(name)), tag, re.IGNORECASE | re.DOTALL)
    return m.group(1).strip() if m else None


def _srcset_largest(srcset: str) -> tuple[str | None, float]:
    best, best_w = None, -1.0
    for part in srcset.split(","):
        bits = part.strip().split()
        if not bits:
            continue
        w = 0.0
        if len(bits) > 1 and bits[1][-1:] in ("w", "x"):
            try:
                w = float(bits[1][:-1]) * (1000.0 if bits[1].endswith("x") else 1.0)
            except ValueError:
                w = 0.0
        if w > best_w:
            best, best_w = bits[0], w
    return best, max(best_w, 0.0)


def page_image_candidates(html: str, page_url: str, caption: str, cfg: ResolverConfig = ResolverConfig()) -> list[tuple[str, float, float]]:
    """Scored image candidates of a web page: ``[(absolute url, score, width)]``, best first (spec §6.3)."""
    cands: list[tuple[str, float, float]] = []

    def add(u: str | None, score: float, width: float = 0.0) -> None:
        if not u or u.startswith("data:"):
            return
        cands.append((urllib.parse.urljoin(page_url, u), score, width))

    for tag in re.findall(r"<meta\b[^>]*>", html, re.IGNORECASE | re.DOTALL):
        key = (_attr(tag, "property") or _attr(tag, "name") or _attr(tag, "itemprop") or "").lower()
        if key in ("og:image", "og:image:url", "og:image:secure_url", "twitter:image", "twitter:image:src", "image"):
            add(_attr(tag, "content"), cfg.meta_score)
    for tag in re.findall(r"<link\b[^>]*>", html, re.IGNORECASE | re.DOTALL):
        if (_attr(tag, "rel") or "").lower() == "image_src":
            add(_attr(tag, "href"), cfg.meta_score)
    for tag in re.findall(r"<source\b[^>]*>", html, re.IGNORECASE | re.DOTALL):
        srcset = _attr(tag, "srcset")
        if srcset:
            u, w = _srcset_largest(srcset)
            add(u, cfg.source_srcset_score, w)
    for tag in re.findall(r"<img\b[^>]*>", html, re.IGNORECASE | re.DOTALL):
        jac = _jaccard(caption, f"{_attr(tag, 'alt') or ''} {_attr(tag, 'title') or ''}")
        srcset = _attr(tag, "srcset")
        if srcset:
            u, w = _srcset_largest(srcset)
            bonus = min(cfg.width_bonus_cap, math.log10(w) / 50.0) if w > 1 else 0.0
            add(u, cfg.img_srcset_base + cfg.caption_weight * jac + bonus, w)
        for name in ("src", "data-src", "data-original", "data-lazy-src", "data-url"):
            u = _attr(tag, name)
            if u:
                add(u, cfg.img_src_base + cfg.caption_weight * jac)
                break
    for tag in re.findall(r"<a\b[^>]*>", html, re.IGNORECASE | re.DOTALL):
        href = _attr(tag, "href")
        if href and looks_like_image_url(href):
            add(href, cfg.anchor_score)

    best: dict[str, tuple[str, float, float]] = {}
    for u, s, w in cands:
        low = u.lower()
        if any(b in low for b in cfg.bad_url_words):
            continue
        if u not in best or (s, w) > best[u][1:]:
            best[u] = (u, s, w)
    return sorted(best.values(), key=lambda c: (c[1], c[2]), reverse=True)[: cfg.max_candidates]


class ImageResolver:
    """Resolve MOSAIC seeds to image bytes through a :class:`~mmir.benchmarks.mmdr.fetch.Fetcher`.

    ``save_dir``: when given, each resolved image is also written there (``<n>.<ext>``) for audit.
    """

    def __init__(self, fetcher: Fetcher, cfg: ResolverConfig = ResolverConfig(), save_dir: str | Path | None = None):
        self.fetcher, self.cfg = fetcher, cfg
        self.save_dir = Path(save_dir) if save_dir is not None else None
        self._n = 0

    def _download(self, url: str, seed: str) -> ResolvedImage:
        res = self.fetcher.fetch(url)
        if not res.ok and res.status in (401, 403) and url.lower().startswith("http"):
            p = urllib.parse.urlparse(url)
            res = self.fetcher.fetch(url, referer=f"{p.scheme}://{p.netloc}/")
        if not res.ok:
            return ResolvedImage(False, seed, image_url=url, reason=_reason_from_fetch(res), detail=res.error or "")
        if "text/html" in res.content_type:
            return ResolvedImage(False, seed, image_url=url, reason="not_image", detail=f"not_image_content_type {res.content_type}")
        if len(res.data) < self.cfg.min_bytes:
            return ResolvedImage(False, seed, image_url=url, reason="too_small_or_placeholder", detail=f"too_small {len(res.data)} bytes")
        if not _is_decodable_image(res.data):
            return ResolvedImage(False, seed, image_url=url, reason="not_image", detail="bytes are not a decodable image")
        return ResolvedImage(True, seed, res.data, res.content_type, url)

    def _save(self, r: ResolvedImage) -> ResolvedImage:
        if self.save_dir is not None and r.ok and r.data:
            from mmir.core.io import write_bytes

            self._n += 1
            ext = Path(urllib.parse.urlparse(r.image_url or "").path).suffix.lower() or ".img"
            write_bytes(self.save_dir / f"{self._n:03d}{ext}", r.data)
        return r

    def resolve(self, seed: str, caption: str = "") -> ResolvedImage:
        """Image bytes for ``seed`` (see the module docstring); never raises for a bad seed."""
        s = (seed or "").strip()
        if not s:
            return ResolvedImage(False, seed, reason="no_image_found", detail="empty seed")
        low = s.lower()
        if low.startswith("file://") or (not re.match(r"^[a-z][a-z0-9+.-]*://", low) and os.path.exists(s)):
            path = file_url_path(s) if low.startswith("file://") else Path(s)
            try:
                data = path.read_bytes()
            except OSError as e:
                return ResolvedImage(False, seed, reason="dead_link", detail=f"{type(e).__name__}: {e}")
            if not _is_decodable_image(data):
                return ResolvedImage(False, seed, reason="not_image", detail="local file is not a decodable image")
            return self._save(ResolvedImage(True, seed, data, "", str(path)))
        if looks_like_image_url(s):
            return self._save(self._download(s, seed))
        res = self.fetcher.fetch(s)
        if not res.ok:
            return ResolvedImage(False, seed, reason=_reason_from_fetch(res), detail=res.error or "")
        if res.content_type.startswith("image/") or (low.startswith(f"{LOCAL_SCHEME}://") and _is_decodable_image(res.data)):
            if len(res.data) < self.cfg.min_bytes:
                return ResolvedImage(False, seed, reason="too_small_or_placeholder", detail=f"too_small {len(res.data)} bytes")
            if not _is_decodable_image(res.data):
                return ResolvedImage(False, seed, reason="not_image", detail="bytes are not a decodable image")
            return self._save(ResolvedImage(True, seed, res.data, res.content_type, s))
        html = res.text()
        if "html" not in res.content_type and "<html" not in html.lower() and "<img" not in html.lower():
            return ResolvedImage(False, seed, reason="no_image_found", detail=f"no images in a {res.content_type or 'plain'} document")
        cands = page_image_candidates(html, s, caption, self.cfg)
        if not cands:
            return ResolvedImage(False, seed, reason="no_image_found", num_candidates=0)
        last = ResolvedImage(False, seed, reason="download_failed", num_candidates=len(cands))
        tried: list[str] = []
        for u, _, _ in cands[: self.cfg.max_downloads]:
            tried.append(u)
            r = self._download(u, seed)
            if r.ok:
                r.num_candidates, r.tried = len(cands), tried
                return self._save(r)
            last = r
        last.num_candidates, last.tried = len(cands), tried
        if last.reason not in ("too_small_or_placeholder", "not_image"):
            last.reason = "download_failed"
        return last
