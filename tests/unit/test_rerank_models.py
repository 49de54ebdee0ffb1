"""Loading paths of the reranker presets with tiny randomly initialised models of the same architectures (no weights are
reachable offline), checked against a direct computation; the offline Qwen 0.5B GGUF as a pointwise reranker."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import offline_qwen_backend
from tiny_models import bert_tokenizer, decoder_config, qwen_bpe_tokenizer

from mmir.config import load_reranker_presets, validate_config
from mmir.config.models import CrossEncoderReranker, PointwiseReranker, Reranker, parse
from mmir.core.errors import ConfigError
from mmir.retrieval.rerank.cross_encoder import CrossEncoderScorer

PRESETS = load_reranker_presets()
QUERY = "the mean of the sum and count"
TEXTS = ["the mean is the sum divided by the count", "a cat sat on the mat", "slope of the tangent line",
         " ".join(["the derivative of the curve"] * 60)]


def reranker_of(preset: str, **overrides) -> CrossEncoderReranker:
    """The validated ``rerankers.r`` entry ``{preset: <preset>, **overrides}``."""
    cfg = {"datasets": {"t": {"source": "local", "root": "/tmp/none", "domains": ["d"]}}, "systems": {"bm25": {"kind": "bm25"}},
           "rerankers": {"r": {"preset": preset, **overrides}}}
    return parse(Reranker, validate_config(cfg)["rerankers"]["r"])


def test_presets_expand_and_validate():
    assert set(PRESETS) == {"bge-reranker-v2-m3", "mxbai-rerank-large-v2", "minilm-ce", "ms-marco-minilm-l12-int8"}
    for name, p in PRESETS.items():
        assert p["status"].startswith("offline" if p["reranker"]["model"].startswith("pypi:") else "needs network"), name
        r = reranker_of(name)
        assert (r.kind, r.model, r.preset) == ("cross-encoder", p["reranker"]["model"], name)
    assert reranker_of("bge-reranker-v2-m3", batch_size=4).batch_size == 4  # keys next to preset override
    assert reranker_of("mxbai-rerank-large-v2").backend == "mxbai-rerank"
    with pytest.raises(ConfigError, match=r"rerankers\.r\.preset.*unknown preset 'nope'"):
        reranker_of("nope")


def _save_classifier(path, arch: str, seed: int = 0):
    from transformers import BertConfig, BertForSequenceClassification, XLMRobertaConfig, XLMRobertaForSequenceClassification

    tok = bert_tokenizer()
    torch.manual_seed(seed)
    small = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_labels=1, pad_token_id=tok.pad_token_id)
    if arch == "bert":  # ms-marco MiniLM
        model = BertForSequenceClassification(BertConfig(max_position_embeddings=512, **small))
    else:  # bge-reranker-v2-m3: XLM-RoBERTa (its position ids start after padding_idx)
        model = XLMRobertaForSequenceClassification(XLMRobertaConfig(max_position_embeddings=520, **small))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("preset,arch", [("minilm-ce", "bert"), ("bge-reranker-v2-m3", "xlm-roberta")])
def test_cross_encoder_preset_loads_and_scores_like_the_model(preset, arch, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = _save_classifier(tmp_path / arch, arch)
    cfg = reranker_of(preset, model=str(path), max_length=64, batch_size=3, device="cpu")
    scorer = CrossEncoderScorer(cfg)
    got = scorer.score(QUERY, TEXTS)
    model, tok = AutoModelForSequenceClassification.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    with torch.no_grad():  # one pair at a time, no padding
        want = [model(**tok(QUERY, t, truncation=True, max_length=64, return_tensors="pt")).logits[0, 0].item() for t in TEXTS]
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert (scorer.pairs, scorer.truncated) == (4, 1)  # the long text is cut at 64 tokens, and counted


def test_random_init_cross_encoder_uses_the_architecture_with_seeded_weights(tmp_path):
    path = _save_classifier(tmp_path / "bert", "bert", seed=5)
    cfg = {"kind": "cross-encoder", "model": str(path), "random_init": True, "seed": 1, "device": "cpu", "max_length": 64}
    a = CrossEncoderScorer(parse(Reranker, cfg)).score(QUERY, TEXTS)
    b = CrossEncoderScorer(parse(Reranker, cfg)).score(QUERY, TEXTS)
    c = CrossEncoderScorer(parse(Reranker, cfg | {"random_init": False})).score(QUERY, TEXTS)
    np.testing.assert_array_equal(a, b)  # the seed fixes the weights
    assert not np.allclose(a, c)  # not the saved weights


def test_mxbai_v2_preset_loads_a_qwen2_causal_lm_and_scores_its_template(tmp_path):
    from transformers import AutoModelForCausalLM

    tok = qwen_bpe_tokenizer()
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(decoder_config("qwen2", len(tok))).save_pretrained(tmp_path / "mx")
    tok.save_pretrained(tmp_path / "mx")
    cfg = reranker_of("mxbai-rerank-large-v2", model=str(tmp_path / "mx"), device="cpu", batch_size=1, max_length=512)
    got = CrossEncoderScorer(cfg).score(QUERY, TEXTS[:3])
    # by hand: chat prefix + "query: q" + "\n" + "document: d" + "\n" + task prompt + chat suffix; logit("1") - logit("0")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "mx").eval()

    def ids(s):
        return tok(s, add_special_tokens=False)["input_ids"]

    from mxbai_rerank import MxbaiRerankV2 as M

    want = []
    for t in TEXTS[:3]:
        x = (ids(M.chat_template["prefix"]) + ids(f"query: {QUERY}") + ids("\n") + ids(f"document: {t}") + ids("\n")
             + ids(M.task_prompt) + ids(M.chat_template["suffix"]))
        with torch.no_grad():
            logits = model(torch.tensor([x])).logits[0, -1]
        want.append((logits[ids("1")[0]] - logits[ids("0")[0]]).item())
    np.testing.assert_allclose(got, want, atol=1e-4)


# ------------------------------------------------------------------------------------------------ offline LLM
def test_offline_gguf_pointwise_reranks_a_few_candidates():
    from mmir.llm.client import LLMClient
    from mmir.retrieval.rerank import RERANK_PROMPTS
    from mmir.retrieval.rerank.candidates import Candidate, RerankQuery
    from mmir.retrieval.rerank.llm import LLMReranker

    backend = offline_qwen_backend(2048)
    client = LLMClient(backend)
    cfg = PointwiseReranker(kind="llm-pointwise", generator="qwen05b", max_tokens=8)
    rr = LLMReranker(client, cfg, RERANK_PROMPTS.get("rerank_pointwise_v1"))
    q = RerankQuery("q", "How do I compute the arithmetic mean of a list of numbers?")
    cands = [Candidate("a", "Photosynthesis turns light into chemical energy in plants."),
             Candidate("b", "The arithmetic mean is the sum of the values divided by how many values there are."),
             Candidate("c", "A river delta forms where a river meets the sea.")]
    order = rr.rerank(q, cands)
    recs = client.audit.records
    assert len(recs) == 3 and all(r.status in ("ok", "rejected") for r in recs)
    scores = [r.value if r.status == "ok" else float("nan") for r in recs]
    # the order is the independent sort of the parsed scores (ties and unparsed ones in input order)
    want = sorted(range(3), key=lambda i: (np.isnan(scores[i]), -(0 if np.isnan(scores[i]) else scores[i]), i))
    assert order == want
    assert all(0 <= s <= 4 for s in scores if not np.isnan(s))
