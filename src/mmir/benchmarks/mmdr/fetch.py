"""Evidence fetching for TRACE and MOSAIC (spec §5.2, §6.3): pluggable fetchers, a cache, and the
"patience" excerpt with its image-depth score (:func:`fetch_evidence`).

Fetchers (``fetch(url, *, referer=None) -> FetchResult``): :class:`HttpFetcher` (spec crawl defaults),
:class:`LocalCorpusFetcher` (``mmir://<dataset>/<doc_id>``), :class:`FileFetcher`, :class:`OfflineFetcher`
(refuses everything), :class:`RoutingFetcher` (by scheme) and :class:`CachedFetcher`.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mmir.benchmarks.mmdr.claims import is_image_dependent_claim
from mmir.benchmarks.mmdr.report_parser import (
    LOCAL_SCHEME,
    looks_like_image_url,
    tokenize_words,
)
from mmir.benchmarks.mmdr.sources import domain_of
from mmir.config.models.mmdr_evaluator import FetchConfig

DIRECT_IMAGE_FILE = "DIRECT_IMAGE_FILE"


@dataclass
class FetchResult:
    """Outcome of one fetch: ``ok`` (a non-empty body), lower-cased ``content_type``, ``data`` (``b""`` on failure)."""

    url: str
    ok: bool
    content_type: str = ""
    data: bytes = b""
    status: int | None = None
    error: str | None = None
    from_cache: bool = False

    def text(self) -> str:
        """The body decoded with the charset of the content type (else UTF-8), undecodable bytes dropped."""
        enc = "utf-8"
        m = re.search(r"charset=([A-Za-z0-9_\-]+)", self.content_type or "")
        if m:
            enc = m.group(1)
        try:
            return self.data.decode(enc, errors="ignore")
        except LookupError:
            return self.data.decode("utf-8", errors="ignore")

    @classmethod
    def failure(cls, url: str, error: str, status: int | None = None) -> FetchResult:
        """A failed fetch."""
        return cls(url=url, ok=False, status=status, error=error)


class Fetcher(Protocol):
    """Anything with ``fetch(url, *, referer=None) -> FetchResult``; it must not raise for a bad URL."""

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Fetch ``url`` (optionally with a ``Referer`` header); failures are returned, not raised."""
        ...


class HttpFetcher:
    """``http(s)`` through :mod:`urllib` with the crawl defaults of :class:`FetchConfig`."""

    def __init__(self, cfg: FetchConfig = FetchConfig()):
        self.cfg = cfg

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """GET ``url`` (at most ``max_bytes``); network and HTTP errors become failed results."""
        if not re.match(r"^https?://", url or "", re.IGNORECASE):
            return FetchResult.failure(url, "not an http(s) URL")
        headers = {"User-Agent": self.cfg.user_agent}
        if referer:
            headers["Referer"] = referer
        req = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as resp:
                ct = (resp.headers.get("Content-Type") or "").lower()
                data = resp.read(self.cfg.max_bytes)
                status = getattr(resp, "status", None)
        except urllib.error.HTTPError as e:
            return FetchResult.failure(url, f"http {e.code}", status=e.code)
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as e:
            return FetchResult.failure(url, f"{type(e).__name__}: {e}")
        if not data:
            return FetchResult(url=url, ok=False, content_type=ct, status=status, error="empty body")
        return FetchResult(url=url, ok=True, content_type=ct, data=data, status=status)


class OfflineFetcher:
    """Refuses every URL: ``error = "offline: <reason>"``. Use it to keep a run off the network."""

    def __init__(self, reason: str = "network fetching disabled"):
        self.reason = reason

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Always a failed result."""
        return FetchResult.failure(url, f"offline: {self.reason}")


Resolved = str | bytes | tuple[str, str | bytes] | None


class LocalCorpusFetcher:
    """Resolves our offline URIs ``mmir://<dataset>/<doc_id>`` through ``resolve(dataset, doc_id)``.

    ``resolve`` returns text, bytes, ``(content_type, str|bytes)`` or ``None`` (unknown document).
    """

    def __init__(self, resolve: Callable[[str, str], Resolved], scheme: str = LOCAL_SCHEME):
        self.resolve, self.scheme = resolve, scheme

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Resolve ``url``; a wrong scheme, a missing dataset or document gives a failed result."""
        p = urllib.parse.urlparse(url or "")
        if (p.scheme or "").lower() != self.scheme:
            return FetchResult.failure(url, f"not a {self.scheme}:// URL")
        dataset, doc_id = p.netloc, urllib.parse.unquote(p.path.lstrip("/"))
        if not dataset or not doc_id:
            return FetchResult.failure(url, f"expected {self.scheme}://<dataset>/<doc_id>")
        got = self.resolve(dataset, doc_id)
        if got is None:
            return FetchResult.failure(url, f"unknown document {doc_id!r} in dataset {dataset!r}", status=404)
        if isinstance(got, tuple):
            ct, body = got
        elif isinstance(got, str):
            ct, body = "text/plain; charset=utf-8", got
        else:
            ct, body = mimetypes.guess_type(doc_id)[0] or "application/octet-stream", got
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        if not data:
            return FetchResult(url=url, ok=False, content_type=ct.lower(), error="empty document")
        return FetchResult(url=url, ok=True, content_type=ct.lower(), data=data, status=200)


def file_url_path(url: str) -> Path:
    """Local path of a ``file://`` URL (``/C:/...`` Windows forms are handled)."""
    p = urllib.parse.unquote(urllib.parse.urlparse(url).path or "")
    if re.match(r"^/[A-Za-z]:/", p):
        p = p[1:]
    return Path(p)


class FileFetcher:
    """``file://`` URLs and plain local paths, read from disk (content type guessed from the name)."""

    def __init__(self, max_bytes: int = 50_000_000):
        self.max_bytes = max_bytes

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Read the file; a missing or unreadable file gives a failed result."""
        path = file_url_path(url) if (url or "").lower().startswith("file://") else Path(url)
        try:
            with path.open("rb") as fh:
                data = fh.read(self.max_bytes)
        except OSError as e:
            return FetchResult.failure(url, f"{type(e).__name__}: {e}", status=404)
        ct = mimetypes.guess_type(str(path))[0] or "application/octet-stream"
        return FetchResult(url=url, ok=bool(data), content_type=ct, data=data, error=None if data else "empty file")


class RoutingFetcher:
    """Dispatch by URL scheme (``{"http": f, "https": f, "mmir": g, "file": h}``); paths without a scheme
    go to ``"file"``; a scheme with no fetcher gives a failed result."""

    def __init__(self, routes: Mapping[str, Fetcher]):
        self.routes = {k.lower(): v for k, v in routes.items()}

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Fetch through the route of ``url``'s scheme."""
        scheme = (urllib.parse.urlparse(url or "").scheme or "file").lower()
        if len(scheme) == 1:  # a Windows drive letter, not a scheme
            scheme = "file"
        f = self.routes.get(scheme)
        if f is None:
            return FetchResult.failure(url, f"no fetcher for scheme {scheme!r}")
        return f.fetch(url, referer=referer)


def default_fetcher(
    *,
    online: bool = False,
    resolve_local: Callable[[str, str], Resolved] | None = None,
    cfg: FetchConfig = FetchConfig(),
    cache_dir: str | Path | None = None,
) -> CachedFetcher:
    """The usual stack: a :class:`CachedFetcher` over a :class:`RoutingFetcher` with ``http(s)`` through
    :class:`HttpFetcher` when ``online`` (else :class:`OfflineFetcher`), ``mmir://`` through
    ``resolve_local`` when given, and ``file://`` / paths through :class:`FileFetcher`."""
    web: Fetcher = HttpFetcher(cfg) if online else OfflineFetcher()
    routes: dict[str, Fetcher] = {"http": web, "https": web, "file": FileFetcher()}
    if resolve_local is not None:
        routes[LOCAL_SCHEME] = LocalCorpusFetcher(resolve_local)
    return CachedFetcher(RoutingFetcher(routes), cache_dir=cache_dir)


class CachedFetcher:
    """Per-URL cache in front of another fetcher (spec §3: in-process cache per URL, failures included).

    Args:
        cache_dir: optional persistent cache (``<sha256(url)>.json`` + ``.bin``), successes only unless
            ``persist_failures``.
    """

    def __init__(self, inner: Fetcher, cache_dir: str | Path | None = None, persist_failures: bool = False):
        self.inner = inner
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.persist_failures = persist_failures
        self._mem: dict[str, FetchResult] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _paths(self, url: str) -> tuple[Path, Path]:
        h = hashlib.sha256(url.encode("utf-8")).hexdigest()
        assert self.cache_dir is not None
        return self.cache_dir / f"{h}.json", self.cache_dir / f"{h}.bin"

    def _load(self, url: str) -> FetchResult | None:
        if self.cache_dir is None:
            return None
        meta_p, data_p = self._paths(url)
        if not meta_p.is_file():
            return None
        meta = json.loads(meta_p.read_text(encoding="utf-8"))
        if meta.get("url") != url:
            return None
        data = data_p.read_bytes() if data_p.is_file() else b""
        return FetchResult(url=url, ok=bool(meta["ok"]), content_type=meta.get("content_type", ""), data=data,
                           status=meta.get("status"), error=meta.get("error"))

    def _store(self, res: FetchResult) -> None:
        if self.cache_dir is None or (not res.ok and not self.persist_failures):
            return
        from mmir.core.io import write_bytes, write_text

        meta_p, data_p = self._paths(res.url)
        write_bytes(data_p, res.data)
        meta = {k: v for k, v in asdict(res).items() if k not in ("data", "from_cache")}
        write_text(meta_p, json.dumps(meta, ensure_ascii=False, sort_keys=True) + "\n")

    def fetch(self, url: str, *, referer: str | None = None) -> FetchResult:
        """Cached result for ``url`` (``from_cache=True``), else the inner fetcher's (then cached)."""
        if referer:
            return self.inner.fetch(url, referer=referer)
        with self._lock:
            hit = self._mem.get(url)
        if hit is None:
            hit = self._load(url)
            if hit is not None:
                with self._lock:
                    self._mem[url] = hit
        if hit is not None:
            with self._lock:
                self.hits += 1
            return FetchResult(**{**asdict(hit), "from_cache": True})
        res = self.inner.fetch(url)
        with self._lock:
            self.misses += 1
            self._mem[url] = res
        self._store(res)
        return res


# --------------------------------------------------------------------------------------------- patience
_TAG_RE = re.compile(r"<[^>]+>")
_SCRIPT_STYLE_RE = re.compile(r"(?is)<(script|style)[^>]*>.*?</\1>")
_IMG_TAG_RE = re.compile(r"(?is)<img\b[^>]*>")
_SRC_RE = re.compile(r"""(?is)\bsrc\s*=\s*["']([^"']+)["']""")
_ALT_RE = re.compile(r"""(?is)\balt\s*=\s*["']([^"']+)["']""")
_WS_RE = re.compile(r"\s+")


def html_to_text(html: str, max_chars: int) -> str:
    """Visible text of an HTML page: script/style dropped, tags replaced by spaces, whitespace collapsed,
    cut to ``max_chars``."""
    h = _SCRIPT_STYLE_RE.sub(" ", html or "")
    h = re.sub(r"(?is)<br\s*/?>", "\n", h)
    h = re.sub(r"(?is)</p\s*>", "\n\n", h)
    h = _TAG_RE.sub(" ", h)
    return _WS_RE.sub(" ", h).strip()[:max_chars]


def image_candidates(html: str, max_scan_chars: int, window: int = 500) -> list[dict[str, Any]]:
    """``<img>`` tags with a ``src`` in the first ``max_scan_chars`` of the raw HTML, in page order, each
    ``{"src", "alt", "pos", "ctx", "rank"}`` (rank 1 = first; ctx = tag-free text within ``window``
    characters either side)."""
    h = (html or "")[:max_scan_chars]
    out = []
    for m in _IMG_TAG_RE.finditer(h):
        tag = m.group(0)
        src = _SRC_RE.search(tag)
        if not src:
            continue
        alt = _ALT_RE.search(tag)
        pos = m.start()
        ctx = _WS_RE.sub(" ", _TAG_RE.sub(" ", h[max(0, pos - window) : min(len(h), pos + window)])).strip()
        out.append({"src": src.group(1).strip(), "alt": alt.group(1).strip() if alt else "", "pos": pos, "ctx": ctx})
    for i, it in enumerate(out):
        it["rank"] = i + 1
    return out


def image_relevance(claim: str, alt: str, ctx: str) -> float:
    """|claim words ∩ (alt + context) words| / |claim words| (lower-cased word sets; 0 for no claim words)."""
    cw = {w.lower() for w in tokenize_words(claim)}
    if not cw:
        return 0.0
    bag = {w.lower() for w in tokenize_words(f"{alt or ''} {ctx or ''}")}
    return len(cw & bag) / len(cw)


def depth_score_from_rank(rank: int, cfg: FetchConfig = FetchConfig()) -> float:
    """Depth credit of the best image's rank (spec §5.2): 1.0 up to rank 3, 0.10 from rank 25, linear
    ``1 - 0.9*(rank-3)/22`` in between."""
    if rank <= cfg.ideal_image_rank:
        return 1.0
    if rank >= cfg.max_image_rank:
        return cfg.min_depth
    t = (rank - cfg.ideal_image_rank) / (cfg.max_image_rank - cfg.ideal_image_rank)
    return max(0.0, min(1.0, 1.0 - (1.0 - cfg.min_depth) * t))


@dataclass
class Evidence:
    """What the evidence judge sees for one claim-URL pair: ``excerpt``, ``depth_score`` (§5.2), ``meta``."""

    excerpt: str
    depth_score: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def is_direct_image(self) -> bool:
        """A direct image or local file (skipped by the text judge, kept for MOSAIC)."""
        return str(self.meta.get("evidence_type") or "").upper() == DIRECT_IMAGE_FILE


def _stub(url: str, fetch_ok: bool, note: str, cfg: FetchConfig) -> str:
    return (f"EVIDENCE TYPE: {DIRECT_IMAGE_FILE}\nIMAGE_URL: {url}\nFETCH_OK: {fetch_ok}\n"
            f"NOTE: {note}\n")[: cfg.stub_chars]


def fetch_evidence(url: str, claim: str, patience_chars: int, fetcher: Fetcher, cfg: FetchConfig = FetchConfig()) -> Evidence:
    """Excerpt and depth score of one pair (spec §5.2, ``fetch_evidence_excerpt_with_patience``).

    ``file://`` and image URLs/content types give a DIRECT_IMAGE_FILE stub; a failed fetch ``""`` (depth 1.0);
    a non-HTML body its first 40,000 characters (depth 1.0); HTML the visible text cut to ``min(40,000,
    patience)``, with image depth when the claim has an image cue: 1.0 at rank <= 3 to 0.10 at rank >= 25,
    0.45 for best relevance < 0.05, 0.30 with no ``<img>``.
    """
    if (url or "").lower().startswith("file://"):
        exists = file_url_path(url).exists()
        meta = {"content_type": mimetypes.guess_type(str(file_url_path(url)))[0] or "", "domain": "local",
                "image_found": True, "best_image": {"src": url, "alt": "", "rank": 1}, "fetch_ok": exists,
                "evidence_type": DIRECT_IMAGE_FILE}
        note = "Local file evidence is not parsed in the text pipeline; pixels are checked by MOSAIC."
        return Evidence(_stub(url, exists, note, cfg), 1.0, meta)

    res = fetcher.fetch(url)
    ct = res.content_type or ""
    body = res.text() if res.ok else ""
    meta: dict[str, Any] = {"content_type": ct, "domain": domain_of(url), "image_found": False, "best_image": None,
                            "fetch_ok": bool(body), "fetch_error": res.error}
    if looks_like_image_url(url) or ct.startswith("image/"):
        meta.update(image_found=True, best_image={"src": url, "alt": "", "rank": 1}, evidence_type=DIRECT_IMAGE_FILE)
        note = "Image pixels are not parsed in the text pipeline; pixels are checked by MOSAIC."
        return Evidence(_stub(url, meta["fetch_ok"], note, cfg), 1.0, meta)
    if not body:
        return Evidence("", 1.0, meta)
    if not ("text/html" in ct or "<html" in body.lower()):
        return Evidence(body[: cfg.max_text_chars], 1.0, meta)

    excerpt = html_to_text(body, min(cfg.max_text_chars, patience_chars))
    depth = 1.0
    if is_image_dependent_claim(claim) and not looks_like_image_url(url):
        imgs = image_candidates(body, min(len(body), patience_chars), cfg.context_window)
        if imgs:
            best, best_rel = None, -1.0
            for it in imgs:
                rel = image_relevance(claim, it["alt"], it["ctx"])
                if rel > best_rel:
                    best, best_rel = it, rel
            assert best is not None
            meta["image_found"] = True
            meta["best_image"] = {"src": best["src"], "alt": best["alt"], "rank": int(best["rank"]), "relevance": best_rel}
            depth = cfg.low_relevance_depth if best_rel < cfg.low_relevance else depth_score_from_rank(int(best["rank"]), cfg)
            excerpt = (
                excerpt[: cfg.hint_excerpt_chars]
                + "\n\nIMAGE_CONTEXT_HINT:\n"
                + f"- img_rank: {best['rank']}\n- img_alt: {best['alt']}\n- img_src: {best['src']}\n"
                + f"- local_text: {best['ctx'][: cfg.hint_context_chars]}\n"
            )
        else:
            depth = cfg.no_image_depth
    return Evidence(excerpt, float(depth), meta)
