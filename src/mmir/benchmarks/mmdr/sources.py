"""Source-policy rules by domain (spec §5.3): prohibited, authoritative, acceptable.

Used when the evidence judge answers ``source_category = "unknown"`` and for the diversity term E_div.
"""

from __future__ import annotations

import urllib.parse

PROHIBITED_MARKERS: tuple[str, ...] = (
    "reddit.com", "quora.com", "zhihu.com", "weibo.com", "x.com", "twitter.com", "facebook.com",
    "tiktok.com", "instagram.com", "medium.com", "blogspot.", "substack.com", "stackexchange.com",
)
AUTHORITATIVE_SUFFIXES: tuple[str, ...] = (".gov", ".edu", ".int")
AUTHORITATIVE_MARKERS: tuple[str, ...] = ("who.int", "un.org", "worldbank.org", "imf.org", "oecd.org")
CATEGORIES = ("authoritative", "acceptable", "prohibited", "unknown")
LOCAL = "local"


def domain_of(url: str) -> str:
    """Lower-cased host of ``url``; ``"local"`` for ``file://``; ``""`` when there is none.

    For our offline-corpus URIs ``mmir://<dataset>/<doc_id>`` the domain is the dataset name.
    """
    try:
        p = urllib.parse.urlparse(url or "")
    except ValueError:
        return ""
    if (p.scheme or "").lower() == "file":
        return LOCAL
    return (p.netloc or "").lower()


def is_prohibited(domain: str) -> bool:
    """The domain contains a prohibited marker (social media, blogs, Q&A forums; substring match, as the
    code does, so ``x.com`` also matches e.g. ``dropbox.com``-like hosts ending in ``x.com``)."""
    d = (domain or "").lower()
    if not d or d == LOCAL:
        return False
    return any(m in d for m in PROHIBITED_MARKERS)


def is_authoritative(domain: str) -> bool:
    """The domain ends in .gov/.edu/.int or contains who.int, un.org, worldbank.org, imf.org or oecd.org."""
    d = (domain or "").lower()
    if not d or d == LOCAL:
        return False
    return d.endswith(AUTHORITATIVE_SUFFIXES) or any(m in d for m in AUTHORITATIVE_MARKERS)


def classify_source(domain: str) -> str:
    """Category from domain rules: ``unknown`` (no domain), ``acceptable`` (local), ``prohibited``,
    ``authoritative``, else ``acceptable``."""
    if not domain:
        return "unknown"
    if domain == LOCAL:
        return "acceptable"
    if is_prohibited(domain):
        return "prohibited"
    if is_authoritative(domain):
        return "authoritative"
    return "acceptable"
