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
    """Bad input data: names the file, and where known the row (0-based) and field."""

    def __init__(self, file: str, message: str, row: int | None = None, field: str | None = None):
        self.file, self.row, self.field = str(file), row, field
        parts = [str(file)]
        if row is not None:
            parts.append(f"row {row}")
        if field is not None:
            parts.append(f"field '{field}'")
        super().__init__(f"{', '.join(parts)}: {message}")
