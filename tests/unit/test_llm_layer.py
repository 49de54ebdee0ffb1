"""The LLM layer's contracts: frozen cache keys, the failure policy (retry next run, never cache a failure or a
rejected reply as final, stop a stage whose calls all fail), judged metrics as declarations, the stage summaries'
llm keys, the table markers, sampling defaults from the schema, and the safe image decoder."""

from __future__ import annotations

import base64
import io
import json

import pandas as pd
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.core.errors import MmirError
from mmir.llm import (
    CallAudit,
    GenerationCache,
    GenerationFailure,
    JudgedMetric,
    LLMClient,
    LLMStageError,
    PromptLibrary,
    Sampling,
    UnsupportedInputError,
    check_stage,
    generation_key,
    get_parser,
    judge,
)
from mmir.llm.messages import decoded_image
from mmir.llm.parsers import JSON_OBJECT

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGPkEpFjYGBgYmBgYGBgAAAC5gBAXKUgWwAAAABJRU5ErkJggg==")


# ------------------------------------------------------------------------------------- frozen cache keys
def test_generation_keys_are_byte_compatible_with_the_old_code():
    """Both values were computed by the code at the fork point (mmir.llm.cache before the split): a cache written
    by it keeps hitting."""
    msgs = [{"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "image", "image": PNG},
                                         {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]
    key = generation_key(ScriptedBackend(model="scripted-1"), msgs, "t_v1", "Say $x",
                         temperature=0.7, max_tokens=64, seed=3, n=1)
    assert key == "b70dc133de9996120a8de05191dd55764fbcd261645392dc183b253942c23cda"

    from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS

    tpl = MMBRIGHT_PROMPTS.get("reformulate_v1")
    assert tpl.sha256 == "e82924c3596d58f89fa92cc3c3ef55f6c047e6efbb9585cff22c958fe7d6e985"
    qwen = ScriptedBackend(name="llama_cpp", model="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                           revision="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    msgs = [{"role": "user", "content": tpl.render(query="how to compute the mean of a sample", image_descriptions="(no images)")}]
    assert generation_key(qwen, msgs, tpl.id, tpl.text, temperature=0.0, max_tokens=256, seed=0, n=1) == \
        "6b17c61d5b6234e665ce85b4223ff2c37ac54e905790e3015d857db6e3beeace"


# ----------------------------------------------------------------------------------------- failure policy
def _prompt(tmp_path, text="Judge: $x"):
    (tmp_path / "p").mkdir(exist_ok=True)
    (tmp_path / "p" / "j_v1.txt").write_text(text)
    return PromptLibrary(tmp_path / "p").get("j_v1")


def _msgs(x):
    return [{"role": "user", "content": f"Judge: {x}"}]


def test_failed_call_and_rejected_reply_are_retried_next_run_ok_is_not(tmp_path):
    tpl = _prompt(tmp_path)
    replies = {"good": ['{"score": 1}'], "slow": [GenerationFailure("timeout", "slow"), '{"score": 2}'],
               "prose": ["no json at all", '{"score": 3}']}
    backend = ScriptedBackend(contains={k: v for k, v in replies.items()})
    path = tmp_path / "g.sqlite"

    def run():
        with GenerationCache(path) as cache:
            client = LLMClient(backend, cache)
            return {x: client.call(_msgs(x), tpl, label="j", parser=JSON_OBJECT) for x in ("good", "slow", "prose")}

    first = run()
    assert [first[x].status for x in ("good", "slow", "prose")] == ["ok", "failed", "rejected"]
    assert first["prose"].text == "no json at all" and first["prose"].error.startswith("json_object:")
    with GenerationCache(path) as cache:  # stored, but as failures: the rejected text is kept for reports
        recs = {r["error_kind"]: r for r in cache.failed_records()}
        assert set(recs) == {"timeout", "rejected_reply"} and recs["rejected_reply"]["texts"] == ["no json at all"]
    n = len(backend.calls)
    second = run()
    assert len(backend.calls) == n + 2  # the failed and the rejected call are made again, the good one is not
    assert second["good"].cached and not second["slow"].cached and not second["prose"].cached
    assert [second[x].value for x in ("good", "slow", "prose")] == [{"score": 1}, {"score": 2}, {"score": 3}]
    third = run()
    assert len(backend.calls) == n + 2 and all(r.cached for r in third.values())


def test_a_reply_cached_as_ok_by_the_old_code_is_rejected_and_retried(tmp_path):
    tpl = _prompt(tmp_path)
    backend = ScriptedBackend(["not json", '{"a": 1}'])
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        cache.cached_generate(backend, _msgs("x"), tpl.id, tpl.text)  # the old path: stored as ok, never parsed
        client = LLMClient(backend, cache, sampling=Sampling(0.0, 256, None))
        r = client.call(_msgs("x"), tpl, label="j", parser=JSON_OBJECT)
        assert r.cached and r.status == "rejected"
        assert client.call(_msgs("x"), tpl, label="j", parser=JSON_OBJECT).value == {"a": 1}
    assert len(backend.calls) == 2


def test_a_stage_whose_calls_all_fail_raises_and_writes_nothing(tmp_path, monkeypatch):
    from mmir.llm import backends
    from mmir.workflow import steps

    topics = pd.DataFrame({"qid": ["a", "b", "c"], "query": ["q1", "q2", "q3"], "image_paths": [[], [], []]})
    topics.to_parquet(tmp_path / "topics.parquet")
    pd.DataFrame({"path": [], "role": [], "text": []}).to_parquet(tmp_path / "caps.parquet")
    failing = ScriptedBackend(GenerationFailure("server_error", "HTTP 503 from the endpoint"))
    monkeypatch.setattr(backends, "make_backend", lambda cfg: failing)
    ref = {"generator": "g", "image_text": "ocr", "prompt": "reformulate_v1", "temperature": 0.0, "max_tokens": 256, "seed": 0}
    out, stats = tmp_path / "out" / "ref-x.parquet", tmp_path / "out" / "ref-x.json"
    with pytest.raises(LLMStageError) as e:
        steps.reformulate(tmp_path / "topics.parquet", tmp_path / "caps.parquet", ref, {"backend": "llama_cpp"},
                          tmp_path / "g.sqlite", out, stats)
    assert isinstance(e.value, MmirError) and e.value.stage == "reformulate" and e.value.calls == 3
    assert "ref-x.parquet" in str(e.value) and "HTTP 503" in str(e.value)
    assert not out.exists() and not stats.exists()
    # one call back: the stage succeeds, reports its llm keys, and the rerun retries only the failed calls
    monkeypatch.setattr(backends, "make_backend", lambda cfg: ScriptedBackend(
        lambda c: GenerationFailure("timeout", "slow") if "q2" in c else "Search query: better"))
    s = steps.reformulate(tmp_path / "topics.parquet", tmp_path / "caps.parquet", ref, {"backend": "llama_cpp"},
                          tmp_path / "g.sqlite", out, stats)
    assert (s["llm_calls"], s["llm_failures"], s["failed"]) == (3, 1, 1)
    assert json.loads(stats.read_text())["llm_failures"] == 1


def test_check_stage_counts_and_what_stops_a_stage():
    ok, bad = CallAudit(), CallAudit()
    from mmir.llm.records import CallRecord

    ok.add(CallRecord("j", "p", "h", "m", status="ok"))
    ok.add(CallRecord("j", "p", "h", "m", status="rejected"))
    ok.add(CallRecord("j", "p", "h", "m", status="skipped"))
    assert check_stage("s", "u", ok) == {"llm_calls": 2, "llm_failures": 1}
    only_rejected = CallAudit([CallRecord("j", "p", "h", "m", status="rejected")])
    assert check_stage("s", "u", only_rejected) == {"llm_calls": 1, "llm_failures": 1}  # the policy scores it
    bad.add(CallRecord("j", "p", "h", "m", status="failed", error="first"))
    bad.add(CallRecord("j", "p", "h", "m", status="failed", error="second"))
    with pytest.raises(LLMStageError, match="stage 's', unit d/x: all 2 LLM call.*First error: first"):
        check_stage("s", "d/x", ok, bad)
    assert check_stage("s", "u", CallAudit()) == {"llm_calls": 0, "llm_failures": 0}


# ------------------------------------------------------------------------------------ judged metrics
def test_a_new_judged_metric_is_a_prompt_file_a_parser_and_one_declaration(tmp_path):
    # the whole addition: this prompt file (2 lines) ...
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "judge_conciseness_v1.txt").write_text("Rate 0-10 how concise this answer is.\n$text\n")
    # ... and this declaration (1 line), with a parser chosen by name
    conciseness = JudgedMetric("conciseness", "judge_conciseness_v1", get_parser("last_integer"), divisor=10)

    backend = ScriptedBackend(lambda c: "Short and clear.\n8" if "brief" in c else "rambling, no score")
    client = LLMClient(backend)
    prompts = PromptLibrary(tmp_path / "prompts")
    good = judge(client, conciseness, prompts, {"text": "a brief answer"})
    bad = judge(client, conciseness, prompts, {"text": "a long answer"})
    assert (good.value, good.raw, good.status) == (0.8, 8, "ok")
    assert bad.value is None and bad.status == "failed" and bad.records[0].status == "rejected"
    assert client.audit.counts()["conciseness"]["parse_failures"] == 1


def test_a_retry_prompt_is_asked_once_when_the_first_reply_is_unusable(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a_v1.txt").write_text("Score $x")
    (tmp_path / "p" / "a_strict_v1.txt").write_text("Score $x. Reply with 'Score: <n>' only.")
    m = JudgedMetric("a", "a_v1", get_parser("score_0_100"), retry_prompt="a_strict_v1")
    v = judge(LLMClient(ScriptedBackend(lambda c: "Score: 70" if "only" in c else "good")), m,
              PromptLibrary(tmp_path / "p"), {"x": "it"})
    assert (v.value, v.status, [r.status for r in v.records]) == (70.0, "retried_ok", ["rejected", "ok"])


# ------------------------------------------------------------------------------------------- tables
def test_tables_mark_units_with_failed_calls(tmp_path):
    from mmir.reporting.ablation import ablation_frame, write_ablation
    from mmir.reporting.rag import collect_rag, write_rag_table

    derived = {"bm25+ref:q": {"base": "bm25", "variant": "ref-q", "grid": "reformulation", "source": "q"}}
    files = []
    for dom, system, v in (("s", "bm25", 0.861), ("s", "bm25+ref:q", 0.861)):
        p = tmp_path / f"{dom}-{system}.json"
        p.write_text(json.dumps({"dataset": "os", "domain": dom, "system": system, "queries": 3, "measures": {"nDCG@10": v}}))
        files.append(p)
    frame = ablation_frame(files, "nDCG@10", derived, {("os", "s", "bm25+ref:q"): {"llm_calls": 3, "llm_failures": 3}})
    out = {k: tmp_path / f"a.{k}" for k in ("md", "csv", "png", "pcsv")}
    write_ablation("reformulation", frame, "nDCG@10", out["md"], out["csv"], out["png"], out["pcsv"])
    md = out["md"].read_text()
    assert "| bm25 | 86.1 | 86.1 (+0.0)‡ |" in md and "q: 3 of 3" in md  # no longer a silent +0.0

    summ = []
    for setting, failures in (("none", 0), ("oracle", 2)):
        f = tmp_path / f"{setting}.json"
        f.write_text(json.dumps({"dataset": "os", "domain": "s", "setting": setting, "score": 50.0, "queries": 2,
                                 "answers_scored": 2, "judge_failures": 0, "llm_calls": 6, "llm_failures": failures}))
        summ.append(f)
    write_rag_table(collect_rag(summ), "g", "j", 1, tmp_path / "rag.md", tmp_path / "rag.csv")
    md = (tmp_path / "rag.md").read_text()
    assert "| None | 50.0 (2/2) |" in md and "| Oracle | 50.0 (2/2)‡ |" in md and "Oracle / s: 2 of 6" in md


# ------------------------------------------------------------------------------------ sampling in config
def test_every_sampling_setting_has_its_schema_default_equal_to_the_old_constant():
    from mmir.benchmarks.mmdr.check import evaluator_config
    from mmir.config.models import MMDREvaluatorConfig
    from mmir.workflow.validate import validate_config

    cfg = validate_config({"datasets": {"x": {"source": "trec", "root": ".", "domains": ["x"]}},
                           "systems": {"bm25": {"kind": "bm25"}}, "generators": {"g": {"backend": "llama_cpp"}},
                           "rag": {"generator": "g", "judge": "g"},
                           "m2rag": {"generator": "g", "judge": "g", "strategies": ["single_stage"], "image_text": None},
                           "mmdr": {"generator": "g", "judge": "g"}})
    rag, m2, md = cfg["rag"], cfg["m2rag"], cfg["mmdr"]
    # rag/judge.py: temperature = 0.0 if seed == 0 else 0.7, max_tokens=64; qa.py answers at 0.0
    assert (rag["judge_temperature"], rag["judge_repeat_temperature"], rag["judge_max_tokens"],
            rag["answer_temperature"]) == (0.0, 0.7, 64, 0.0)
    # workflow/m2rag.py _caller: temperature 0.0; metrics: 256 (0-10 judges, context precision), 1024 (faithfulness);
    # selection.score_images: 16
    assert (m2["answer_temperature"], m2["judge_temperature"], m2["metric_max_tokens"], m2["faithfulness_max_tokens"],
            m2["image_score_max_tokens"]) == (0.0, 0.0, 256, 1024, 16)
    ev = md["evaluator"]
    assert (ev["flae"]["temperature"], ev["controller"]["temperature"], ev["trace"]["temperature"],
            ev["vef"]["temperature"], ev["mosaic"]["classify_temperature"]) == (0.2, 0.2, 0.1, 0.1, 0.0)
    assert evaluator_config(md) == MMDREvaluatorConfig.from_mapping({"trace": {"schemes": ["http", "https", "file", "mmir"]},
                                                            "vef": {"attach_images": False},
                                                            "mosaic": {"engines": {"vqa_mode": "text"}}})


# -------------------------------------------------------------------------------------- safe decoding
def test_image_parts_go_through_the_safe_decoder():
    buf = io.BytesIO()
    Image.new("RGBA", (3, 2), (255, 0, 0, 0)).save(buf, format="PNG")
    im = decoded_image(buf.getvalue(), "message 0, part 1")
    assert im.mode == "RGB" and im.size == (3, 2) and im.getpixel((0, 0)) == (255, 255, 255)  # transparent -> white
    assert decoded_image(Image.new("LA", (2, 2)), "m").mode == "RGB"
    with pytest.raises(UnsupportedInputError, match="message 0, part 1"):
        decoded_image(b"\x89PNG\r\n\x1a\n truncated", "message 0, part 1")
