"""OpenAIBackend + GenerationCache against a real local HTTP server that injects faults.

The server (http.server in a thread on 127.0.0.1) speaks the chat-completions protocol and answers each
request with the next scripted behaviour (slow, 429 + Retry-After, 500, malformed JSON, empty content,
...), then echoes the last user text. Nothing in the client is mocked: the real ``openai`` SDK sends real
HTTP requests.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.config.models import OpenAIGenerator  # noqa: E402
from mmir.core.errors import ConfigError  # noqa: E402
from mmir.llm import (  # noqa: E402
    GenerationCache,
    GenerationFailure,
    OpenAIBackend,
    Usage,
    generation_key,
    load_prompt,
    make_backend,
)

KEY_ENV = "MMIR_TEST_OPENAI_KEY"
SECRET = "sk-test-SECRET123"
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------ fault server
class FaultServer:
    """Chat-completions server on 127.0.0.1 with a script of behaviours (then the default)."""

    def __init__(self) -> None:
        self.script: deque[str] = deque()
        self.default = "ok"
        self.ok_delay_s = 0.0
        self.requests: list[dict] = []  # {"t": monotonic arrival, "prompt": str, "auth": str, "behaviour": str}
        self.inflight = self.max_inflight = 0
        self.epoch = 0  # bumped by reset(): a slow handler left over from an earlier test is not counted
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                return

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self._leave()  # before answering: once the client has the answer it may send the next request
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                last = body["messages"][-1]["content"]
                prompt = last if isinstance(last, str) else " ".join(p.get("text", "<img>") for p in last)
                with server.lock:
                    behaviour = server.script.popleft() if server.script else server.default
                    server.requests.append(
                        {"t": time.monotonic(), "prompt": prompt, "auth": self.headers.get("Authorization", ""),
                         "behaviour": behaviour, "body": body}
                    )
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                    self._epoch = server.epoch
                self._counted = True
                try:
                    self._respond(behaviour, prompt, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to answer
                finally:
                    self._leave()

            def _leave(self) -> None:
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server.lock:
                        if self._epoch == server.epoch:
                            server.inflight -= 1

            def _respond(self, behaviour: str, prompt: str, body: dict) -> None:
                err = lambda msg: json.dumps({"error": {"message": msg, "type": "test"}}).encode()  # noqa: E731
                if behaviour == "slow":
                    time.sleep(2.0)
                    self._send(200, _completion("too late", prompt))
                elif behaviour == "429":
                    self._send(429, err("rate limited"), {"Retry-After": "1"})
                elif behaviour == "429-long":
                    self._send(429, err("rate limited"), {"Retry-After": "3600"})
                elif behaviour == "500":
                    self._send(500, err("internal error"))
                elif behaviour == "400":
                    self._send(400, err("bad request"))
                elif behaviour == "401-echo":  # a hostile server echoing the credential back
                    self._send(401, err(f"invalid key {self.headers.get('Authorization', '')}"))
                elif behaviour == "malformed":
                    self._send(200, b'{"id": "x", "object": "chat.completion", "choices": [')
                elif behaviour == "empty":
                    self._send(200, _completion("", prompt))
                elif behaviour == "grade-logprobs":  # "Score: 3" with the top_logprobs asked for at each token
                    self._send(200, _grade_completion(body.get("top_logprobs")))
                else:
                    if server.ok_delay_s:
                        time.sleep(server.ok_delay_s)
                    self._send(200, _completion(f"echo: {prompt}", prompt, n=body.get("n", 1)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.requests.clear()
            self.default, self.ok_delay_s, self.max_inflight, self.inflight = "ok", 0.0, 0, 0
            self.epoch += 1

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(text: str, prompt: str, n: int = 1) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "fault-model",
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"} for i in range(n)
            ],
            "usage": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": n * len(text.split()),
                "total_tokens": len(prompt.split()) + n * len(text.split()),
            },
        }
    ).encode()


#: the scripted probabilities of the grade position of "Score: 3" (renormalised over 0-4 by the reranker)
GRADE_P = {"3": 0.5, "2": 0.2, " 4": 0.1, "Score": 0.15}


def _grade_completion(top_logprobs: int | None) -> bytes:
    import math

    def tok(t, top):
        return {"token": t, "logprob": math.log(top.get(t, 0.9)), "bytes": None,
                "top_logprobs": [{"token": k, "logprob": math.log(v), "bytes": None} for k, v in list(top.items())[:top_logprobs]]}

    content = [tok("Score", {"Score": 0.9}), tok(":", {":": 0.9}), tok(" ", {" ": 0.9}), tok("3", GRADE_P)]
    return json.dumps({"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "fault-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "Score: 3"}, "finish_reason": "stop",
                                    "logprobs": {"content": content, "refusal": None}}]}).encode()


@pytest.fixture(scope="module")
def server():
    s = FaultServer()
    yield s
    s.close()


@pytest.fixture
def fault(server, monkeypatch):
    server.reset()
    monkeypatch.setenv(KEY_ENV, SECRET)
    return server


def _backend(server: FaultServer, **kw) -> OpenAIBackend:
    cfg = dict(model="fault-model", base_url=server.base_url, api_key_env=KEY_ENV, timeout_s=0.5,
               max_retries=5, backoff_base_s=0.05, backoff_max_s=0.2)
    cfg.update(kw)
    return OpenAIBackend(OpenAIGenerator(backend="openai", **cfg))


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# ---------------------------------------------------------------------------------------- fault handling
def test_fault_sequence_retries_and_failures(fault):
    fault.script.extend(["slow", "429", "500", "malformed", "empty", "ok"])
    b = _backend(fault)

    t0 = time.monotonic()
    with pytest.raises(GenerationFailure) as ei:
        b.generate(_user("first question"), max_tokens=16)
    f = ei.value
    # timeout, 429 and 500 are retried; the malformed body is not retryable and is reported
    assert f.kind == "malformed_response"
    assert f.retries == 3
    assert f.history == ["timeout", "http 429", "http 500", "malformed_response"]
    assert time.monotonic() - t0 >= 0.5 + 1.0  # client timeout + Retry-After
    t = [r["t"] for r in fault.requests]
    assert [r["behaviour"] for r in fault.requests] == ["slow", "429", "500", "malformed"]
    assert t[2] - t[1] >= 1.0, "Retry-After: 1 was not honoured"
    assert t[1] - t[0] >= 0.5  # the slow attempt was abandoned at the client timeout, not earlier

    with pytest.raises(GenerationFailure) as ei:
        b.generate(_user("second question"), max_tokens=16)
    assert ei.value.kind == "empty_content" and ei.value.retries == 0

    g = b.generate(_user("third question"), max_tokens=16)
    assert g.texts == ["echo: third question"]
    assert (g.prompt_tokens, g.completion_tokens, g.retries, g.finish_reasons) == (2, 3, 0, ["stop"])
    # our retries are the only ones (the SDK's are disabled): one HTTP request per attempt
    assert len(fault.requests) == 6
    assert (b.usage.requests, b.usage.failures, b.usage.retries) == (3, 2, 3)
    assert b.usage.prompt_tokens == 2 and b.usage.completion_tokens == 3


def test_retries_exhausted_non_retryable_and_long_retry_after(fault):
    fault.script.extend(["500", "500", "500"])
    with pytest.raises(GenerationFailure) as ei:
        _backend(fault, max_retries=2).generate(_user("q"))
    assert ei.value.kind == "server_error" and ei.value.retries == 2 and ei.value.status_code == 500
    assert len(fault.requests) == 3

    fault.reset()
    fault.script.append("400")
    with pytest.raises(GenerationFailure) as ei:
        _backend(fault).generate(_user("q"))
    assert ei.value.kind == "http_error" and ei.value.retries == 0 and len(fault.requests) == 1

    fault.reset()
    fault.script.append("429-long")
    t0 = time.monotonic()
    with pytest.raises(GenerationFailure, match="exceeds max_retry_after_s") as ei:
        _backend(fault, max_retry_after_s=5).generate(_user("q"))
    assert ei.value.kind == "rate_limited" and time.monotonic() - t0 < 1.0


def test_generate_many_concurrency_limit_and_order(fault):
    fault.ok_delay_s = 0.3
    b = _backend(fault, max_concurrency=3, timeout_s=5)
    reqs = [_user(f"question {i}") for i in range(6)]
    t0 = time.monotonic()
    out = b.generate_many(reqs)
    wall = time.monotonic() - t0
    assert [g.texts[0] for g in out] == [f"echo: question {i}" for i in range(6)]
    assert 2 <= fault.max_inflight <= 3
    assert wall < 6 * 0.3  # ran concurrently

    fault.reset()
    fault.script.extend(["ok", "400"])
    res = _backend(fault, max_concurrency=1).generate_many(
        [_user("a"), {"messages": _user("b"), "max_tokens": 8}], return_failures=True
    )
    assert res[0].texts == ["echo: a"] and isinstance(res[1], GenerationFailure)
    assert fault.requests[1]["body"]["max_tokens"] == 8


def test_images_become_data_uri_parts(fault):
    from PIL import Image

    img = Image.new("RGB", (8, 8), (255, 0, 0))
    msgs = [{"role": "user", "content": [{"type": "text", "text": "what colour"}, {"type": "image", "image": img}]}]
    _backend(fault).generate(msgs)
    part = fault.requests[0]["body"]["messages"][0]["content"][1]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")


# -------------------------------------------------------------------------------------------- secrets
def test_api_key_never_leaks(fault, caplog):
    caplog.set_level(logging.DEBUG)
    fault.script.extend(["500", "401-echo", "429", "ok"])
    b = _backend(fault, max_retries=3)
    failures = []
    with pytest.raises(GenerationFailure) as ei:
        b.generate(_user("leak test"))
    failures.append(ei.value)
    g = b.generate(_user("leak test 2"))
    assert fault.requests[0]["auth"] == f"Bearer {SECRET}"  # the key really was sent

    f = failures[0]
    assert f.kind == "http_error" and f.status_code == 401
    assert f.__cause__ is None and f.__context__ is None  # the SDK exception (holding headers) is dropped
    texts = [
        caplog.text, str(f), repr(f), json.dumps(f.to_record()), repr(b), str(b),
        json.dumps(b.usage.as_metrics()), json.dumps(g.to_dict()), repr(b.usage), str(vars(b)),
    ]
    for t in texts:
        assert "SECRET123" not in t
    assert "<redacted>" in str(f)  # the echoed key was scrubbed from the server's message


def test_api_key_not_in_cache_records_or_config_errors(fault, tmp_path, monkeypatch):
    fault.script.extend(["401-echo"])
    b = _backend(fault)
    cache = GenerationCache(tmp_path / "gen.sqlite")
    rec = cache.cached_generate(b, _user("x"), "t", "tpl")
    assert rec["status"] == "failed"
    rec2 = cache.cached_generate(b, _user("y"), "t", "tpl")
    assert rec2["status"] == "ok"
    cache.close()
    assert b"SECRET123" not in (tmp_path / "gen.sqlite").read_bytes()
    wal = tmp_path / "gen.sqlite-wal"
    assert not wal.exists() or b"SECRET123" not in wal.read_bytes()

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=KEY_ENV):
        _backend(fault)


# ---------------------------------------------------------------------------------------- factory/usage
def test_make_backend_and_usage_metrics(fault):
    b = make_backend({"backend": "openai", "model": "fault-model", "base_url": fault.base_url,
                      "api_key_env": KEY_ENV, "prices": {"prompt_per_token": 1e-6, "completion_per_token": 2e-6}})
    assert isinstance(b, OpenAIBackend)
    b.generate(_user("one two three"))
    m = b.usage.as_metrics()
    assert m["gen_requests"] == 1.0 and m["gen_prompt_tokens"] == 3.0 and m["gen_completion_tokens"] == 4.0
    assert m["gen_cost"] == pytest.approx(3e-6 + 8e-6)
    assert all(isinstance(v, float) for v in m.values())
    assert "gen_cost" not in Usage().as_metrics()

    with pytest.raises(ConfigError, match="backend must be one of: openai, llama_cpp, transformers"):
        make_backend({"backend": "nope"})
    with pytest.raises(ConfigError, match="temprature"):
        make_backend({"backend": "openai", "model": "m", "api_key_env": KEY_ENV, "temprature": 1})
    with pytest.raises(ConfigError, match="model"):
        make_backend({"backend": "openai", "api_key_env": KEY_ENV})


# ------------------------------------------------------------------------------------------------ cache
def _render_items(tpl, queries):
    return [_user(tpl.render(query=q)) for q in queries]


def test_cache_second_run_makes_no_backend_calls(fault, tmp_path):
    tpl = MMBRIGHT_PROMPTS.get("reformulate_v1")
    items = [[{"role": "user", "content": tpl.render(query=f"q{i}", image_descriptions="none")}] for i in range(4)]
    db = tmp_path / "gen.sqlite"
    with GenerationCache(db) as cache:
        b1 = _backend(fault, max_concurrency=2)
        recs = cache.cached_generate_many(b1, items, tpl.id, tpl.text, max_tokens=32)
        assert all(r["status"] == "ok" and not r["cached"] for r in recs)
        assert cache.stats == {"hits": 0, "misses": 4, "backend_calls": 4, "failures": 0}
        assert b1.usage.requests == 4 and len(fault.requests) == 4

    with GenerationCache(db) as cache:  # a new run: new cache object, new backend object
        b2 = _backend(fault)
        recs2 = cache.cached_generate_many(b2, items, tpl.id, tpl.text, max_tokens=32)
        assert [r["texts"] for r in recs2] == [r["texts"] for r in recs]
        assert all(r["cached"] for r in recs2)
        assert cache.stats["backend_calls"] == 0 and cache.stats["hits"] == 4
        assert b2.usage.requests == 0 and b2.usage.cache_hits == 4
        assert len(fault.requests) == 4
        # any sampling change is a different generation
        cache.cached_generate(b2, items[0], tpl.id, tpl.text, max_tokens=33)
        cache.cached_generate(b2, items[0], tpl.id, tpl.text, max_tokens=32, seed=7)
        assert cache.stats["backend_calls"] == 2


def test_editing_a_template_changes_exactly_its_keys(fault, tmp_path):
    pdir = tmp_path / "prompts"
    pdir.mkdir()
    (pdir / "a_v1.txt").write_text("Rewrite: $query")
    (pdir / "b_v1.txt").write_text("Describe: $query")
    b = _backend(fault)
    queries = ["alpha", "beta", "gamma"]

    def keys():
        out = {}
        for name in ("a_v1", "b_v1"):
            tpl = load_prompt(name, pdir)
            for q in queries:
                out[(name, q)] = generation_key(b, _user(tpl.render(query=q)), tpl.id, tpl.text, max_tokens=16)
        return out

    before = keys()
    cache = GenerationCache(tmp_path / "gen.sqlite")
    for name in ("a_v1", "b_v1"):
        tpl = load_prompt(name, pdir)
        cache.cached_generate_many(b, _render_items(tpl, queries), tpl.id, tpl.text, max_tokens=16)
    assert len(cache) == 6 and len(fault.requests) == 6

    (pdir / "a_v1.txt").write_text("Rewrite: $query\n")  # a whitespace edit still counts
    after = keys()
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {("a_v1", q) for q in queries}

    for name in ("a_v1", "b_v1"):
        tpl = load_prompt(name, pdir)
        cache.cached_generate_many(b, _render_items(tpl, queries), tpl.id, tpl.text, max_tokens=16)
    assert len(fault.requests) == 9  # only template a's three items were generated again
    assert cache.stats["hits"] == 3


def test_failures_are_recorded_then_retried(fault, tmp_path):
    fault.script.extend(["empty"])
    cache = GenerationCache(tmp_path / "gen.sqlite")
    b = _backend(fault)
    rec = cache.cached_generate(b, _user("flaky"), "t", "tpl")
    assert rec["status"] == "failed" and rec["error_kind"] == "empty_content" and "texts" not in rec
    assert [r["key"] for r in cache.failed_records()] == [rec["key"]]
    assert cache.stats["failures"] == 1

    rec2 = cache.cached_generate(b, _user("flaky"), "t", "tpl")  # next run: called again, now succeeds
    assert rec2["status"] == "ok" and rec2["attempts"] == 2 and rec2["texts"] == ["echo: flaky"]
    assert cache.failed_records() == []
    assert cache.cached_generate(b, _user("flaky"), "t", "tpl")["cached"] is True
    fault.script.append("400")
    with pytest.raises(GenerationFailure):
        cache.cached_generate(b, _user("other"), "t", "tpl", raise_on_failure=True)
    assert len(cache.failed_records()) == 1


STAGE = textwrap.dedent(
    """
    import sys
    from mmir.config.models import OpenAIGenerator
    from mmir.llm import GenerationCache, OpenAIBackend
    base_url, db, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    b = OpenAIBackend(OpenAIGenerator(backend="openai", model="fault-model", base_url=base_url,
                                      api_key_env="MMIR_TEST_OPENAI_KEY", timeout_s=10))
    cache = GenerationCache(db)
    for i in range(n):
        rec = cache.cached_generate(b, [{"role": "user", "content": f"item {i}"}], "stage", "tpl", max_tokens=8)
        print(f"DONE {i} {rec['status']}", flush=True)
    """
)


def test_killed_stage_rerun_repeats_no_finished_call(fault, tmp_path):
    fault.ok_delay_s = 0.15
    db = tmp_path / "gen.sqlite"
    script = tmp_path / "stage.py"
    script.write_text(STAGE)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    n, k = 8, 3
    proc = subprocess.Popen([sys.executable, str(script), fault.base_url, str(db), str(n)],
                            stdout=subprocess.PIPE, text=True, env=env)
    done = []
    try:
        for line in proc.stdout:
            done.append(line.split()[1])
            if len(done) == k:
                proc.kill()  # SIGKILL: no cleanup, no final commit
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert done == ["0", "1", "2"]

    before = [r["prompt"] for r in fault.requests]
    with GenerationCache(db) as cache:
        stored = len(cache)
        assert stored >= k  # every reported generation survived the kill
        b = _backend(fault, timeout_s=10)
        recs = [cache.cached_generate(b, _user(f"item {i}"), "stage", "tpl", max_tokens=8) for i in range(n)]
        assert all(r["status"] == "ok" for r in recs)
        assert cache.stats["hits"] == stored and cache.stats["backend_calls"] == n - stored
    rerun = [r["prompt"] for r in fault.requests[len(before):]]
    finished = {f"item {i}" for i in range(stored)}
    assert not finished & set(rerun), "a finished generation was requested again"
    assert sorted(rerun) == sorted(f"item {i}" for i in range(stored, n))


def test_pointwise_logprobs_through_the_endpoint(fault):
    """score: logprobs sends logprobs/top_logprobs; the expected grade is computed from the returned alternatives; an
    endpoint that ignores them fails the call (counted), never a silent fall back to the reply's grade."""
    from mmir.config.models import PointwiseReranker
    from mmir.llm.client import LLMClient
    from mmir.retrieval.rerank import RERANK_PROMPTS
    from mmir.retrieval.rerank.candidates import Candidate, RerankQuery
    from mmir.retrieval.rerank.llm import LLMReranker

    cfg = PointwiseReranker(kind="llm-pointwise", generator="g", score="logprobs", top_logprobs=5)
    fault.default = "grade-logprobs"
    client = LLMClient(_backend(fault))
    q, cands = RerankQuery("q", "what is a mean?"), [Candidate("a", "first text"), Candidate("b", "second text")]
    LLMReranker(client, cfg, RERANK_PROMPTS.get("rerank_pointwise_v1")).rerank(q, cands)
    assert all(r["body"]["logprobs"] is True and r["body"]["top_logprobs"] == 5 for r in fault.requests)
    grades = {3: GRADE_P["3"], 2: GRADE_P["2"], 4: GRADE_P[" 4"]}  # "Score" is no grade
    want = sum(g * p for g, p in grades.items()) / sum(grades.values())
    assert [r.value for r in client.audit.records] == [pytest.approx(want, abs=1e-9)] * 2
    fault.reset()
    fault.default = "ok"  # answers without logprobs
    client = LLMClient(_backend(fault, max_retries=0))
    rr = LLMReranker(client, cfg, RERANK_PROMPTS.get("rerank_pointwise_v1"))
    rr.rerank(q, cands)
    assert [r.status for r in client.audit.records] == ["failed", "failed"] and rr.counts["unscored"] == 2
    assert "without token log-probabilities" in client.audit.records[0].error
