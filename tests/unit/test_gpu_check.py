"""The full-size GPU check (bench/gpu_check.py, issue 20 item 4) on the CPU with tiny configs: the four
architectures go through mmir's own encoder classes, and its FLOP count equals torch's FLOP counter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import gpu_check  # noqa: E402
import gpu_fullsize  # noqa: E402


def test_flops_equal_torch_flop_counter():
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.MistralConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModel.from_config(cfg, attn_implementation="eager").eval()  # eager: attention as matmuls
    x = torch.randint(0, 300, (3, 50))
    with FlopCounterMode(display=False) as fc, torch.inference_mode():
        model(input_ids=x, attention_mask=torch.ones_like(x))
    est = gpu_fullsize.forward_flops(gpu_fullsize.non_embedding_params(model), 2, 64, [50] * 3)
    # the estimate counts the norms' few parameters as matmul weights: within 1%
    assert est == pytest.approx(fc.get_total_flops(), rel=0.01)


def test_doc_lengths_have_mmbright_mean():
    lengths = gpu_fullsize.doc_lengths(200_000, 10**9)
    assert lengths.mean() == pytest.approx(5.5e9 / 2_499_273 / 4, rel=0.03)
    assert gpu_fullsize.doc_lengths(1000, 512).max() == 512


def test_tiny_run_through_mmir_encoders(capsys):
    rows = gpu_check.main(["--tiny"])
    out = capsys.readouterr().out
    assert [r["arch"] for r in rows] == ["e5-mistral-7b", "gte-qwen2-7b", "gme-7b", "clip-vit-l-14"]
    for r in rows:
        assert r["arch"] in out and r["seconds"] > 0 and r["flops"] > 0
        if r["docs_per_s"] is not None:  # documents of MM-BRIGHT's lengths; hours for its 2,499,273 documents
            assert r["docs"] == 16 and r["hours_mmbright"] == pytest.approx(2_499_273 / r["docs_per_s"] / 3600)
            assert r["tokens_per_s"] == pytest.approx(r["docs_per_s"] * r["mean_tokens"])
    assert rows[2]["images_per_s"] > 0 and rows[3]["images_per_s"] > 0
    assert [r["dim"] for r in rows] == [32, 32, 32, 32]
    assert all(r["mfu"] is None for r in rows)  # no known peak on a CPU
    assert np.isfinite([r["peak_gib"] for r in rows]).all()
