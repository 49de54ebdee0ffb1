"""Logging for rule scripts and the CLI: one log file per job plus the console."""

from __future__ import annotations

import logging
import sys


def setup(log_file: str | None = None, level: int = logging.INFO) -> logging.Logger:
    """Send ``mmir`` loggers to ``log_file`` (when given) and stderr; returns the ``mmir`` logger."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    root = logging.getLogger("mmir")
    root.setLevel(level)
    root.propagate = False  # libraries that call logging.basicConfig() would print every line twice
    root.handlers.clear()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    return root
