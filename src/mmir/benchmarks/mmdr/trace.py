"""TRACE, Trustworthy Retrieval-Aligned Citation Evaluation (spec §5): EVI from audited claim-URL pairs,
and ``TRACE = 0.6*EVI + 0.4*VEF`` (VEF in :mod:`mmir.benchmarks.mmdr.vef`).

Per pair (§5.3): ``s = clamp01(support_strength * depth_score)``, floor 0.18 for a failed non-prohibited
fetch (spec §10.14), ``supported = s >= tau`` (0.55 research, 0.45 daily); direct images and local files
are skipped (kept for MOSAIC). Over the n non-skipped pairs (§5.4)::

    E_con = (sum w_i s_i / sum w_i) * (1 - eta * violation_rate)            (w = relevance weight)
    E_cov = (1/Q_key) * sum_{key, not image-dependent} min(1, s_i/tau)      (prohibited pairs add 0)
    E_fid = HM(1 - mean halluc, 1 - mean inversion, mean chain_sound)
    E_div = H_norm * min(1, (m_auth + 0.5*(m_acc - m_auth)) / 3)
    EVI   = 100 * softmax(ln[0.40, 0.25, 0.25, 0.10] + v_evidence + h) . (E_con, E_cov, E_fid, E_div)

No pairs: everything 0; every pair skipped: E_fid = 1, the rest and EVI 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mmir.benchmarks.mmdr.aggregate import (
    trace_value as trace_score,  # noqa: F401  (TRACE = 0.6*EVI + 0.4*VEF)
)
from mmir.benchmarks.mmdr.claims import ClaimPair, extract_claim_pairs
from mmir.benchmarks.mmdr.controller import (
    ControllerOutput,
    run_controller,
)
from mmir.benchmarks.mmdr.fetch import Evidence, Fetcher, fetch_evidence
from mmir.benchmarks.mmdr.flae import harmonic_mean, softmax
from mmir.benchmarks.mmdr.judge import Judge, as_number, clamp01
from mmir.benchmarks.mmdr.sources import (
    CATEGORIES,
    classify_source,
    is_authoritative,
    is_prohibited,
)
from mmir.benchmarks.mmdr.tasks import normalize_report_type
from mmir.config.models.mmdr_evaluator import MMDREvaluatorConfig, TraceConfig
from mmir.llm.records import CallRecord

PROMPT = "mmdr_evidence_pair_v1"
PAIR_KEYS = ("support_strength", "hallucination_prob", "inversion_prob", "chain_sound_prob")
COMPONENTS = ("con", "cov", "fid", "div")


# ------------------------------------------------------------------------------------------------ pairs
@dataclass
class PairJudgement:
    """Evidence-judge values for one pair, clamped to [0, 1]; ``category`` one of :data:`CATEGORIES`."""

    support_strength: float
    hallucination_prob: float
    inversion_prob: float
    chain_sound_prob: float
    category: str
    why: str = ""
    fallback_used: bool = False


def parse_pair_judgement(obj: Mapping[str, Any] | None, call: CallRecord | None = None, cfg: TraceConfig = TraceConfig()) -> PairJudgement:
    """Pair judgement from a parsed reply (spec §5.3); ``None`` -> the fallback, missing values 0.0 (recorded on ``call``)."""
    if obj is None:
        if call is not None:
            call.use_fallback("unparseable or empty reply")
        fb = cfg.pair_fallback
        return PairJudgement(*(float(fb[k]) for k in PAIR_KEYS), category=str(fb["source_category"]),
                             why="fallback", fallback_used=True)
    vals = []
    for k in PAIR_KEYS:
        n = as_number(obj.get(k))
        if n is None and call is not None:
            (call.missing_fields if k not in obj else call.invalid_fields).append(k)
        vals.append(clamp01(n) if n is not None else 0.0)
    cat = str(obj.get("source_category", "unknown")).strip().lower()
    if cat not in CATEGORIES:
        if call is not None:
            call.invalid_fields.append("source_category")
        cat = "unknown"
    return PairJudgement(*vals, category=cat, why=str(obj.get("why") or ""))


def judge_pair(judge: Judge, claim: str, url: str, excerpt: str, rules: str, cfg: TraceConfig = TraceConfig(),
               context: Mapping[str, Any] | None = None) -> PairJudgement:
    """One evidence-judge call (temperature 0.1; excerpt cut to 9,000, rules to 1,400 characters)."""
    obj, call = judge.complete_json(
        "evidence_pair", PROMPT,
        {"rules": rules[: cfg.rules_chars], "claim": claim, "url": url, "excerpt": excerpt[: cfg.excerpt_chars]},
        temperature=cfg.temperature, context=context,
    )
    return parse_pair_judgement(obj, call, cfg)


@dataclass
class AuditedPair:
    """A claim-URL pair after fetching and judging (one entry of ``<qid>.golden.json``'s ``claims``).

    ``support_strength`` is ``s`` after the depth multiplier and fetch-failure floor; ``skip_text_evidence``
    pairs are excluded from the E_* statistics.
    """

    claim: str
    url: str
    citation_id: str | None
    relevance_weight: float
    is_key_claim: bool
    depends_on_image: bool
    domain: str
    source_category: str
    support_strength: float
    supported_by_source: bool
    hallucination_prob: float
    inversion_prob: float
    chain_sound_prob: float
    depth_score: float
    evidence_meta: dict[str, Any]
    skip_text_evidence: bool
    judge_why: str = ""
    judge_fallback: bool = False
    sentence_urls: list[str] | None = None

    @property
    def source_is_prohibited(self) -> bool:
        """Category is prohibited."""
        return self.source_category == "prohibited"

    @property
    def source_is_authoritative(self) -> bool:
        """Category is authoritative."""
        return self.source_category == "authoritative"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (golden-file claim record)."""
        d = asdict(self)
        d["source_is_prohibited"] = self.source_is_prohibited
        d["source_is_authoritative"] = self.source_is_authoritative
        if d["sentence_urls"] is None:
            d.pop("sentence_urls")
        return d


def audit_pair(
    pair: ClaimPair,
    evidence: Evidence,
    judgement: PairJudgement | None,
    profile: str,
    cfg: TraceConfig = TraceConfig(),
) -> AuditedPair:
    """Combine a pair, its evidence and its judgement (``None`` for a skipped pair) into an
    :class:`AuditedPair` (spec §5.3 support rules)."""
    meta = evidence.meta
    domain = meta.get("domain") or ""
    skip = evidence.is_direct_image or domain == "local"
    if skip or judgement is None:
        j = PairJudgement(0.0, 0.0, 0.0, 0.0, "acceptable", "direct image or local file: skipped in text scoring")
    else:
        j = judgement
    cat = j.category if j.category != "unknown" else classify_source(domain)
    s = clamp01(j.support_strength * evidence.depth_score)
    if not skip and not meta.get("fetch_ok", False) and not is_prohibited(domain):
        s = max(s, cfg.fetch_failure_floor)
    return AuditedPair(
        claim=pair.claim, url=pair.url, citation_id=pair.citation_id,
        relevance_weight=float(pair.relevance_weight or 1.0), is_key_claim=bool(pair.is_key_claim),
        depends_on_image=bool(pair.depends_on_image), domain=domain, source_category=cat,
        support_strength=s, supported_by_source=s >= cfg.tau_for(profile),
        hallucination_prob=j.hallucination_prob, inversion_prob=j.inversion_prob, chain_sound_prob=j.chain_sound_prob,
        depth_score=evidence.depth_score, evidence_meta=dict(meta), skip_text_evidence=skip,
        judge_why=j.why, judge_fallback=j.fallback_used, sentence_urls=pair.sentence_urls,
    )


# ------------------------------------------------------------------------------------------- components
@dataclass
class EvidenceScores:
    """E components in [0, 1] and EVI of one report (``score`` unrounded 0-100, ``evi`` rounded to 3 dp)."""

    E_con: float
    E_cov: float
    E_fid: float
    E_div: float
    score: float
    weights: dict[str, float]
    stats: dict[str, Any]

    @property
    def evi(self) -> float:
        """EVI rounded to 3 dp."""
        return round(self.score, 3)


def _prior_weights(cfg: TraceConfig) -> dict[str, float]:
    return {f"w_{c}": p for c, p in zip(COMPONENTS, cfg.prior)}


def evidence_components(
    audited: Sequence[AuditedPair],
    profile: str,
    v_evidence: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
    cfg: TraceConfig = TraceConfig(),
) -> EvidenceScores:
    """E_con, E_cov, E_fid, E_div and EVI from audited pairs (spec §5.4); no LLM call."""
    profile = normalize_report_type(profile)
    if not audited:
        return EvidenceScores(0.0, 0.0, 0.0, 0.0, 0.0, _prior_weights(cfg),
                              {"reason": "no_claim_pairs", "n_pairs_total": 0, "n_pairs_text": 0})
    text = [a for a in audited if not a.skip_text_evidence]
    n = len(text)
    if n == 0:
        return EvidenceScores(0.0, 0.0, 1.0, 0.0, 0.0, _prior_weights(cfg),
                              {"reason": "all_pairs_skipped_direct_image", "n_pairs_total": len(audited), "n_pairs_text": 0})

    den = sum(a.relevance_weight for a in text)
    base_con = sum(a.relevance_weight * a.support_strength for a in text) / den if den else 0.0
    violation_rate = sum(1 for a in text if a.source_is_prohibited) / n
    E_con = clamp01(base_con * (1.0 - cfg.eta * violation_rate))

    tau = cfg.tau_for(profile)
    key = [a for a in text if a.is_key_claim and not a.depends_on_image]
    q_key = len(key)
    q_rel = sum(clamp01(a.support_strength / tau) for a in key if not a.source_is_prohibited) if q_key else 0.0
    E_cov = clamp01(q_rel / q_key) if q_key else 0.0

    mean_h = clamp01(sum(a.hallucination_prob for a in text) / n)
    mean_i = clamp01(sum(a.inversion_prob for a in text) / n)
    mean_c = clamp01(sum(a.chain_sound_prob for a in text) / n)
    E_fid = clamp01(harmonic_mean([1.0 - mean_h, 1.0 - mean_i, mean_c]))

    domains: dict[str, int] = {}
    for a in text:
        if a.domain:
            domains[a.domain] = domains.get(a.domain, 0) + 1
    m = len(domains)
    if m <= 1:
        h_norm = 0.0
    else:
        ps = [c / n for c in domains.values()]
        h_norm = -sum(p * math.log(p + 1e-12) for p in ps if p > 1e-12) / math.log(m)
    m_auth = sum(1 for d in domains if is_authoritative(d))
    m_acc = sum(1 for d in domains if not is_prohibited(d))
    source_factor = min(1.0, (m_auth + 0.5 * max(0, m_acc - m_auth)) / cfg.m_star)
    E_div = clamp01(h_norm * source_factor)

    h = [0.0, 0.0, 0.0, 0.0]
    if violation_rate > cfg.h_violation_rate:
        h[0] += cfg.h_con_boost
        h[3] += cfg.h_div_penalty
    if q_key >= cfg.h_cov_min_key and E_cov < cfg.h_cov_threshold:
        h[1] += cfg.h_cov_boost
    if mean_h > cfg.h_fid_halluc or mean_i > cfg.h_fid_inversion:
        h[2] += cfg.h_fid_boost
    logits = [math.log(p + cfg.prior_log_eps) + float(v) + hh for p, v, hh in zip(cfg.prior, v_evidence, h)]
    w = softmax(logits)
    comps = (E_con, E_cov, E_fid, E_div)
    score = 100.0 * sum(wi * e for wi, e in zip(w, comps))
    stats = {
        "n_pairs_total": len(audited), "n_pairs_text": n, "violation_rate": violation_rate,
        "Q_key": q_key, "Q_reliable_soft": q_rel, "tau": tau,
        "mean_hallucination": mean_h, "mean_inversion": mean_i, "mean_chain_sound": mean_c,
        "domain_counts": domains, "m": m, "m_auth": m_auth, "m_acc": m_acc, "H_norm": h_norm,
        "h_doc": dict(zip(COMPONENTS, h)), "logits": logits,
    }
    return EvidenceScores(E_con, E_cov, E_fid, E_div, score, {f"w_{c}": wi for c, wi in zip(COMPONENTS, w)}, stats)


# ------------------------------------------------------------------------------------------- orchestration
@dataclass
class EvidenceResult:
    """EVI of one report with everything needed for the golden file and MOSAIC."""

    scores: EvidenceScores
    audited: list[AuditedPair]
    raw_pairs: list[ClaimPair]
    controller: ControllerOutput

    def to_raw(self) -> dict[str, Any]:
        """The ``scoring.raw.evidence`` record the exporter reads (E_con, E_cov, E_fid, E_div, score...)."""
        s = self.scores
        return {"E_con": s.E_con, "E_cov": s.E_cov, "E_fid": s.E_fid, "E_div": s.E_div, "score": s.score,
                "weights": s.weights, "stats": s.stats, "controller": self.controller.to_dict()}

    def golden(self, question_id: str, profile: str, question: str, general_judge: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``<qid>.golden.json`` payload (audited claim-URL pairs; MOSAIC input, spec §3)."""
        return {
            "question_id": question_id, "report_type": profile, "question": question,
            "raw_pairs": [p.to_dict() for p in self.raw_pairs],
            "claims": [a.to_dict() for a in self.audited],
            "general_judge": dict(general_judge or {}),
            "controller": self.controller.to_dict(),
        }


def run_evidence(
    judge: Judge,
    report: str,
    task_text: str,
    profile: str,
    rules: str,
    fetcher: Fetcher,
    evaluator: MMDREvaluatorConfig = MMDREvaluatorConfig(),
    *,
    controller: ControllerOutput | None = None,
    context: Mapping[str, Any] | None = None,
) -> EvidenceResult:
    """EVI for one report (spec §5.1-5.4) with ``evaluator.trace``, ``evaluator.fetch`` and ``evaluator.controller``;
    the controller is called even with no pairs, as in the code."""
    cfg, fetch_cfg, controller_cfg = evaluator.trace, evaluator.fetch, evaluator.controller
    profile = normalize_report_type(profile)
    raw, pairs = extract_claim_pairs(report, cfg.max_pairs, schemes=cfg.schemes, keep_sentence_urls=cfg.keep_sentence_urls)
    patience = fetch_cfg.patience_for(profile)
    audited: list[AuditedPair] = []
    for i, p in enumerate(pairs):
        ev = fetch_evidence(p.url, p.claim, patience, fetcher, fetch_cfg)
        skip = ev.is_direct_image or (ev.meta.get("domain") == "local")
        j = None if skip else judge_pair(judge, p.claim, p.url, ev.excerpt, rules, cfg,
                                         {**(context or {}), "pair": i, "url": p.url})
        audited.append(audit_pair(p, ev, j, profile, cfg))
    if controller is None:
        controller = run_controller(judge, task_text, profile, use="trace", cfg=controller_cfg, context=context)
    scores = evidence_components(audited, profile, controller.v_evidence, cfg)
    return EvidenceResult(scores, audited, raw, controller)
