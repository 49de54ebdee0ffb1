"""Concurrent vs sequential requests through OpenAIBackend against a local OpenAI-compatible server.

Starts ``python -m llama_cpp.server`` with the offline Qwen2.5-Coder-0.5B GGUF on 127.0.0.1 (unless
``--base-url`` points at a running endpoint), times N requests sent one after another and the same N sent
through ``generate_many`` with ``max_concurrency=N`` (``--rounds`` of each, in ABBA order so changing load
on shared CPUs hits both alike), and prints every wall time and the ratio of the medians.

Note: llama-cpp-python's server (0.3.x) has no parallel slots (no ``--n_parallel``): it serialises
requests behind a lock, so on this server concurrency can only hide per-request HTTP/client overhead.
Against a server with parallel decoding (vLLM, llama.cpp's own ``llama-server -np``, hosted APIs) the
same code overlaps requests.

Usage: .venv/bin/python bench/bench_llm_concurrency.py [--n 8] [--max-tokens 16] [--rounds 2]
       [--base-url URL --model NAME --api-key-env VAR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from mmir.config.models import OpenAIGenerator
from mmir.llm import OpenAIBackend
from mmir.llm.offline import qwen05b_gguf_path

TOPICS = ["binary search", "TCP handshake", "photosynthesis", "Bayes' theorem", "hash tables", "RSA keys",
          "gradient descent", "the Doppler effect", "B-trees", "Dijkstra's algorithm", "entropy", "mutexes"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(gguf: Path, port: int, n_threads: int, log_path: Path, timeout_s: float = 120.0) -> subprocess.Popen:
    """Start llama_cpp.server and wait until ``/v1/models`` answers; raises RuntimeError if it does not."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port",
           str(port), "--n_ctx", "2048", "--n_threads", str(n_threads)]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="number of requests")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per mode, in ABBA... order")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads of the started server")
    ap.add_argument("--base-url", default=None, help="use a running endpoint instead of starting a server")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--api-key-env", default=None, help="NAME of the env var holding the endpoint's key")
    args = ap.parse_args()

    proc = None
    base_url = args.base_url
    if base_url is None:
        gguf = qwen05b_gguf_path()
        port = _free_port()
        log_path = Path(tempfile.mkdtemp(prefix="bench-llm-")) / "server.log"
        t0 = time.monotonic()
        proc = start_server(gguf, port, args.threads, log_path)
        print(f"llama_cpp.server ready in {time.monotonic() - t0:.1f}s (n_threads={args.threads}, log {log_path})")
        base_url = f"http://127.0.0.1:{port}/v1"
    try:
        b = OpenAIBackend(OpenAIGenerator(backend="openai", model=args.model, base_url=base_url, api_key_env=args.api_key_env,
                                          timeout_s=300, max_concurrency=args.n, max_retries=0))
        prompts = [[{"role": "user", "content": f"In one sentence, what is {TOPICS[i % len(TOPICS)]}?"}]
                   for i in range(args.n)]
        b.generate([{"role": "user", "content": "Say hi."}], max_tokens=4)  # warm-up, not timed

        def sequential():
            return [b.generate(p, max_tokens=args.max_tokens, seed=0) for p in prompts]

        def concurrent():
            return b.generate_many([{"messages": p, "max_tokens": args.max_tokens, "seed": 0} for p in prompts])

        # ABBA order over rounds, so drift in machine load (shared CPUs) hits both modes alike
        times: dict[str, list[float]] = {"sequential": [], "concurrent": []}
        outputs: dict[str, list] = {}
        print(f"requests: {args.n} x max_tokens={args.max_tokens} against {base_url}, {args.rounds} round(s) per mode")
        order = []
        for r in range(args.rounds):
            order += ["sequential", "concurrent"] if r % 2 == 0 else ["concurrent", "sequential"]
        for mode in order:
            t0 = time.monotonic()
            gens = sequential() if mode == "sequential" else concurrent()
            dt = time.monotonic() - t0
            times[mode].append(dt)
            outputs[mode] = gens
            toks = sum(g.completion_tokens or 0 for g in gens)
            print(f"  {mode:<10} {dt:7.2f} s  {toks} completion tokens  {toks / dt:5.1f} tok/s")
        t_seq, t_conc = statistics.median(times["sequential"]), statistics.median(times["concurrent"])
        same = sum(a.texts == c.texts for a, c in zip(outputs["sequential"], outputs["concurrent"]))
        print(f"median wall time: sequential {t_seq:.2f} s, concurrent (max_concurrency={args.n}) {t_conc:.2f} s")
        print(f"speed-up (median sequential / median concurrent): {t_seq / t_conc:.2f}x")
        print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
        print(f"identical outputs (greedy): {same}/{args.n}")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
