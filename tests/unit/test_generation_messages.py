"""Message handling, prompt templates, cache keys and records, usage accounting (no model needed)."""

from __future__ import annotations

import io
import threading

import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.llm import GenerationCache, Usage, generation_key, parse_marked_answer
from mmir.llm.backends import (
    Generation,
    GenerationFailure,
    UnsupportedInputError,
    canonical_messages,
    image_to_bytes,
    messages_sha256,
)


def counting_backend(fail_on: set[str] = frozenset()) -> ScriptedBackend:
    """Deterministic text (``out:<prompt>``) so the base-class code paths run; ``fail_on`` prompts fail."""
    return ScriptedBackend(lambda c: GenerationFailure("empty_content", "scripted failure", history=["empty_content"])
                           if c in fail_on else f"out:{c}", name="counting", model="counting-v0")


def _png(color=(1, 2, 3)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), color).save(buf, format="PNG")
    return buf.getvalue()


def test_image_parts_and_canonical_form():
    data, mime = image_to_bytes(_png())
    assert mime == "image/png" and data.startswith(b"\x89PNG")
    assert image_to_bytes(Image.new("L", (3, 3)))[1] == "image/png"
    with pytest.raises(UnsupportedInputError, match="not a known image format"):
        image_to_bytes(b"not an image at all")
    with pytest.raises(UnsupportedInputError, match="bytes or a PIL image"):
        image_to_bytes(42)

    m = [{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image", "image": _png()}]}]
    c = canonical_messages(m)
    assert c[0]["content"][1]["type"] == "image" and len(c[0]["content"][1]["sha256"]) == 64
    other = [{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image", "image": _png((9, 9, 9))}]}]
    assert messages_sha256(m) != messages_sha256(other)  # image content is part of the input hash
    assert messages_sha256([{"role": "user", "content": "q"}]) == messages_sha256(
        [{"role": "user", "content": [{"type": "text", "text": "q"}]}]
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        ([], "non-empty list"),
        ("hello", "non-empty list"),
        ([{"content": "x"}], "no 'role'"),
        ([{"role": "user", "content": 5}], "content must be"),
        ([{"role": "user", "content": [{"type": "audio"}]}], "part 0"),
    ],
)
def test_malformed_messages_are_rejected(bad, match):
    b = counting_backend()
    with pytest.raises(UnsupportedInputError, match=match):
        b.generate(bad)
    assert len(b.calls) == 0


def test_sampling_arguments_are_checked():
    b = counting_backend()
    for kw in ({"max_tokens": 0}, {"n": 0}, {"temperature": -1}):
        with pytest.raises(UnsupportedInputError):
            b.generate([{"role": "user", "content": "x"}], **kw)


def test_prompts_load_render_and_parse():
    tpl = MMBRIGHT_PROMPTS.get("reformulate_v1")
    assert tpl.fields == ["query", "image_descriptions"]
    text = tpl.render(query="Why is my p-value $0.05$?", image_descriptions="(none)")
    assert "Why is my p-value $0.05$?" in text and "Search query:" in text
    with pytest.raises(ValueError, match="missing"):
        tpl.render(query="x")
    cap = MMBRIGHT_PROMPTS.get("caption_v1")
    assert cap.fields == [] and cap.render().startswith("Describe")
    with pytest.raises(FileNotFoundError, match="reformulate_v1"):
        MMBRIGHT_PROMPTS.get("reformulate_v999")
    with pytest.raises(ValueError):
        MMBRIGHT_PROMPTS.get("../secrets")
    assert parse_marked_answer("I think...\nSearch query: **bayes theorem proof**") == "bayes theorem proof"
    assert parse_marked_answer("no marker") is None


def test_key_depends_on_every_field():
    b = counting_backend()
    m = [{"role": "user", "content": "x"}]
    base = generation_key(b, m, "t", "tpl", temperature=0.0, max_tokens=16, n=1, seed=None)
    variants = [
        generation_key(b, [{"role": "user", "content": "y"}], "t", "tpl", temperature=0.0, max_tokens=16, n=1, seed=None),
        generation_key(b, m, "t2", "tpl", temperature=0.0, max_tokens=16, n=1, seed=None),
        generation_key(b, m, "t", "tpl!", temperature=0.0, max_tokens=16, n=1, seed=None),
        generation_key(b, m, "t", "tpl", temperature=0.7, max_tokens=16, n=1, seed=None),
        generation_key(b, m, "t", "tpl", temperature=0.0, max_tokens=17, n=1, seed=None),
        generation_key(b, m, "t", "tpl", temperature=0.0, max_tokens=16, n=2, seed=None),
        generation_key(b, m, "t", "tpl", temperature=0.0, max_tokens=16, n=1, seed=0),
    ]
    assert len({base, *variants}) == 1 + len(variants)
    assert generation_key(b, m, "t", "tpl", temperature=0, max_tokens=16, n=1, seed=None) == base  # 0 == 0.0


def test_cache_put_get_and_concurrent_use(tmp_path):
    cache = GenerationCache(tmp_path / "g.sqlite")
    with pytest.raises(ValueError, match="status"):
        cache.put("k", {"texts": ["x"]})
    cache.put("k", {"status": "ok", "texts": ["x"]})
    assert cache.get("k")["texts"] == ["x"] and cache.get("missing") is None

    b = counting_backend(fail_on={"item 3"})
    items = [[{"role": "user", "content": f"item {i}"}] for i in range(12)]
    errors = []

    def worker():
        try:
            cache.cached_generate_many(b, items, "t", "tpl", max_workers=3)
        except Exception as e:  # surfaced by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) == 13  # 12 items + "k"
    assert [r["key"] for r in cache.failed_records()] == [generation_key(b, items[3], "t", "tpl")]
    s = cache.stats
    assert s["hits"] + s["misses"] == 24 and s["backend_calls"] == len(b.calls) and s["failures"] >= 1
    assert b.usage.failures == s["failures"] and b.usage.requests == len(b.calls)


def test_usage_accumulates_and_merges():
    u = Usage(prompt_price_per_token=0.5)
    u.add(Generation(texts=["a"], prompt_tokens=4, completion_tokens=2, latency_s=1.0, retries=1))
    u.add(Generation(texts=["a"], prompt_tokens=None, completion_tokens=None, latency_s=0.5))
    u.add_failure(GenerationFailure("timeout", "x", retries=3, latency_s=2.0))
    u.add_cache_hit(2)
    m = u.as_metrics()
    assert m == {
        "gen_requests": 3.0, "gen_failures": 1.0, "gen_retries": 4.0, "gen_prompt_tokens": 4.0,
        "gen_completion_tokens": 2.0, "gen_latency_s": 3.5, "gen_mean_latency_s": 3.5 / 3,
        "gen_cache_hits": 2.0, "gen_cost": 2.0,
    }
    v = Usage()
    v.merge(u)
    assert v.as_metrics(prefix="x_")["x_requests"] == 3.0 and v.cost is None
