"""Credentials held in memory only: a wrapper whose repr never shows the value, and a scrubber for text
that leaves an object holding one (exception messages, log lines)."""

from __future__ import annotations


class Secret:
    """Holds a credential; its ``repr``/``str`` never show the value and it refuses to be pickled.

    ``reveal()`` returns the value, for the one place that must send it (an HTTP client).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __reduce__(self):  # never pickle the value
        raise TypeError("a secret cannot be pickled")


def scrub(text: str, secret: Secret | None, replacement: str = "<redacted>") -> str:
    """``text`` with every occurrence of the secret's value replaced by ``replacement``."""
    value = secret.reveal() if secret is not None else ""
    return text.replace(value, replacement) if value and value in text else text
