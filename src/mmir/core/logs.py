"""Logging for rule scripts and the CLI: one log file per job plus the console."""

from __future__ import annotations

import logging
import sys

#: ``extra=FILE_ONLY`` keeps a record (e.g. a data error's traceback) out of stderr: the job's log file gets it,
#: the console gets the one ``mmir: error: ...`` line instead
FILE_ONLY = {"file_only": True}


def _console(record: logging.LogRecord) -> bool:
    return not getattr(record, "file_only", False)


def setup(log_file: str | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send ``mmir`` loggers to ``log_file`` (when given) and stderr (records logged with :data:`FILE_ONLY`: the file
    only); returns the ``mmir`` logger."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    root = logging.getLogger("mmir")
    root.setLevel(level)
    root.propagate = False  # libraries that call logging.basicConfig() would print every line twice
    root.handlers.clear()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    handlers[0].addFilter(_console)
    if log_file:
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    return root
