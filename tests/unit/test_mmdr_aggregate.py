"""mmir.benchmarks.mmdr.aggregate and the evaluator settings (mmir.config.models.mmdr_evaluator): formula, gate, records."""

from __future__ import annotations

import pytest

from mmir.benchmarks.mmdr.aggregate import (
    RawScoring,
    TaskScores,
    final_mmdr,
    mosaic_gate,
    overall_score,
    results_record,
    trace_value,
)
from mmir.config.models import MMDREvaluatorConfig
from mmir.config.models.mmdr_evaluator import parse_weights
from mmir.core.errors import ConfigError


@pytest.mark.parametrize("gen,evi,mm,vef", [(69.326, 27.644, 47.527, 0.0), (51.853, 0.0, 0.0, 100.0),
                                            (47.612, 41.271, 0.0, 100.0), (12.5, 3.25, 88.125, 100.0)])
def test_both_forms_agree(gen, evi, mm, vef):
    weighted = (2 * gen + 3 * evi + 3 * mm + 2 * vef) / 10
    blended = overall_score(gen, trace_value(evi, vef), mm)
    assert blended == pytest.approx(0.2 * gen + 0.5 * (0.6 * evi + 0.4 * vef) + 0.3 * mm)
    assert weighted == pytest.approx(blended, abs=1e-12)
    assert final_mmdr(gen, evi, mm, vef) == round(weighted, 3)
    assert final_mmdr(gen, evi, mm, vef, digits=None) == pytest.approx(blended, abs=1e-12)
    assert abs(final_mmdr(gen, evi, mm, vef) - blended) <= 0.0005 + 1e-9


def test_final_edge_cases():
    assert final_mmdr(10, 20, None, 100) == final_mmdr(10, 20, 0.0, 100)
    assert final_mmdr(10, 20, 30, 100, weights=(0, 0, 0, 0)) == 0.0
    assert final_mmdr(10, 20, 30, 40, weights=(1, 1, 1, 1)) == 25.0
    with pytest.raises(ValueError):
        final_mmdr(1, 2, 3, 4, weights=(1, 2, 3))
    assert parse_weights("2, 3,3,2") == (2.0, 3.0, 3.0, 2.0)
    for bad in ("2,3,3", "a,b,c,d"):
        with pytest.raises(ValueError):
            parse_weights(bad)


def test_gate():
    assert mosaic_gate(50.0, 0.001)
    assert not mosaic_gate(50.0, 0.0)  # EVI = 0: all-image citations (18 reference rows)
    assert not mosaic_gate(0.0, 30.0)
    assert not mosaic_gate(50.0, 0.0, 100.0)  # code gates on EVI, not TRACE (spec §10.5)
    assert mosaic_gate(50.0, 0.0, 100.0, gate="trace")  # paper reading: TRACE = 40 > 0
    assert not mosaic_gate(50.0, 10.0, tau_t=10.0)
    with pytest.raises(ValueError):
        mosaic_gate(1, 1, gate="x")


def test_results_record_layout():
    rec = results_record(qid="Q3", report_type="research",
                         scores=TaskScores(gen=59.634, evi=20.0, mm=None, vef=100.0, vef_raw=8),
                         raw=RawScoring(general={"R": 0.5, "I": 0.6, "S": 0.4}, evidence={"E_con": 0.1, "E_cov": 0.0, "E_fid": 0.3}),
                         extra={"report_model": "m"})
    assert rec["scores"] == rec["scoring"]["scores"]
    assert rec["scores"]["MM"] == 0.0 and rec["scores"]["FINAL_MMDR"] == final_mmdr(59.634, 20.0, 0.0, 100.0)
    assert rec["scoring"]["raw"]["general"]["R"] == 0.5 and rec["report_model"] == "m" and rec["mm"] == {"activated": False}


def test_config_from_mapping():
    cfg = MMDREvaluatorConfig.from_mapping({"weights": "1,1,1,1", "gate": "trace", "vef": {"strict": True},
                                   "mosaic": {"engines": {"vqa_mode": "text"}, "max_items": 8},
                                   "trace": {"schemes": ["http", "https", "file", "mmir"]},
                                   "flae": {"section_presence": "spec"}})
    assert cfg.weights == (1.0, 1.0, 1.0, 1.0) and cfg.gate == "trace" and cfg.vef.strict
    assert cfg.mosaic.engines.vqa_mode == "text" and cfg.mosaic.pair_budget == 2
    assert cfg.trace.schemes == ("http", "https", "file", "mmir") and cfg.flae.section_presence == "spec"
    assert MMDREvaluatorConfig.from_mapping(None) == MMDREvaluatorConfig()
    with pytest.raises(ConfigError) as e:
        MMDREvaluatorConfig.from_mapping({"vef": {"stric": True}})
    assert e.value.key == "mmdr.vef.stric"
    with pytest.raises(ConfigError) as e:
        MMDREvaluatorConfig.from_mapping({"mosaic": {"routing": "magic"}})
    assert e.value.key == "mmdr.mosaic.routing"
    with pytest.raises(ConfigError):
        MMDREvaluatorConfig.from_mapping({"weights": "1,2"})
