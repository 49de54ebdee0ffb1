"""Development tools that run outside the ``mmir`` package (lint plugins)."""
