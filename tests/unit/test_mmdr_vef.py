"""mmir.benchmarks.mmdr.vef: VEF threshold (code) vs strict mode, no-GT rule, unparseable replies, judge inputs (spec §5.5)."""

from __future__ import annotations

import json

import pytest
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.vef import VEFConfig, parse_vef, run_vef, segment_for


def _run(reply, cfg=VEFConfig(), **kw):
    backend = ScriptedBackend(steps={"vef": reply if isinstance(reply, str) else json.dumps(reply)})
    judge = Judge(backend)
    res = run_vef(judge, kw.pop("question", "What does the chart show?"), kw.pop("gt", "Bar chart; 2022 peak 3.4"),
                  kw.pop("report", "The chart peaks in 2022 at 3.4."), kw.pop("profile", "research"), cfg=cfg, **kw)
    return res, judge, backend


def test_no_ground_truth_means_zero_and_no_call():
    res, judge, backend = _run({"score": 10, "verdict": "PASS"}, gt="  ")
    assert (res.score, res.raw_score, res.verdict, res.has_gt) == (0.0, 0, "N/A", False)
    assert backend.calls == [] and len(judge.audit) == 0


@pytest.mark.parametrize("reply,code,strict", [
    ({"score": 7, "verdict": "PASS", "reason": "ok"}, 100.0, 100.0),
    ({"score": 6, "verdict": "FAIL", "reason": "judge says fail"}, 100.0, 0.0),  # code ignores the verdict
    ({"score": 5, "verdict": "PASS", "reason": "x"}, 0.0, 0.0),
    ({"score": "8", "verdict": "pass"}, 100.0, 100.0),
    ({"score": 6.9, "verdict": "PASS"}, 100.0, 100.0),
    ({"score": 5.99, "verdict": "PASS"}, 0.0, 0.0),  # int() truncation, as the code
    ({"score": 85, "verdict": "PASS"}, 100.0, 100.0),  # a 0-100 reply passes: the scale quirk (fixed by our prompt)
])
def test_threshold_code_and_strict(reply, code, strict):
    assert _run(reply)[0].score == code
    assert _run(reply, VEFConfig(strict=True))[0].score == strict


def test_verdict_forced_to_fail_below_threshold():
    res = parse_vef({"score": 3, "verdict": "PASS"})
    assert res.verdict == "FAIL" and res.raw_score == 3 and not res.passed


def test_unparseable_reply_is_a_recorded_fail():
    res, judge, _ = _run("The answer looks fine to me.")
    assert (res.score, res.raw_score, res.verdict, res.fallback_used) == (0.0, 0, "FAIL", True)
    call = judge.audit.records[0]
    assert call.label == "vef" and not call.parse_ok and call.fallback_used and call.text.startswith("The answer")
    res2, judge2, _ = _run({"verdict": "PASS"})
    assert res2.score == 0.0 and "score" in judge2.audit.records[0].missing_fields


def test_judge_inputs(tmp_path):
    img = tmp_path / "q.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    long_report = "word " * 20000
    res, _, backend = _run({"score": 9, "verdict": "PASS"}, report=long_report, profile="daily_hard",
                           images=[str(img), "https://remote.org/x.png", str(tmp_path / "missing.png")])
    call0 = backend.calls[0]
    prompt, n_images = str(call0), call0.n_images
    assert "for the DAILY segment" in prompt and long_report.strip() in prompt  # whole report, untruncated
    assert n_images == 1  # only existing local images are attached
    _, _, backend = _run({"score": 9}, images=[str(img)], cfg=VEFConfig(attach_images=False))
    assert backend.calls[0].n_images == 0
    assert segment_for("research") == "ACADEMIC" and segment_for("daily_easy") == "DAILY"
