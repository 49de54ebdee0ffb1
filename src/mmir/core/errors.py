"""Error types that name where bad input sits, so a user can fix it without reading a traceback."""

from __future__ import annotations


class MmirError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(MmirError):
    """A key of params.yaml is missing or invalid.

    ``key`` is the dotted path of the offending key (``systems.bm25.k1``).
    """

    def __init__(self, key: str, message: str, file: str | None = None):
        self.key, self.file = key, file
        where = f"{file}: " if file else ""
        super().__init__(f"{where}config key '{key}': {message}")


class DataError(MmirError):
    """Bad input data: names the file and, where known, the place and the field.

    The place is a 1-based ``line`` for line-based text files (JSON-lines, TSV, TREC), or a 0-based ``row`` for
    table rows (parquet) and iterator positions (ir_datasets); the message says which (``line 551`` / ``row 11``).
    When both are given the line is named.
    """

    def __init__(self, file: str, message: str, row: int | None = None, field: str | None = None, line: int | None = None):
        self.file, self.row, self.field, self.line, self.message = str(file), row, field, line, message
        parts = [str(file)]
        if line is not None:
            parts.append(f"line {line}")
        elif row is not None:
            parts.append(f"row {row}")
        if field is not None:
            parts.append(f"field '{field}'")
        super().__init__(f"{', '.join(parts)}: {message}")

    def at_line(self, line: int | None) -> DataError:
        """The same error placed at a 1-based ``line`` (a text file's) instead of its row; itself when ``line`` is None."""
        return self if line is None else DataError(self.file, self.message, self.row, self.field, line)
