"""Score one task's report end to end (spec §3): FLAE, EVI (+ golden file), gate, MOSAIC, VEF, final.

A report under ``min_report_chars`` (1,000) is not judged (``FINAL_MMDR = 0``); an exception inside MOSAIC
gives MM = 0 (spec §6.1), stored in ``mm.error``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.aggregate import RawScoring, TaskScores, mosaic_gate, results_record, too_short_record
from mmir.benchmarks.mmdr.controller import run_controller
from mmir.benchmarks.mmdr.fetch import Fetcher
from mmir.benchmarks.mmdr.flae import FLAEResult, run_flae
from mmir.benchmarks.mmdr.image_resolver import ImageResolver
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.mm_engines import YesProbability
from mmir.benchmarks.mmdr.mosaic import ImageClassifier, MosaicResult, run_mosaic
from mmir.benchmarks.mmdr.tasks import Task, format_task_for_llm, report_profile
from mmir.benchmarks.mmdr.trace import EvidenceResult, run_evidence
from mmir.benchmarks.mmdr.vef import VEFResult, run_vef
from mmir.config.models.mmdr_evaluator import MMDREvaluatorConfig

log = logging.getLogger(__name__)
RULES_PROMPT = "mmdr_rules_v1"


@dataclass
class TaskScore:
    """Everything computed for one task: the results ``record`` (one JSONL line) and the parts
    (``None`` for a report too short to judge, or a stage that did not run)."""

    record: dict[str, Any]
    flae: FLAEResult | None = None
    evidence: EvidenceResult | None = None
    mosaic: MosaicResult | None = None
    vef: VEFResult | None = None
    golden: dict[str, Any] | None = None
    gate_open: bool = False


def load_rules(judge: Judge) -> str:
    """The rules text given to the judges (our paraphrase, ``prompts/mmdr_rules_v1.txt``; hashed with the prompts)."""
    return judge.template(RULES_PROMPT).text


@dataclass(frozen=True)
class MosaicAids:
    """What MOSAIC may be given: the image ``resolver`` (None = an :class:`ImageResolver` on the fetcher), an
    ``image_classifier`` and a ``p_yes`` scorer (None = their engines' own)."""

    resolver: ImageResolver | None = None
    image_classifier: ImageClassifier | None = None
    p_yes: YesProbability | None = None


@dataclass(frozen=True)
class ScoreOutputs:
    """Where one task's files go and what its record carries besides the scores.

    Attributes:
        golden_path: where to write ``<qid>.golden.json`` (atomically); not written when ``None``.
        mm_work_dir: MOSAIC work folder (``final_summary.json`` goes to ``<it>/mm_router_routed/``).
        report_path: stored as the record's ``report_path`` when given.
        extra: merged into the record at the top level.
    """

    golden_path: str | Path | None = None
    mm_work_dir: str | Path | None = None
    report_path: str | None = None
    extra: dict[str, Any] | None = None


def score_task(
    task: Task,
    report: str,
    judge: Judge,
    fetcher: Fetcher,
    *,
    cfg: MMDREvaluatorConfig = MMDREvaluatorConfig(),
    rules: str | None = None,
    aids: MosaicAids = MosaicAids(),
    outputs: ScoreOutputs = ScoreOutputs(),
) -> TaskScore:
    """Score one report (spec §3); ``rules`` None = :func:`load_rules`."""
    from mmir.core.io import write_text

    if len(report or "") < cfg.min_report_chars:
        return TaskScore(too_short_record(task.qid, len(report or ""), cfg.min_report_chars))
    rules = load_rules(judge) if rules is None else rules
    profile = report_profile(task)
    text = format_task_for_llm(task)
    ctx = {"task_id": task.qid}

    shared = None
    if cfg.controller.mode == "shared":
        shared = run_controller(judge, text, profile, use="flae", cfg=cfg.controller, context=ctx)
    flae = run_flae(judge, report, text, profile, rules, cfg.flae, controller=shared, controller_cfg=cfg.controller, context=ctx)
    ev = run_evidence(judge, report, text, profile, rules, fetcher, cfg, controller=shared, context=ctx)
    gen, evi = flae.gen, ev.scores.evi
    golden = ev.golden(task.qid, profile, text, flae.features)
    if outputs.golden_path is not None:
        write_text(outputs.golden_path, json.dumps(golden, ensure_ascii=False, indent=2))

    vef = run_vef(judge, task.text, task.ground_truth, report, profile, images=task.images, cfg=cfg.vef, context=ctx)

    mm_payload: dict[str, Any] = {"activated": False}
    mosaic = None
    gate_open = mosaic_gate(gen, evi, vef.score, gate=cfg.gate)
    mm: float | None = 0.0
    if gate_open:
        try:
            mosaic = run_mosaic(golden["claims"], judge, aids.resolver or ImageResolver(fetcher), cfg.mosaic, question_id=task.qid,
                                work_dir=outputs.mm_work_dir, image_classifier=aids.image_classifier, p_yes=aids.p_yes, context=ctx)
            mm, mm_payload = mosaic.mm, mosaic.payload()
        except Exception as e:  # spec §6.1: an exception in the MM stage gives MM = 0 -- recorded, not dropped
            log.warning("%s: MOSAIC stage failed, MM = 0: %s: %s", task.qid, type(e).__name__, e)
            mm, mm_payload = 0.0, {"activated": True, "mm_score": 0.0, "error": f"{type(e).__name__}: {e}"}

    record = results_record(
        qid=task.qid, report_type=profile, scores=TaskScores(gen, evi, mm, vef.score, vef.raw_score), weights=cfg.weights,
        raw=RawScoring(flae.to_raw(), ev.to_raw(), mm_payload), report_path=outputs.report_path,
        extra={
            "task_split": task.set, "task_difficulty": task.difficulty or "",
            "judge_model": judge.model_id,
            "accuracy_detail": {"verdict": vef.verdict, "reason": vef.reason, "has_gt": vef.has_gt,
                                "fallback_used": vef.fallback_used},
            "legacy_final": legacy_final(flae.gen, ev.scores.evi, ev.controller.lambda_final, profile),
            **(outputs.extra or {}),
        },
    )
    return TaskScore(record, flae, ev, mosaic, vef, golden, gate_open)


def legacy_final(gen: float, evi: float, lambda_final: float, profile: str) -> float:
    """The scorer's legacy ``FINAL = lambda*GEN + (1-lambda)*EVI`` (spec §5.4; **not** part of MMDR), with
    lambda clipped to [0.35, 0.45] for research and [0.50, 0.60] for daily profiles; rounded to 3 dp."""
    lam = lambda_final
    if "daily" in profile:
        lam = min(0.60, max(0.50, lam))
    if profile == "research":
        lam = min(0.45, max(0.35, lam))
    lam = max(0.0, min(1.0, lam))
    return round(lam * gen + (1.0 - lam) * evi, 3)
