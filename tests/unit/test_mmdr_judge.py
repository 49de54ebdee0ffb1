"""mmir.benchmarks.mmdr.judge: the audit log and cached calls through the scripted backend."""

from __future__ import annotations

import json

import pytest
from scripted import STEPS, ScriptedBackend

from mmir.benchmarks.mmdr.controller import ControllerConfig, run_controller
from mmir.benchmarks.mmdr.judge import MMDR_PROMPTS, Judge, as_number
from mmir.llm.backends import GenerationFailure
from mmir.llm.cache import GenerationCache
from mmir.llm.parsers import JSON_ARRAY, JSON_OBJECT


def test_parse_json_object():
    p = JSON_OBJECT('{"a": 1}')
    assert (p.value, p.method, p.error) == ({"a": 1}, "whole", None)
    p = JSON_OBJECT('Sure! ```json\n{"a": 1}\n``` done')
    assert (p.value, p.method) == ({"a": 1}, "span")
    for bad in ("", "   ", "no json here", "{}", "[1, 2]", '{"a": 1', "```{not json}```"):
        p = JSON_OBJECT(bad)
        assert p.value is None and p.method is None and p.error, bad


def test_parse_json_array():
    assert JSON_ARRAY('[{"a": 1}, 3]').value == [{"a": 1}]
    assert JSON_ARRAY('text ```json\n[{"claim": "x"}]\n```').value == [{"claim": "x"}]
    assert JSON_ARRAY("[]").value == []
    assert JSON_ARRAY('{"a": 1}').value is None
    assert JSON_ARRAY("").value is None


def test_as_number():
    assert as_number(1) == 1.0 and as_number("0.5") == 0.5 and as_number(" 7 ") == 7.0
    for bad in (True, None, "x", float("nan"), float("inf"), [1], {"a": 1}):
        assert as_number(bad) is None


def test_every_prompt_has_a_step_line_and_renders():
    ids = [n for n in MMDR_PROMPTS.names() if n != "report_baseline_v1"]  # the report writer's prompt has no step
    assert len(ids) == 10
    judge = Judge(ScriptedBackend())
    for pid in ids:
        tpl = judge.template(pid)
        if pid != "mmdr_rules_v1":
            assert tpl.text.splitlines()[0].startswith("MMDR judge step: ")
            assert tpl.text.splitlines()[0].split(": ", 1)[1] in STEPS.values()
        tpl.render(**{f: "x" for f in tpl.fields})
    assert len(judge.template("mmdr_rules_v1").text) <= 1400  # the judges see at most 1,400 rules characters


def test_audit_records_parse_failures_and_fallbacks():
    backend = ScriptedBackend(steps={"controller": ["not json at all", '{"v_general": [1, "x"], "lambda_final": 0.4}',
                                              GenerationFailure("timeout", "slow")]})
    judge = Judge(backend)
    out1 = run_controller(judge, "task", "research")
    out2 = run_controller(judge, "task", "research", use="trace")
    out3 = run_controller(judge, "task", "research")
    assert out1.fallback_used and out1.v_general == (0.0, 0.0, 0.0, 0.0) and out1.lambda_final == 0.55
    assert not out2.fallback_used and out2.v_general == (1.0, 0.0, 0.0, 0.0) and out2.v_evidence == (0, 0, 0, 0)
    assert out3.fallback_used
    r1, r2, r3 = judge.audit.records
    assert (r1.parse_ok, r1.fallback_used, r1.text, r1.status) == (False, True, "not json at all", "rejected")
    assert r2.parse_ok and "v_evidence" in r2.missing_fields and "v_general[1]" in r2.invalid_fields
    assert r3.status == "failed" and r3.text is None and r3.fallback_used
    assert judge.audit.counts()["controller"] == {"calls": 3, "cached": 0, "skipped": 0, "generation_failures": 1,
                                                  "parse_failures": 1, "partial": 1, "fallbacks": 2}
    assert judge.audit.fallback_counts() == {"controller": 2}
    lines = [json.loads(x) for x in judge.audit.to_jsonl().splitlines()]
    assert [x["label"] for x in lines] == ["controller"] * 3 and lines[1]["context"]["use"] == "trace"


def test_cached_calls_and_separate_controller_seeds(tmp_path):
    reply = '{"task_family": "survey", "v_general": [0, 0.5, 0, 0], "v_evidence": [0, 0, 0, 0], "lambda_final": 0.4}'
    backend = ScriptedBackend(steps={"controller": reply})
    with GenerationCache(tmp_path / "gen.sqlite") as cache:
        judge = Judge(backend, cache=cache, seed=7)
        a = run_controller(judge, "task", "research", use="flae")
        b = run_controller(judge, "task", "research", use="trace")  # separate mode: a different seed -> a new call
        c = run_controller(judge, "task", "research", use="flae")  # same request as a -> cache hit
        assert a.v_general == b.v_general == c.v_general == (0.0, 0.5, 0.0, 0.0)
        assert [r.cached for r in judge.audit.records] == [False, False, True]
        assert [r.seed for r in judge.audit.records] == [7, 8, 7]
        assert len(backend.calls) == 2
        shared = Judge(backend, cache=cache, seed=7)
        run_controller(shared, "task", "research", use="trace", cfg=ControllerConfig(mode="shared"))
        assert shared.audit.records[0].cached  # shared mode: same seed as the flae call
    assert judge.prompt_hashes().keys() == {"mmdr_controller_v1"}
    assert judge.identity()["model"] == "scripted"


def test_record_skipped_counts_as_fallback():
    judge = Judge(ScriptedBackend())
    judge.record_skipped("mm_vqa", "no logprobs", {"item": 1})
    assert judge.audit.counts()["mm_vqa"]["skipped"] == 1
    assert judge.audit.fallback_counts() == {"mm_vqa": 1}


def test_template_field_mismatch_raises():
    judge = Judge(ScriptedBackend(default="{}"))
    with pytest.raises(ValueError):
        judge.complete("controller", "mmdr_controller_v1", {"task": "t"}, temperature=0.2)
