"""The ``vlm`` reranker end to end against a real OpenAI-compatible server: ``transformers serve`` serving a tiny
randomly initialised Qwen2-VL (the real architecture, saved with its processor and chat template and loaded by the
server's own loading path), on Task 3 of a sample of the real openstax statistics domain (its queries with their
images, its images as candidates), through the rerank step; and the same reranker through mmir's in-process
``transformers`` backend.

- Gibberish: the model's vocabulary is words only (no digit, no bracket), so no reply holds a grade or an identifier:
  every call is a counted unparseable reply, the written ranking is the documented fallback (pointwise: unscored
  candidates keep their first-stage order; listwise: a window without a permutation keeps its input order) with
  strict scores ``n .. 1``, and a rerun asks the model again for every call (failed calls are retried).
- Constrained: the same architecture answering only with identifiers and grades (its generation config suppresses
  every other token): the ranking is the one its replies give, computed here from the audited replies; a rerun takes
  the accepted replies from the cache (no request) and asks again for the rejected ones only.

That each request carried its images is checked on the model's side: the prompt tokens the server (or backend)
counted equal those of the saved processor applied here to the same messages and images. transformers serve
(5.24) puts the generation prompt's tail (``<|im_start|> assistant``) in front of each reply for this toy chat
template (its response parser finds no anchor); the parsers read past it."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from conftest import shared

torch = pytest.importorskip("torch")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytestmark = [pytest.mark.integration, pytest.mark.slow]  # about 2 minutes on 2 busy cores

from mmir.config.models import VLMReranker  # noqa: E402
from mmir.retrieval.rerank.candidates import TaskCandidates  # noqa: E402
from mmir.retrieval.rerank.listwise import windows  # noqa: E402
from mmir.retrieval.runs import read_run, write_run  # noqa: E402
from tests.unit.test_generation_transformers import CHAT_TEMPLATE, _tokenizer, tiny_qwen2vl  # noqa: E402

TASK, DEPTH, RANKED = "task3", 4, 6  # rerank the top 4 of a 6-item first-stage ranking (the tail must stay put)
KEY_ENV = "MMIR_TEST_VLM_SERVER_KEY"
POST = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" 200')
RERANKERS = {
    "pointwise": {"kind": "vlm", "generator": "tiny", "mode": "pointwise", "query_images": 1, "max_tokens": 8,
                  "max_chars": 200, "image_side": 64},
    "listwise": {"kind": "vlm", "generator": "tiny", "mode": "listwise", "window": 3, "step": 2, "query_images": 1,
                 "max_tokens": 8, "max_chars": 200, "image_side": 64},
}


# ----------------------------------------------------------------------------------------------- fixtures
#: the words a constrained model may answer with: identifiers, RankGPT's separator, the rubric's marker and grades
ANSWERS = ["[1]", "[2]", "[3]", ">", "Score:", "0", "1", "2", "3", "4"]


def _save_tiny_vlm(path: Path, answers: list[str] | None = None, seed: int = 0) -> Path:
    """A tiny random Qwen2VLForConditionalGeneration (``seed``) with its Qwen2VLProcessor (the word-level tokenizer of
    test_generation_transformers, plus ``answers``) and chat template, saved to ``path``.

    Its generation_config.json, as a hub model's may, suppresses tokens: the special ones other than the end (a random
    model's first token is often one, and a reply that decodes to nothing is a failed call, not an unparseable one),
    and with ``answers`` every word that is not one of them (constrained decoding: the random model then answers with
    grades and identifiers that the parsers read, in an order its weights decide)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2VLForConditionalGeneration,
    )

    _, base = _tokenizer()
    vocab = dict(base)
    for w in answers or []:
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")
    specials = [t for t in vocab if t.startswith("<")]
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>"},
        additional_special_tokens=specials[3:],
    )
    tok.chat_template = CHAT_TEMPLATE
    proc, cfg = tiny_qwen2vl(tok, vocab, max_positions=4096)
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(cfg)
    allowed = {"<eos>", *(answers or [w for w in vocab if not w.startswith("<")])}
    model.generation_config.suppress_tokens = [i for t, i in vocab.items() if t not in allowed]
    model.generation_config.min_new_tokens = 1
    model.save_pretrained(path)
    proc.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory) -> Path:
    """The gibberish model: its words hold no digit and no bracket, so no reply holds a grade or an identifier."""
    _, vocab = _tokenizer()
    assert not any(re.search(r"[\d\[\]]", w) for w in vocab)
    return _save_tiny_vlm(tmp_path_factory.mktemp("tiny-qwen2vl"))


@pytest.fixture(scope="module")
def constrained_vlm(tmp_path_factory) -> Path:
    """A model answering only with :data:`ANSWERS`; seed 9: its replies to these prompts hold grades and
    identifiers for some calls and not for others (both modes), so both paths of the policy run."""
    return _save_tiny_vlm(tmp_path_factory.mktemp("tiny-qwen2vl-constrained"), ANSWERS, seed=9)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(model: Path, log: Path):
    """``transformers serve <model>`` on a free localhost port (CPU), up to its /health; yields ``(base_url, log)``
    and stops it (its process group) after."""
    port = _free_port()
    cli = Path(sys.executable).parent / "transformers"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with open(log, "w") as out:
        proc = subprocess.Popen([str(cli), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu", "--log-level", "info"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if json.load(r).get("status") == "ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not come up (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def server(tiny_vlm, tmp_path_factory):
    yield from _serve(tiny_vlm, tmp_path_factory.mktemp("serve") / "serve.log")


@pytest.fixture(scope="module")
def constrained_server(constrained_vlm, tmp_path_factory):
    yield from _serve(constrained_vlm, tmp_path_factory.mktemp("serve-constrained") / "serve.log")


@pytest.fixture(scope="module")
def openstax(tmp_path_factory):
    """A prepared 3-query sample of openstax statistics, its captions (the images' real alt text) and a Task 3
    first-stage run: per query, its judged images (qrels positives, then its hard negatives), the first 6."""
    from mmir.data.prepare import prepare_domain, write_prepared
    from mmir.retrieval.items import task_items

    root = tmp_path_factory.mktemp("openstax")
    ds = {"source": "local", "root": str(shared("openstax")), "integrity": {},
          "sample": {"queries": 3, "corpus": "judged", "distractors": 3, "seed": 0}}
    prep = root / "prep"
    write_prepared(prepare_domain("openstax", ds, "statistics"), prep)
    images = pd.read_parquet(prep / "images.parquet", columns=["path", "alt"])
    captions = root / "captions.parquet"
    images.rename(columns={"alt": "text"}).fillna("").to_parquet(captions)
    known = set(task_items(TASK, prep).ids)
    topics = pd.read_parquet(prep / "topics_mm.parquet")
    run = {}
    for t in topics.itertuples():
        judged = [p for p in [*t.positive_images, *t.negative_images] if p in known]
        judged = list(dict.fromkeys(judged))[:RANKED]
        if len(judged) >= DEPTH + 1 and len(t.image_paths):
            run[t.qid] = [(p, float(RANKED - r)) for r, p in enumerate(judged)]
    assert len(run) >= 2, "the sample should give at least 2 Task 3 queries with images and 5+ judged images"
    first = root / "first.trec"
    write_run(first, run, "judged")
    return prep, captions, first, run


def _job(openstax, out: Path, mode: str, generator: dict):
    from mmir.workflow.rerank_steps import RerankJob

    prep, captions, first, _ = openstax
    return RerankJob(TASK, prep, f"judged+rr:vlm-{mode}", f"vlm-{mode}", RERANKERS[mode], DEPTH, first,
                     out / f"{mode}.trec", out / f"{mode}.json", out / f"{mode}.calls.jsonl", generator=generator,
                     generation_cache=out / "gen.sqlite", captions=captions)


# ----------------------------------------------------------------------------------------------- checks
def _expected_calls(openstax, mode: str) -> list[tuple[str, list[str]]]:
    """``(qid, candidate ids of the call)`` of every call the documented policy makes, in order: pointwise one per
    candidate of the top ``DEPTH``; listwise the RankGPT windows (bottom first), which all keep their input order."""
    _, _, _, run = openstax
    cfg = VLMReranker(**RERANKERS[mode])
    out = []
    for qid in sorted(run):
        head = [d for d, _ in run[qid][:DEPTH]]
        if mode == "pointwise":
            out += [(qid, [d]) for d in head]
        else:
            out += [(qid, head[s:e]) for s, e in windows(len(head), cfg.window, cfg.step)]
    return out


def _n_images(cands: TaskCandidates, qid: str, ids: list[str]) -> int:
    """Images a call must carry: the query's first ``query_images`` images, one per candidate (each is an image)."""
    q = cands.query(qid)
    return min(len(q.images), RERANKERS["pointwise"]["query_images"]) + sum(c.image is not None for c in cands.candidates(ids))


def _processor_tokens(tiny_vlm: Path, messages: list[dict]) -> int:
    """Prompt tokens of ``messages`` (mmir's parts: text, image bytes) by the saved processor, run here."""
    from PIL import Image
    from transformers import AutoProcessor

    proc = AutoProcessor.from_pretrained(tiny_vlm)
    conv = [{"role": m["role"], "content": [{"type": "text", "text": p["text"]} if p["type"] == "text" else
                                            {"type": "image", "image": Image.open(io.BytesIO(p["image"])).convert("RGB")}
                                            for p in m["content"]]} for m in messages]
    enc = proc.apply_chat_template(conv, tokenize=True, add_generation_prompt=True, return_dict=True)
    return len(enc["input_ids"][0])


def _check_policy(openstax, out: Path, mode: str, stats: dict, records: list[dict]) -> None:
    """The written run, the stats and the audit against the documented fallback policy."""
    _, _, _, run = openstax
    calls = _expected_calls(openstax, mode)
    assert stats["llm_calls"] == len(records) == len(calls) and stats["llm_failures"] == len(calls)
    assert all(r["status"] == "rejected" and r["text"] for r in records)  # a reply came, and could not be read
    assert [(r["context"]["qid"], _call_ids(r, mode)) for r in records] == calls
    if mode == "pointwise":
        assert stats["unscored"] == len(calls) and stats["windows"] == 0
    else:
        assert stats["windows"] == stats["windows_kept"] == len(calls) and stats["unscored"] == 0
    got = read_run(out / f"{mode}.trec")
    assert sorted(got) == sorted(run)
    for qid, ranking in run.items():  # every call unparseable: the first-stage order, strict scores n .. 1
        assert [d for d, _ in got[qid]] == [d for d, _ in ranking]
        assert [s for _, s in got[qid]] == [float(len(ranking) - r) for r in range(len(ranking))]


def _records(out: Path, mode: str) -> list[dict]:
    return [json.loads(line) for line in (out / f"{mode}.calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("mode", ["pointwise", "listwise"])
def test_vlm_reranker_through_transformers_serve(mode, server, tiny_vlm, openstax, tmp_path, monkeypatch):
    from mmir.workflow.rerank_steps import rerank

    base_url, log = server
    monkeypatch.setenv(KEY_ENV, "dummy-key-for-a-local-server")
    generator = {"backend": "openai", "model": str(tiny_vlm), "base_url": base_url, "api_key_env": KEY_ENV,
                 "max_retries": 0, "timeout_s": 120, "max_concurrency": 1}
    job = _job(openstax, tmp_path, mode, generator)
    posts0 = len(POST.findall(log.read_text()))
    stats = rerank(job)
    records = _records(tmp_path, mode)
    posts1 = len(POST.findall(log.read_text()))
    _check_policy(openstax, tmp_path, mode, stats, records)
    assert posts1 - posts0 == len(records)  # every call reached the server once
    assert stats["model"] == str(tiny_vlm) and all(r["model"] == str(tiny_vlm) for r in records)

    # each request carried its images: the server's prompt tokens equal the processor's on the same messages here
    _check_images(openstax, tiny_vlm, mode, generator, records)

    # a plain rerun: the unparseable replies are failures, so it calls the server again for each of them (the
    # documented policy: a rerun retries failed calls), gets the same greedy replies and writes the same run
    first_run = (tmp_path / f"{mode}.trec").read_text()
    stats2 = rerank(job)
    posts2 = len(POST.findall(log.read_text()))
    assert posts2 - posts1 == len(records)
    assert stats2["cache_hits"] == 0 and stats2["cache_backend_calls"] == len(records)
    assert [r["text"] for r in _records(tmp_path, mode)] == [r["text"] for r in records]
    assert (tmp_path / f"{mode}.trec").read_text() == first_run


def _call_ids(r: dict, mode: str) -> list[str]:
    return [r["context"]["candidate"]] if mode == "pointwise" else r["context"]["window"]



def _check_images(openstax, tiny_vlm: Path, mode: str, generator: dict, records: list[dict]) -> None:
    """Each call's message holds its query image and every candidate's image, and the prompt tokens the model saw
    (``prompt_tokens`` of the record) equal the saved processor's count of the same messages with those images."""
    from mmir.llm.backends import make_backend
    from mmir.llm.client import LLMClient
    from mmir.retrieval.items import ImageText
    from mmir.retrieval.rerank.llm import LLMReranker
    from mmir.workflow.rerank_steps import reranker_prompt

    prep, captions, _, _ = openstax
    cands = TaskCandidates(TASK, prep, ImageText.load(captions, prep, False), with_images=True)
    cfg = VLMReranker(**RERANKERS[mode])
    rr = LLMReranker(LLMClient(make_backend(generator)), cfg, reranker_prompt(cfg), images=True)  # builds messages only
    for r in records:
        qid, ids = r["context"]["qid"], _call_ids(r, mode)
        q, cs = cands.query(qid), cands.candidates(ids)
        msgs = rr.pointwise_messages(q, cs[0]) if mode == "pointwise" else rr.listwise_messages(q, cs)
        assert sum(p["type"] == "image" for p in msgs[0]["content"]) == _n_images(cands, qid, ids) >= 2
        assert r["prompt_tokens"] == _processor_tokens(tiny_vlm, msgs)


@pytest.mark.parametrize("mode", ["pointwise", "listwise"])
def test_vlm_reranker_through_the_transformers_backend(mode, tiny_vlm, openstax, tmp_path):
    """The same reranker on the same model in-process (mmir's ``transformers`` backend): the same policy."""
    from mmir.workflow.rerank_steps import rerank

    generator = {"backend": "transformers", "model": str(tiny_vlm), "local_files_only": True, "device": "cpu"}
    job = _job(openstax, tmp_path, mode, generator)
    stats = rerank(job)
    records = _records(tmp_path, mode)
    _check_policy(openstax, tmp_path, mode, stats, records)
    assert stats["cache_backend_calls"] == len(records) and stats["cache_hits"] == 0
    _check_images(openstax, tiny_vlm, mode, generator, records)
    stats2 = rerank(job)  # the rerun retries every unparseable reply and writes the same run
    assert stats2["cache_backend_calls"] == len(records) and stats2["cache_hits"] == 0
    assert [r["text"] for r in _records(tmp_path, mode)] == [r["text"] for r in records]


# ------------------------------------------------------------------ constrained replies: orders the model decides
def _grade(text: str) -> float | None:
    """The rubric's grade of a reply, read here: the number after the last "score" (any case, up to 3 non-word
    characters between), else a reply that is only a number; in 0-4, else none."""
    m = re.findall(r"(?i)score\W{0,3}(\d+)", text)
    v = int(m[-1]) if m else (int(text.strip()) if text.strip().isdigit() else None)
    return float(v) if v is not None and 0 <= v <= 4 else None


def _permutation(text: str, n: int) -> list[int] | None:
    """RankGPT's clean_response + remove_duplicate, read here: bracketed identifiers (else bare numbers) in reply
    order, repeats and out-of-range ones dropped, the missing ones appended in input order; None without any."""
    found = re.findall(r"\[(\d+)\]", text) or re.findall(r"\d+", text)
    seen: list[int] = []
    for t in found:
        if 0 <= int(t) - 1 < n and int(t) - 1 not in seen:
            seen.append(int(t) - 1)
    return seen + [k for k in range(n) if k not in seen] if seen else None


def _expected_order(openstax, mode: str, records: list[dict]) -> dict[str, list[str]]:
    """Each query's reranked head from the replies alone: pointwise a stable sort on the grades (ungraded last, in
    first-stage order); listwise RankGPT's loop (bottom window first, clamped at 0), each window replaced by its reply's
    permutation or kept. Checks that the calls went in this order over these candidates."""
    _, _, _, run = openstax
    cfg = VLMReranker(**RERANKERS[mode])
    calls = iter(records)
    out = {}
    for qid in sorted(run):
        head = [d for d, _ in run[qid][:DEPTH]]
        if mode == "pointwise":
            recs = [next(calls) for _ in head]
            assert [(r["context"]["qid"], r["context"]["candidate"]) for r in recs] == [(qid, d) for d in head]
            grades = [_grade(r["text"] or "") for r in recs]
            scored = sorted((-g, i) for i, g in enumerate(grades) if g is not None)
            out[qid] = [head[i] for _, i in scored] + [head[i] for i, g in enumerate(grades) if g is None]
            continue
        end = len(head)
        while True:
            start = max(0, end - cfg.window)
            part, r = head[start:end], next(calls)
            assert (r["context"]["qid"], r["context"]["window"]) == (qid, part)
            perm = _permutation(r["text"] or "", len(part))
            if perm is not None:
                head[start:end] = [part[k] for k in perm]
            if start == 0:
                break
            end -= cfg.step
        out[qid] = head
    assert next(calls, None) is None
    return out


@pytest.mark.parametrize("backend", ["server", "transformers"])
@pytest.mark.parametrize("mode", ["pointwise", "listwise"])
def test_vlm_reranker_orders_by_what_the_model_answers(mode, backend, constrained_server, constrained_vlm, openstax,
                                                       tmp_path, monkeypatch):
    """A model that answers with grades and identifiers only: the written run is the order its replies give (computed
    here from the audited replies), the counts match, and a rerun takes every accepted reply from the cache and
    calls the model again for the rejected ones only."""
    from mmir.workflow.rerank_steps import rerank

    base_url, log = constrained_server
    monkeypatch.setenv(KEY_ENV, "dummy-key-for-a-local-server")
    generator = ({"backend": "openai", "model": str(constrained_vlm), "base_url": base_url, "api_key_env": KEY_ENV,
                  "max_retries": 0, "timeout_s": 120, "max_concurrency": 1} if backend == "server" else
                 {"backend": "transformers", "model": str(constrained_vlm), "local_files_only": True, "device": "cpu"})
    job = _job(openstax, tmp_path, mode, generator)
    posts0 = len(POST.findall(log.read_text()))
    stats = rerank(job)
    records = _records(tmp_path, mode)
    posts1 = len(POST.findall(log.read_text()))
    assert posts1 - posts0 == (len(records) if backend == "server" else 0)
    _, _, _, run = openstax
    expected = _expected_order(openstax, mode, records)
    got = read_run(tmp_path / f"{mode}.trec")
    for qid, ranking in run.items():
        assert [d for d, _ in got[qid]] == expected[qid] + [d for d, _ in ranking[DEPTH:]]
        assert [s for _, s in got[qid]] == [float(len(ranking) - r) for r in range(len(ranking))]
    ok = [r["status"] == "ok" for r in records]
    assert 0 < ok.count(True) < len(ok), "seed 9's replies should mix accepted and rejected ones: pick another seed"
    assert all(r["status"] in ("ok", "rejected") for r in records)
    assert stats["llm_calls"] == len(records) and stats["llm_failures"] == ok.count(False)
    assert stats["unscored" if mode == "pointwise" else "windows_kept"] == ok.count(False)
    if mode == "listwise":
        partial = [r["status"] == "ok" and _permutation(r["text"], len(r["context"]["window"])) is not None
                   and len(set(re.findall(r"\[(\d+)\]", r["text"]) or re.findall(r"\d+", r["text"]))
                           & {str(k) for k in range(1, len(r["context"]["window"]) + 1)}) < len(r["context"]["window"])
                   for r in records]
        assert stats["windows_partial"] == sum(partial)
    _check_images(openstax, constrained_vlm, mode, generator, records)

    stats2 = rerank(job)  # accepted replies come from the cache, rejected ones are asked again
    assert stats2["cache_hits"] == ok.count(True) and stats2["cache_backend_calls"] == ok.count(False)
    assert len(POST.findall(log.read_text())) - posts1 == (ok.count(False) if backend == "server" else 0)
    assert read_run(tmp_path / f"{mode}.trec") == got
