"""Sequential vs concurrent batches through OpenAIEmbeddingEncoder (``kind: dense, backend: openai``).

Two endpoints:

* ``llama``: ``python -m llama_cpp.server --embedding true`` with the offline Qwen2.5-Coder-0.5B GGUF on
  127.0.0.1 (last-token pooling via ``--kv_overrides qwen2.pooling_type=int:3``), or any running endpoint
  given with ``--base-url``. CPU-bound: llama-cpp-python's server (0.3.x) handles one request at a time
  behind a lock, so concurrency can only hide per-request HTTP/client overhead there.
* ``latency``: an in-process stand-in for a remote API (http.server, a fixed ``--latency-ms`` per request,
  answers in parallel), to show what concurrency buys when the endpoint is network-bound (OpenAI, vLLM
  with many slots, TEI).

For each, ``--texts`` texts in batches of ``--batch-size`` are encoded with ``max_concurrency=1`` and with
``max_concurrency=--concurrency``, ``--rounds`` of each in ABBA order (changing load on shared CPUs hits both
alike), no cache; prints every wall time, texts/s and the ratio of the medians (sequential / concurrent).

Usage: .venv/bin/python bench/bench_embeddings_api.py [--texts 64] [--batch-size 8] [--concurrency 4]
       [--rounds 2] [--latency-ms 200] [--only llama|latency] [--base-url URL --model NAME --api-key-env VAR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from mmir.config.models import EmbeddingsAPISystem
from mmir.encoders.embeddings_api import OpenAIEmbeddingEncoder

WORDS = ("retrieval reasoning image query document passage gold negative cache vector batch server model "
         "token embedding cosine score domain biology chemistry physics economics").split()


def _texts(n: int, words: int = 40) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words)) + f" #{i}" for i in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_llama(port: int, n_threads: int, log_path: Path, timeout_s: float = 180.0) -> subprocess.Popen:
    """llama_cpp.server with embeddings on; waits until ``/v1/models`` answers (RuntimeError if it does not)."""
    from mmir.llm.offline import qwen05b_gguf_path

    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(qwen05b_gguf_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", str(n_threads), "--embedding", "true",
           "--kv_overrides", "qwen2.pooling_type=int:3"]
    proc = subprocess.Popen(cmd, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}): {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200 and json.load(r)["data"]:
                    return proc
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"server not ready after {timeout_s}s: {log_path.read_text()[-2000:]}")


def start_latency_server(latency_s: float, dim: int = 256) -> ThreadingHTTPServer:
    """A parallel stand-in for a remote embeddings API: every answer waits ``latency_s``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return

        def do_POST(self):  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            time.sleep(latency_s)
            data = []
            for i, t in enumerate(body["input"]):
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                data.append({"object": "embedding", "index": i,
                             "embedding": np.random.default_rng(seed).standard_normal(dim).round(6).tolist()})
            out = json.dumps({"object": "list", "model": body["model"], "data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def compare(name: str, base_url: str, model: str, api_key_env: str | None, texts: list[str], args) -> float:
    """Time both modes in ABBA order; prints the walls and returns median(sequential) / median(concurrent)."""
    def encoder(conc: int) -> OpenAIEmbeddingEncoder:
        return OpenAIEmbeddingEncoder(EmbeddingsAPISystem(kind="dense", backend="openai", model=model, base_url=base_url,
                                                          api_key_env=api_key_env, batch_size=args.batch_size,
                                                          max_concurrency=conc, timeout_s=300, max_retries=2))

    ref = encoder(1).encode_documents(texts[: args.batch_size])  # warm-up (first request loads caches)
    walls: dict[str, list[float]] = {"sequential": [], "concurrent": []}
    vecs = {}
    order = ["sequential", "concurrent", "concurrent", "sequential"] * ((args.rounds + 1) // 2)
    for mode in order[: 2 * args.rounds]:
        enc = encoder(1 if mode == "sequential" else args.concurrency)
        t0 = time.perf_counter()
        vecs[mode] = enc.encode_documents(texts)
        walls[mode].append(time.perf_counter() - t0)
        assert enc.usage["requests"] == -(-len(texts) // args.batch_size) and enc.usage["retries"] == 0
    same = float(np.abs(vecs["sequential"] - vecs["concurrent"]).max())
    seq, conc = statistics.median(walls["sequential"]), statistics.median(walls["concurrent"])
    n_batches = -(-len(texts) // args.batch_size)
    print(f"[{name}] {len(texts)} texts, {n_batches} batches of {args.batch_size}, dim {ref.shape[1]}")
    print(f"[{name}]   sequential (max_concurrency=1): " + ", ".join(f"{w:.2f}s" for w in walls["sequential"])
          + f"  -> median {seq:.2f}s, {len(texts) / seq:.1f} texts/s")
    print(f"[{name}]   concurrent (max_concurrency={args.concurrency}): " + ", ".join(f"{w:.2f}s" for w in walls["concurrent"])
          + f"  -> median {conc:.2f}s, {len(texts) / conc:.1f} texts/s")
    print(f"[{name}]   ratio sequential/concurrent = {seq / conc:.2f}x; max |seq - conc| over vectors = {same:.2e}")
    return seq / conc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per mode, in ABBA order")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads of the started server")
    ap.add_argument("--latency-ms", type=float, default=200.0, help="per-request latency of the stand-in API")
    ap.add_argument("--only", choices=["llama", "latency"], default=None)
    ap.add_argument("--base-url", default=None, help="use a running endpoint instead of starting llama_cpp.server")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--api-key-env", default=None, help="NAME of the env var holding the endpoint's key")
    args = ap.parse_args()
    texts = _texts(args.texts)

    if args.only in (None, "latency"):
        httpd = start_latency_server(args.latency_ms / 1000.0)
        try:
            compare(f"latency {args.latency_ms:.0f} ms", f"http://127.0.0.1:{httpd.server_address[1]}/v1", "stand-in",
                    None, texts, args)
        finally:
            httpd.shutdown()
    if args.only in (None, "llama"):
        proc = None
        base_url = args.base_url
        if base_url is None:
            port = _free_port()
            log_path = Path(tempfile.mkdtemp(prefix="bench-emb-")) / "server.log"
            proc = start_llama(port, args.threads, log_path)
            base_url = f"http://127.0.0.1:{port}/v1"
        try:
            compare("llama_cpp.server" if proc else base_url, base_url, args.model, args.api_key_env, texts, args)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
