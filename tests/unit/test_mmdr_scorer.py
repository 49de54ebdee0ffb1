"""mmir.benchmarks.mmdr.scorer end to end with a scripted judge and an offline corpus: FLAE, EVI + golden file, gate,
MOSAIC, VEF, the results record, and the exporter reading it back."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.aggregate import final_mmdr
from mmir.benchmarks.mmdr.export import export_leaderboard, provenance
from mmir.benchmarks.mmdr.fetch import default_fetcher
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.scorer import MosaicAids, ScoreOutputs, legacy_final, score_task
from mmir.benchmarks.mmdr.tasks import Task
from mmir.config.models import MMDREvaluatorConfig

DOCS = {("openstax", "bio-10"): "Mitosis produces two identical daughter cells. Each has 46 chromosomes in humans.",
        ("openstax", "bio-11"): "Meiosis halves the chromosome number, producing four gametes."}
REPLIES = {
    "flae": json.dumps({"E": 0.05, "p_analysis": 0.5, "rho_connective": 0.5, "rho_synthesis": 0.5, "U": 0.8, "O": 0.8,
                        "T": 0.8, "kappa": 0.0, "theta": 0.8, "sections": {}, "llm_R": 0.8, "llm_I": 0.7, "llm_C": 0.7,
                        "llm_S": 0.6, "notes": "ok"}),
    "controller": json.dumps({"task_family": "survey", "v_general": [0, 0, 0, 0], "v_evidence": [0, 0, 0, 0], "lambda_final": 0.4}),
    "evidence": json.dumps({"support_strength": 0.9, "hallucination_prob": 0.05, "inversion_prob": 0.0,
                            "chain_sound_prob": 0.9, "source_category": "acceptable", "why": "stated"}),
    "vef": json.dumps({"score": 8, "reason": "identities correct", "verdict": "PASS"}),
    "mm_type": json.dumps({"label": "diagram"}),
    "vqa": "YES",
}


def _png(path):
    rng = np.random.default_rng(3)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(buf, format="PNG")
    path.write_bytes(buf.getvalue())
    return path


def _report(img) -> str:
    body = (
        "# Executive Summary\n\nCell division comes in two forms, mitosis and meiosis, and they differ in outcome [1][2].\n\n"
        "## Analysis & Evidence\n\nMitosis produces two identical daughter cells with 46 chromosomes in humans [1]. "
        "Meiosis halves the chromosome number and produces four gametes [2].\n\n"
        "Figure 1: diagram of the two division pathways [3]\n\n![Figure 1](https://example.org/fig1.png)\n\n"
        "## Conclusion\n\nThe two pathways serve growth and reproduction respectively [1][2].\n\n"
    )
    body += "Additional discussion sentence for length. " * 20
    return body + f"\n\nReferences:\n\n[1] mmir://openstax/bio-10\n\n[2] mmir://openstax/bio-11\n\n[3] file://{img}\n"


def _setup(tmp_path):
    img = _png(tmp_path / "fig.png")
    task = Task(qid="Q3", raw_id="Q3", index=3, title="Cell division", text="Compare mitosis and meiosis.",
                images=(str(img),), set="research", ground_truth="Diagram: two pathways, mitosis and meiosis.")
    cfg = MMDREvaluatorConfig.from_mapping({"trace": {"schemes": ["http", "https", "file", "mmir"]},
                                   "mosaic": {"engines": {"vqa_mode": "text"}}})
    fetcher = default_fetcher(resolve_local=lambda d, i: DOCS.get((d, i)))
    return img, task, cfg, fetcher


def test_score_task_end_to_end_and_export(tmp_path):
    img, task, cfg, fetcher = _setup(tmp_path)
    backend = ScriptedBackend(steps=REPLIES)
    judge = Judge(backend)
    run = tmp_path / "run"
    report = _report(img)
    (run / "reports").mkdir(parents=True)
    (run / "reports" / "Q3.md").write_text(report, encoding="utf-8")
    ts = score_task(task, report, judge, fetcher, cfg=cfg, outputs=ScoreOutputs(golden_path=run / "reports" / "Q3.golden.json",
                    mm_work_dir=run / "reports" / "mm" / "Q3", extra={"report_model": "agent-x"}))
    rec = ts.record
    s = rec["scores"]
    assert s["GEN"] == ts.flae.gen > 0 and s["EVI"] == ts.evidence.scores.evi > 0
    assert ts.gate_open and ts.mosaic is not None and s["MM"] == ts.mosaic.mm > 0
    assert s["VEF"] == 100.0 and s["VEF_Raw"] == 8
    assert s["FINAL_MMDR"] == final_mmdr(s["GEN"], s["EVI"], s["MM"], s["VEF"])
    assert rec["legacy_final"] == legacy_final(s["GEN"], s["EVI"], 0.4, "research")
    golden = json.loads((run / "reports" / "Q3.golden.json").read_text(encoding="utf-8"))
    domains = {c["domain"] for c in golden["claims"]}
    assert {"openstax", "local"} <= domains
    assert any(c["skip_text_evidence"] for c in golden["claims"])  # the file:// figure is deferred to MOSAIC
    assert (run / "reports" / "mm" / "Q3" / "mm_router_routed" / "final_summary.json").exists()
    steps = backend.steps_called()
    assert steps.count("task controller (metric weighting)") == 2  # FLAE and EVI each call it (spec §10.12)
    assert "visual evidence fidelity (VEF)" in steps
    vef_call = next(c for c in backend.calls if c.step == "visual evidence fidelity (VEF)")
    assert vef_call.n_images == 1 and "Cell division" not in vef_call.split("QUESTION")[1].split("GROUND TRUTH")[0]

    res = run / "results" / "agent.jsonl"
    res.parent.mkdir()
    res.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    out = export_leaderboard(res, provenance_info=provenance(judge, commit={"commit": None, "dirty": None}))
    row = out.rows[0]
    assert row["Complete"] and row["Overall"] == pytest.approx(s["FINAL_MMDR"], abs=5e-4)
    assert row["Read."] == pytest.approx(100 * ts.flae.R) and row["Con."] == pytest.approx(100 * ts.evidence.scores.E_con)
    assert row["MOSAIC Summary Path"] == "reports/mm/Q3/mm_router_routed/final_summary.json" and row["VQA"] == 100.0
    prov = out.manifest["provenance"]
    assert {"mmdr_flae_features_v1", "mmdr_rules_v1", "mmdr_vef_v1"} <= prov["prompt_sha256"].keys()
    assert prov["judge_fallbacks"]["evidence_pair"] == 0


def test_gate_closed_when_all_citations_are_images(tmp_path):
    img, task, cfg, fetcher = _setup(tmp_path)
    report = ("# Summary\n\nThe figure shows both pathways side by side [1]. " + "More words here. " * 80 +
              f"\n\nReferences:\n\n[1] file://{img}\n")
    judge = Judge(ScriptedBackend(steps=REPLIES))
    ts = score_task(task, report, judge, fetcher, cfg=cfg)
    ev = ts.evidence.scores
    assert (ev.E_con, ev.E_cov, ev.E_fid, ev.score) == (0.0, 0.0, 1.0, 0.0)
    assert not ts.gate_open and ts.mosaic is None and ts.record["scores"]["MM"] == 0.0
    assert ts.record["mm"] == {"activated": False}
    assert ts.record["scores"]["FINAL_MMDR"] == round((2 * ts.flae.gen + 2 * 100.0) / 10, 3)
    assert not judge.audit.counts().get("evidence_pair")  # skipped pairs are never judged


def test_short_report_and_no_ground_truth(tmp_path):
    img, task, cfg, fetcher = _setup(tmp_path)
    judge = Judge(ScriptedBackend(steps=REPLIES))
    short = score_task(task, "Too short.", judge, fetcher, cfg=cfg)
    assert short.record == {"qid": "Q3", "error": "report_too_short", "report_chars": 10, "min_report_chars": 1000,
                            "scores": {"FINAL_MMDR": 0.0}}
    assert len(judge.audit) == 0
    no_gt = Task(**{**task.__dict__, "ground_truth": ""})
    ts = score_task(no_gt, _report(img), judge, fetcher, cfg=cfg)
    assert ts.record["scores"]["VEF"] == 0.0 and not ts.vef.has_gt


def test_mosaic_exception_gives_zero_and_is_recorded(tmp_path):
    img, task, cfg, fetcher = _setup(tmp_path)

    class Broken:
        def resolve(self, seed, caption=""):
            raise RuntimeError("resolver exploded")

    ts = score_task(task, _report(img), Judge(ScriptedBackend(steps=REPLIES)), fetcher, cfg=cfg, aids=MosaicAids(resolver=Broken()))
    assert ts.gate_open and ts.record["scores"]["MM"] == 0.0
    assert ts.record["mm"]["error"] == "RuntimeError: resolver exploded"
