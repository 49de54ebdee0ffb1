"""Small HTTP helpers shared by the API clients (LLM backends, embedding endpoints)."""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date) response headers.

    ``headers`` is looked up with lower-case names (httpx headers are case-insensitive). Returns ``None``
    when neither header is present or parsable; never a negative number.
    """
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            log.debug("ignoring unparsable retry-after-ms header %r", ms)
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(ra)
        except (TypeError, ValueError):
            log.debug("ignoring unparsable retry-after header %r", ra)
            return None
        return max(0.0, when.timestamp() - time.time())
