"""``llm-pointwise`` with ``score: logprobs``: the expected grade E[g] = sum_g g p(g) over the rubric's grades at the
position where the grade is written. Checked on the offline Qwen 0.5B GGUF against the same expectation computed from
llama.cpp's own logits (``Llama.eval`` and ``Llama.scores``, softmax over the whole vocabulary); the grade reader on
scripted token lists; the config and load-time refusals; the cache key's scoring mode."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from conftest import offline_qwen_backend

from mmir.config.models import PointwiseReranker, Reranker, parse
from mmir.core.errors import ConfigError
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient
from mmir.retrieval.rerank import RERANK_PROMPTS
from mmir.retrieval.rerank.candidates import Candidate, RerankQuery
from mmir.retrieval.rerank.grades import expected_grade, grade_offset
from mmir.retrieval.rerank.llm import LLMReranker
from tests.scripted import ScriptedBackend

PROMPT = RERANK_PROMPTS.get("rerank_pointwise_v1")
QUERY = RerankQuery("q", "How do I compute the arithmetic mean of a list of numbers?")
CANDS = [Candidate("a", "Photosynthesis turns light into chemical energy in plants."),
         Candidate("b", "The arithmetic mean is the sum of the values divided by how many values there are.")]


def _tok(token, lp, top):
    return {"token": token, "logprob": lp, "top": [[t, v] for t, v in top]}


# --------------------------------------------------------------------------------------------- the grade reader
def test_expected_grade_reads_the_grade_position_and_renormalises_over_the_grades():
    lp = {"3": math.log(0.4), " 3": math.log(0.1), "2": math.log(0.2), "4": math.log(0.1), "x": math.log(0.15)}
    tokens = [_tok("Score", -0.1, [("Score", -0.1)]), _tok(":", -0.01, [(":", -0.01)]), _tok(" ", -0.2, [(" ", -0.2)]),
              _tok("3", lp["3"], lp.items()), _tok(".", -0.5, [("5", -0.1), (".", -0.5)])]
    got = expected_grade("Score: 3.", tokens)
    # by hand: grade masses 3 -> 0.4 + 0.1 (" 3"), 2 -> 0.2, 4 -> 0.1; "x" and the "5" of another position are not grades
    assert got.ok and got.method == "logprobs"
    assert got.value == pytest.approx((3 * 0.5 + 2 * 0.2 + 4 * 0.1) / 0.8, abs=1e-12)
    assert grade_offset("I think 2. Score: 4") == 18 and grade_offset(" 1 ") == 1 and grade_offset("no grade") is None
    bare = expected_grade("1", [_tok("1", math.log(0.5), [("1", math.log(0.5)), ("0", math.log(0.5))])])
    assert bare.value == pytest.approx(0.5)
    assert not expected_grade("Score: 3", None).ok
    assert "not a token of its own" in expected_grade("Score: 3.", [_tok("Score:", -1, []), _tok(" 3.", -1, [])]).error
    assert expected_grade("3", [_tok("3", -1.0, [])]).value == 3.0  # only the written grade known: p(3) = 1
    assert "no grade 0-4" in expected_grade("7", [_tok("7", -1.0, [])]).error


# ------------------------------------------------------------------------------------------ config and load time
def test_logprobs_on_a_backend_without_them_is_a_config_error():
    from mmir.config import validate_config as schema_check
    from mmir.config.models import parse_params
    from mmir.workflow.validate import check_rerank

    def check(backend):
        cfg = {"datasets": {"t": {"source": "local", "root": "tests", "domains": ["d"]}}, "systems": {"bm25": {"kind": "bm25"}},
               "generators": {"g": {"backend": backend, **({"model": "m"} if backend != "llama_cpp" else {})}},
               "rerankers": {"pw": {"kind": "llm-pointwise", "generator": "g", "score": "logprobs"}}}
        check_rerank(parse_params(schema_check(cfg)))

    check("llama_cpp")
    check("openai")
    with pytest.raises(ConfigError, match=r"rerankers\.pw\.score.*backend transformers\) does not give"):
        check("transformers")
    with pytest.raises(ConfigError, match=r"rerankers\.r\.score"):
        parse(Reranker, {"kind": "llm-pointwise", "generator": "g", "score": "probabilities"}, "rerankers.r")
    cfg = PointwiseReranker(kind="llm-pointwise", generator="g", score="logprobs")
    with pytest.raises(ConfigError, match="backend scripted does not give"):  # at load time too, never a silent fallback
        LLMReranker(LLMClient(ScriptedBackend(reply="Score: 1")), cfg, PROMPT)


# ---------------------------------------------------------------------------------------------- the cache key
class _LogprobBackend(ScriptedBackend):
    """Scripted replies with scripted log-probabilities: grade 4 at p = 0.6, grade 0 at p = 0.4."""

    supports_logprobs = True

    def _generate(self, messages, *, temperature, max_tokens, seed, n, top_logprobs=None):
        gen = super()._generate(messages, temperature=temperature, max_tokens=max_tokens, seed=seed, n=n)
        if top_logprobs is not None:
            gen.logprobs = [[_tok(t, math.log(0.6), [("4", math.log(0.6)), ("0", math.log(0.4))]) for t in ("4",)]] * n
        return gen


def test_the_scoring_mode_is_part_of_the_cache_key(tmp_path):
    reply = PointwiseReranker(kind="llm-pointwise", generator="g")
    lp = reply.model_copy(update={"score": "logprobs"})
    be = _LogprobBackend(reply="4")
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        for cfg in (reply, lp, lp.model_copy(update={"top_logprobs": 5}), lp):
            client = LLMClient(be, cache)
            LLMReranker(client, cfg, PROMPT).rerank(QUERY, CANDS)
            assert [r.value for r in client.audit.records] == ([4.0, 4.0] if cfg.score == "reply" else [pytest.approx(2.4)] * 2)
        assert (cache.misses, cache.hits) == (6, 2)  # reply, logprobs and top_logprobs=5 miss; logprobs again hits
    assert len(be.calls) == 6


# ------------------------------------------------------------------------------------------ the offline GGUF
HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None


@pytest.mark.skipif(not HAS_LLAMA, reason="llama_cpp (llama-cpp-python) is not importable")
def test_offline_gguf_expected_grade_equals_the_expectation_from_llamas_own_logits():
    import jinja2
    import llama_cpp


    backend = offline_qwen_backend(1024)
    client = LLMClient(backend)
    cfg = PointwiseReranker(kind="llm-pointwise", generator="qwen05b", max_tokens=8, score="logprobs", max_chars=300)
    rr = LLMReranker(client, cfg, PROMPT)
    order = rr.rerank(QUERY, CANDS)
    recs = client.audit.records
    assert [r.status for r in recs] == ["ok", "ok"], [r.error for r in recs]

    # independently: the chat template rendered here, the prompt and the reply up to the grade evaluated by a fresh
    # Llama, the logits at the grade's position, a softmax over the whole vocabulary, every grade token's probability.
    # Each prompt's tokens after the prefix it shares with the previous one are evaluated as one batch, as
    # llama-cpp-python's prompt cache does: on ggml's AVX-512 kernels the logits depend on how tokens are batched
    # (the second candidate's E[g] 1.9106 evaluated from scratch, 1.9272 after the cached 62-token prefix)
    ref = llama_cpp.Llama(model_path=str(backend.model_path), n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
    template = jinja2.Environment().from_string(ref.metadata["tokenizer.chat_template"])
    pieces = [ref.detokenize([i]).decode("utf-8", errors="ignore").strip() for i in range(ref.n_vocab())]
    grade_ids = {g: [i for i, p in enumerate(pieces) if p == str(g)] for g in range(5)}
    want = []
    for rec, msgs in zip(recs, (rr.pointwise_messages(QUERY, c) for c in CANDS)):
        prompt = template.render(messages=msgs, add_generation_prompt=True)
        before = rec.text[:grade_offset(rec.text)]  # the reply's text before the grade (empty for a bare grade)
        ids = ref.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        shared = next((i for i, (a, b) in enumerate(zip(ref._input_ids, ids)) if a != b), min(ref.n_tokens, len(ids)))
        cached = min(shared, len(ids) - 1)  # at least the last prompt token is evaluated, for its logits
        ref._ctx.kv_cache_seq_rm(-1, cached, -1)
        ref.n_tokens = cached
        ref.eval(ids[cached:])
        for t in ref.tokenize(before.encode("utf-8"), add_bos=False, special=False):  # one at a time, as generated
            ref.eval([t])
        logits = np.asarray(ref.scores[ref.n_tokens - 1], dtype=np.float64)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        mass = np.array([p[grade_ids[g]].sum() for g in range(5)])
        want.append(float((np.arange(5) * mass).sum() / mass.sum()))
    got = [r.value for r in recs]
    print(f"E[g] from the backend's logprobs {got}, from llama's logits {want}, max |diff| "
          f"{max(abs(a - b) for a, b in zip(got, want)):.2e}; replies {[r.text for r in recs]}")
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert all(0 <= v <= 4 for v in got)
    assert order == sorted(range(2), key=lambda i: (-got[i], i))
