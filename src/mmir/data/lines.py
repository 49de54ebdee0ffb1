"""Line-based text files (JSON-lines, TSV, TREC): bytes to text, and text to numbered lines.

Lines break at ``\\n`` only (a ``\\r`` before it is dropped): ``str.splitlines`` also breaks at U+0085, U+2028, U+2029,
``\\x0b``, ``\\x0c`` and ``\\x1c``-``\\x1e``, which JSON strings may hold (``json.dumps(ensure_ascii=False)`` writes the
first three as they are) and which ids may hold. A UTF-8 byte order mark at the start of a file is dropped (it would
otherwise glue itself to the first id or key). Line numbers are 1-based, as editors show them.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from mmir.core.errors import DataError

BOM = "\ufeff"
_FIELDS = re.compile(r"[ \t]+")


def decode(raw: bytes, file: str | Path) -> str:
    """UTF-8 ``raw`` as text without a leading byte order mark.

    Raises:
        DataError: bytes that are not UTF-8, naming the line and the byte offset.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(file, f"invalid UTF-8 at byte offset {exc.start} (byte 0x{raw[exc.start]:02x})", line=line) from exc
    return text[1:] if text.startswith(BOM) else text


def read_text(path: str | Path) -> str:
    """The text of a (``.gz``-compressed) UTF-8 file, its byte order mark dropped (:func:`decode`)."""
    path = Path(path)
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return decode(raw, path)


def numbered(text: str, file: str | Path = "the file", blanks: list[int] | None = None) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` for each line of ``text``, split at ``\\n`` only (a trailing ``\\r`` dropped);
    blank lines are skipped, their numbers counted (appended to ``blanks`` when given; the empty end after a last
    line break is no line).

    Raises:
        DataError: naming ``file``: its lines end with ``\\r`` alone (classic Mac OS), so it would read as one line.
    """
    if "\n" not in text and "\r" in text.strip("\r"):
        raise DataError(file, "its lines end with a carriage return alone (\\r, classic Mac OS line ends), so the whole "
                        "file reads as one line; mmir reads \\n or \\r\\n line ends: convert it (e.g. tr '\\r' '\\n')", line=1)
    lines = text.split("\n")
    if lines and lines[-1] in ("", "\r"):
        lines.pop()
    for i, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip(" \t"):
            yield i, line
        elif blanks is not None:
            blanks.append(i)


class LineCounter:
    """The 1-based line of character offsets of one text, asked in increasing order (each ``\n`` counted once)."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


#: the characters a field of a TREC run or qrels line cannot hold (:func:`fields` splits at spaces and tabs, lines
#: break at ``\n``, a ``\r`` before it is dropped), with their names
FIELD_BREAKS = {" ": "space", "\t": "tab", "\n": "line feed", "\r": "carriage return"}


def field_break(value: str) -> str | None:
    """The name of the first character of ``value`` a TREC run or qrels file cannot hold in a field (``'space'``),
    or None."""
    return next((FIELD_BREAKS[c] for c in value if c in FIELD_BREAKS), None)


def fields(line: str) -> list[str]:
    """The space- or tab-separated fields of one line (``str.split()`` would also split at U+0085, U+2028, U+3000 and
    the other Unicode spaces that ids may hold)."""
    return _FIELDS.split(line.strip(" \t\r\n"))
