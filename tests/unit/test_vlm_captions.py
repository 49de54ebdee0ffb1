"""VLM captions through the real OpenAI SDK against a small OpenAI-compatible server started on 127.0.0.1."""

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from PIL import Image

from mmir.benchmarks.mmbright.captions import vlm_captions
from mmir.llm import GenerationCache, LLMClient, make_backend


def png(color) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 6), color).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            parts = body["messages"][0]["content"]
            images = [p for p in parts if p.get("type") == "image_url"]
            seen.append({"auth": self.headers.get("Authorization"), "images": images})
            url = images[0]["image_url"]["url"] if images else ""
            # a PNG data URI (base64 "iVBOR...") gets a caption; anything else an empty reply (a failure)
            text = f"A picture ({len(url)} chars of data URI)." if "base64,iVBOR" in url else ""
            reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    httpd.shutdown()


def test_vlm_captions_send_images_and_cache(server, tmp_path, monkeypatch):
    url, seen = server
    monkeypatch.setenv("VLM_KEY", "sk-test-SECRET-vlm")
    images = pd.DataFrame({"path": ["a.png", "b.png", "broken.png"], "bytes": [png((255, 0, 0)), png((0, 255, 0)), b"x"],
                           "ok": [True, True, False]})
    gen = {"backend": "openai", "model": "vlm-test", "base_url": url, "api_key_env": "VLM_KEY", "max_retries": 0}
    cap = {"kind": "vlm", "generator": "g", "prompt": "caption_v1", "max_tokens": 64, "temperature": 0.0, "seed": 0}
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        texts, counts = vlm_captions(images, cap, LLMClient(make_backend(gen), cache))
        assert cache.stats["backend_calls"] == 2
    assert texts[0].startswith("A picture") and texts[1].startswith("A picture") and texts[2] == ""
    assert counts["captioned"] == 2 and counts["failed"] == 0
    assert len(seen) == 2 and all(len(s["images"]) == 1 for s in seen)
    assert seen[0]["images"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert seen[0]["auth"] == "Bearer sk-test-SECRET-vlm"  # the key reaches the server, and only the server
    assert "SECRET" not in (tmp_path / "g.sqlite").read_bytes().decode("latin-1")
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        again, _ = vlm_captions(images, cap, LLMClient(make_backend(gen), cache))
        assert cache.stats["backend_calls"] == 0
    assert again == texts and len(seen) == 2
