"""The CPU threads a job may use: Snakemake sets ``$OMP_NUM_THREADS`` to the job's ``threads`` (``resources.<rule>``),
and every runtime that does not read it itself (ONNX Runtime, OpenVINO, llama.cpp) is given this number."""

from __future__ import annotations

import os


def job_threads() -> int | None:
    """``$OMP_NUM_THREADS`` as a positive int, else None (the runtime's own default: usually every core)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None
