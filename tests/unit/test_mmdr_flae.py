"""mmir.benchmarks.mmdr.flae: deterministic features, formulas, per-profile alpha blend, g heuristics, weights (spec §4)."""

from __future__ import annotations

import json
import math

import pytest
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.controller import ControllerOutput
from mmir.benchmarks.mmdr.flae import (
    FLAEConfig,
    compute_flae,
    parse_flae_features,
    run_flae,
    structural_completeness,
    text_features,
)
from mmir.benchmarks.mmdr.judge import Judge

REPORT = "# Title\n\nAlpha beta. Alpha gamma delta."
FEATURES = {"E": 0.1, "p_analysis": 0.4, "rho_connective": 0.6, "rho_synthesis": 0.5, "U": 0.7, "O": 0.6, "T": 0.8,
            "kappa": 0.05, "theta": 0.8, "sections": {"Executive Summary": True, "Conclusion": False},
            "llm_R": 0.7, "llm_I": 0.6, "llm_C": 0.65, "llm_S": 0.9, "notes": "ok"}
CONTROLLER = {"task_family": "survey", "v_general": [0, 0, 0, 0], "v_evidence": [0, 0, 0, 0], "lambda_final": 0.4}


def _judge(features=FEATURES, controller=CONTROLLER) -> Judge:
    f = features if isinstance(features, str) else json.dumps(features)
    return Judge(ScriptedBackend(steps={"flae": f, "controller": json.dumps(controller)}))


def test_text_features_by_hand():
    tf = text_features(REPORT)
    assert tf.word_cnt == 6 and tf.ttr == pytest.approx(5 / 6)
    assert tf.n_headings == 1 and tf.n_paragraphs == 2 and tf.heading_density == 0.5
    assert tf.n_sentences == 3 and tf.long_sentence_ratio == 0.0 and tf.img_cnt == 0
    long = text_features("This sentence is just over thirty-five chars. Short one.")
    assert long.long_sentence_ratio == 0.5  # the 35-character rule (spec §10.10)
    imgs = text_features("![a](https://x.org/1.png) ![b](https://x.org/1.png) ![c](https://x.org/2.png) ![d](file:///3.png)")
    assert imgs.img_cnt == 2


@pytest.mark.parametrize("profile,alpha", [("research", 0.60), ("daily_hard", 0.40), ("daily_easy", 0.30), ("daily_medium", 0.35)])
def test_flae_formulas_per_alpha(profile, alpha):
    res = run_flae(_judge(), REPORT, "task", profile, "rules")
    R_f = 1 / (1 + math.exp(-(2.0 * 5 / 6 + 1.2 * 0.5 - 2.0 * 0.0 - 3.0 * 0.1)))
    I_f = (0.4 * 0.6 * 0.5) ** (1 / 3)
    C_f = 3 / (1 / 0.7 + 1 / 0.6 + 1 / 0.8) * (1 - 2.0 * 0.05)
    S_f = 0.0  # code: P is always 0 (section_presence="code")
    assert res.alpha == alpha
    assert res.formula == pytest.approx({"R": R_f, "I": I_f, "C": C_f, "S": S_f})
    R, I, C, S = (alpha * f + (1 - alpha) * l for f, l in ((R_f, 0.7), (I_f, 0.6), (C_f, 0.65), (S_f, 0.9)))
    assert (res.R, res.I, res.C, res.S) == pytest.approx((R, I, C, S))
    # g: S boost (P = 0); no R boost (E = 0.10 is not > 0.10, L = 0); no I/C boost (S <= 0.7)
    assert res.g == {"R": 0.0, "I": 0.0, "C": 0.0, "S": 1.0}
    e = math.e
    assert res.weights == pytest.approx({"w_R": 1 / (3 + e), "w_I": 1 / (3 + e), "w_C": 1 / (3 + e), "w_S": e / (3 + e)})
    assert res.score == pytest.approx(100 * (R + I + C + e * S) / (3 + e))
    assert res.gen == round(res.score, 3)
    raw = res.to_raw()
    assert raw["R"] == res.R and raw["I"] == res.I and raw["S"] == res.S and "C" in raw


@pytest.mark.parametrize("profile,alpha", [("research", 0.35), ("daily_hard", 0.35), ("daily_easy", 0.35), ("daily_medium", 0.60)])
def test_flae_reference_run_alpha_protocol(profile, alpha):
    cfg = FLAEConfig(alpha_protocol="reference-run")
    res = run_flae(_judge(), REPORT, "task", profile, "rules", cfg)
    assert res.alpha == alpha and res.to_raw()["alpha_formula"] == alpha
    assert res.S == pytest.approx((1 - alpha) * 0.9)  # S_f = 0 (P = 0), llm_S = 0.9
    assert FLAEConfig().alpha_protocol == "spec" and run_flae(_judge(), REPORT, "task", "research", "rules").alpha == 0.60


def test_controller_shifts_weights_and_g_heuristics():
    feats = {**FEATURES, "E": 0.2}
    res = run_flae(_judge(feats, {**CONTROLLER, "v_general": [0, 1.5, 0, 0]}), REPORT, "task", "research", "rules")
    assert res.g == {"R": 0.8, "I": 0.0, "C": 0.0, "S": 1.0}  # E > 0.10 -> R boost
    logits = [math.log(0.25 + 1e-9) + v for v in (0.8, 1.5, 0.0, 1.0)]
    z = sum(math.exp(x) for x in logits)
    assert res.weights["w_I"] == pytest.approx(math.exp(logits[1]) / z)


def test_spec_section_mode_and_ic_boost():
    body = ("# Executive Summary\n\nx.\n\n# Background\n\ny.\n\n# Methodology\n\nz.\n\n# Analysis & Evidence\n\nw.\n\n"
            "# Visual Integration\n\n![Figure 1](https://x.org/a.png)\n\n# Conclusion\n\nv.")
    judged = parse_flae_features({**FEATURES, "theta": 1.0, "llm_S": 1.0, "E": 0.0})
    ctrl = ControllerOutput()
    code = compute_flae(body, "research", judged, ctrl)
    spec = compute_flae(body, "research", judged, ctrl, FLAEConfig(section_presence="spec"))
    assert code.structure["P"] == 0.0 and code.formula["S"] == 0.0
    assert spec.structure["P"] == 1.0 and spec.structure["W"] == 1.0 and spec.formula["S"] == 1.0
    assert spec.S == 1.0 and spec.g["S"] == 0.0
    assert spec.g["I"] == spec.g["C"] == 0.4  # H = 6/12 > 0.12 and S > 0.7


def test_structural_completeness_daily_and_judge_flags():
    text = "Just prose with no section words."
    s_code, st = structural_completeness(text, {"executive summary": True}, 0.9, "daily_medium")
    assert st["P"] == 0.0 and st["sections_present"]["executive summary"]  # lower-case flag is seen, P still 0
    cfg = FLAEConfig(section_presence="spec")
    flags = {"Executive Summary": True, "Analysis & Evidence": True, "Conclusion": True}
    s, st = structural_completeness(text + " ![i](https://a.org/i.png)", flags, 0.9, "daily_medium", cfg)
    assert st["required"] == ["Executive Summary", "Analysis & Evidence", "Conclusion"]
    assert st["P"] == 1.0 and st["target_visuals"] == 1.0 and s == pytest.approx(0.9)
    s, st = structural_completeness(text, flags, 0.9, "daily_medium", cfg)
    assert st["W"] == 0.0 and s == 0.0  # no image


def test_fallback_is_recorded_and_used():
    judge = _judge("I cannot grade this.")
    res = run_flae(judge, REPORT, "task", "research", "rules")
    assert res.judge_fallback
    assert res.features["E"] == 0.08 and res.llm["R"] == 0.60 and res.llm["S"] == 0.55
    call = judge.audit.records[0]
    assert call.label == "flae_features" and call.fallback_used and not call.parse_ok
    assert judge.audit.fallback_counts() == {"flae_features": 1, "controller": 0}


def test_missing_and_invalid_fields():
    feats = {k: v for k, v in FEATURES.items() if k not in ("llm_R", "kappa")}
    feats.update(p_analysis="high", U=1.7, sections={"Conclusion": "maybe"})
    judge = _judge(feats)
    res = run_flae(judge, REPORT, "task", "research", "rules")
    call = judge.audit.records[0]
    assert call.parse_ok and not call.fallback_used
    assert "kappa" in call.missing_fields and "p_analysis" in call.invalid_fields and "sections.Conclusion" in call.invalid_fields
    assert res.features["kappa"] == 0.0 and res.features["p_analysis"] == 0.0 and res.features["U"] == 1.0
    assert res.llm["R"] == res.formula["R"]  # missing holistic score -> formula value
    assert judge.audit.counts()["flae_features"]["partial"] == 1


def test_judge_inputs_are_truncated():
    backend = ScriptedBackend(steps={"flae": json.dumps(FEATURES), "controller": json.dumps(CONTROLLER)})
    run_flae(Judge(backend), "R" * 20000, "task", "research", "S" * 3000)
    prompt = backend.calls[0]
    assert "R" * 14000 in prompt and "R" * 14001 not in prompt
    assert "S" * 1400 in prompt and "S" * 1401 not in prompt
