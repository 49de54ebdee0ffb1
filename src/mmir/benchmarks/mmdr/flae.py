"""FLAE, Formula-LLM Adaptive Evaluation (spec §4): writing quality GEN on 0-100.

Dimensions R, I, C, S in [0, 1], each ``X = alpha*X_f + (1-alpha)*X_llm`` (§4.4), weighted by
``w = softmax(ln prior + v_general + g)`` (§4.5)::

    R_f = logistic(0 + 2.0*TTR + 1.2*H - 2.0*L - 3.0*E)
    I_f = (p_analysis * rho_connective * rho_synthesis) ** (1/3)        (each floored at 1e-9)
    C_f = HM(U, O, T) * max(0, 1 - 2.0*kappa)                           (HM floors at 1e-9)
    S_f = P * W * theta,  W = min(1, img_cnt / max(1, word_cnt/350 or /700))
    GEN = 100 * (wR*R + wI*I + wC*C + wS*S)

Section presence P (§4.3, :attr:`FLAEConfig.section_presence`): ``"code"`` (default) reproduces the published
code, whose case mismatch makes P = 0 for every report (the reference ``Stru.`` values agree; our finding, not
in spec §10); ``"spec"`` reads §4.3. Exported: ``Read.``, ``Insh.``, ``Stru.`` (x100); C enters GEN only.

alpha per profile (§4.4, :attr:`FLAEConfig.alpha_protocol`): ``"spec"`` (default) is the paper's code
(``_alpha_formula``: research 0.60); ``"reference-run"`` reproduces the authors' published reference outputs
(research 0.35: their run's older loader made every profile ``research_<difficulty>``, which falls through to 0.35).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.controller import (
    ControllerConfig,
    ControllerOutput,
    run_controller,
)
from mmir.benchmarks.mmdr.judge import Judge, as_number, clamp01
from mmir.benchmarks.mmdr.report_parser import (
    count_paragraphs,
    markdown_headings,
    markdown_image_urls,
    split_sentences,
    tokenize_words,
)
from mmir.benchmarks.mmdr.tasks import normalize_report_type
from mmir.config.models.mmdr_evaluator import SECTION_NAMES, FLAEConfig
from mmir.llm.records import CallRecord

PROMPT = "mmdr_flae_features_v1"
FEATURE_KEYS = ("E", "p_analysis", "rho_connective", "rho_synthesis", "U", "O", "T", "kappa", "theta")
HOLISTIC_KEYS = ("llm_R", "llm_I", "llm_C", "llm_S")
DIMENSIONS = ("R", "I", "C", "S")


# ----------------------------------------------------------------------------------------------- math
def logistic(x: float) -> float:
    """1 / (1 + e^-x), saturating instead of overflowing."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def harmonic_mean(values: list[float], floor: float = 1e-9) -> float:
    """Harmonic mean with each value floored at ``floor``; 0 for no values."""
    xs = [max(floor, float(v)) for v in values if v is not None]
    return len(xs) / sum(1.0 / v for v in xs) if xs else 0.0


def softmax(logits: list[float]) -> list[float]:
    """Numerically stable softmax."""
    if not logits:
        return []
    mx = max(logits)
    ex = [math.exp(v - mx) for v in logits]
    s = sum(ex)
    return [e / s for e in ex]


# -------------------------------------------------------------------------------------------- features
@dataclass
class TextFeatures:
    """Deterministic features of the full report (spec §4.1): ``ttr``, ``heading_density`` (H), ``long_sentence_ratio`` (L)."""

    ttr: float
    heading_density: float
    long_sentence_ratio: float
    img_cnt: int
    word_cnt: int
    n_headings: int
    n_paragraphs: int
    n_sentences: int


def text_features(report: str, cfg: FLAEConfig = FLAEConfig()) -> TextFeatures:
    """Compute :class:`TextFeatures` (spec §4.1) with the tokenisation of :mod:`mmir.benchmarks.mmdr.report_parser`."""
    words = tokenize_words(report)
    ttr = len({w.lower() for w in words}) / len(words) if words else 0.0
    headings = markdown_headings(report)
    paras = count_paragraphs(report)
    sents = split_sentences(report)
    long_cnt = sum(
        1 for s in sents if len(s) > cfg.long_sentence_chars or len(tokenize_words(s)) > cfg.long_sentence_words
    )
    return TextFeatures(
        ttr=ttr,
        heading_density=len(headings) / max(1, paras),
        long_sentence_ratio=long_cnt / len(sents) if sents else 0.0,
        img_cnt=len(set(markdown_image_urls(report))),
        word_cnt=len(words),
        n_headings=len(headings),
        n_paragraphs=paras,
        n_sentences=len(sents),
    )


@dataclass
class JudgeFeatures:
    """The FLAE judge's features (spec §4.2), clamped to [0, 1]; a ``None`` holistic value means the formula is used."""

    values: dict[str, float]
    holistic: dict[str, float | None]
    sections: dict[str, bool]
    fallback_used: bool = False
    call: CallRecord | None = field(default=None, repr=False)


def _flag(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "yes", "false", "no"):
        return v.strip().lower() in ("true", "yes")
    return None


def parse_flae_features(obj: Mapping[str, Any] | None, call: CallRecord | None = None, cfg: FLAEConfig = FLAEConfig()) -> JudgeFeatures:
    """FLAE judge features from a parsed reply (spec §4.2); ``None`` -> the fixed fallback.

    Missing/non-numeric features become 0.0 (the code's default), holistic scores ``None``; both recorded on ``call``.
    """
    if obj is None:
        if call is not None:
            call.use_fallback("unparseable or empty reply")
        fb = cfg.fallback
        return JudgeFeatures(
            values={k: float(fb[k]) for k in FEATURE_KEYS},
            holistic={k: float(fb[k]) for k in HOLISTIC_KEYS},
            sections={name: False for name in SECTION_NAMES},
            fallback_used=True, call=call,
        )
    values: dict[str, float] = {}
    for k in FEATURE_KEYS:
        n = as_number(obj.get(k))
        if n is None and call is not None:
            (call.missing_fields if k not in obj else call.invalid_fields).append(k)
        values[k] = clamp01(n) if n is not None else 0.0
    holistic: dict[str, float | None] = {}
    for k in HOLISTIC_KEYS:
        n = as_number(obj.get(k))
        if n is None and k in obj and call is not None:
            call.invalid_fields.append(k)
        holistic[k] = clamp01(n) if n is not None else None
    sections: dict[str, bool] = {}
    raw = obj.get("sections")
    if isinstance(raw, Mapping):
        for name, v in raw.items():
            f = _flag(v)
            if f is None and call is not None:
                call.invalid_fields.append(f"sections.{name}")
            sections[str(name)] = bool(f)
    elif call is not None:
        (call.missing_fields if raw is None else call.invalid_fields).append("sections")
    return JudgeFeatures(values=values, holistic=holistic, sections=sections, call=call)


def judge_flae_features(
    judge: Judge,
    report: str,
    task_text: str,
    rules: str,
    profile: str,
    cfg: FLAEConfig = FLAEConfig(),
    context: Mapping[str, Any] | None = None,
) -> JudgeFeatures:
    """One FLAE judge call (temperature 0.2; report cut to 14,000 and rules to 1,400 characters)."""
    obj, call = judge.complete_json(
        "flae_features", PROMPT,
        {"rules": rules[: cfg.rules_chars], "task": task_text, "report": report[: cfg.report_chars], "report_type": profile},
        temperature=cfg.temperature, context=context,
    )
    return parse_flae_features(obj, call, cfg)


# ------------------------------------------------------------------------------------------- structure
def structural_completeness(
    report: str, section_flags: Mapping[str, bool], theta: float, profile: str, cfg: FLAEConfig = FLAEConfig()
) -> tuple[float, dict[str, Any]]:
    """``(S_f, stats)`` with ``S_f = P * W * theta`` (spec §4.3)."""
    research = profile == "research"
    required = cfg.required_research if research else cfg.required_daily
    text_lower = (report or "").lower()
    headings = [h.lower() for h in markdown_headings(report)]
    if cfg.section_presence == "code":
        flag_of = lambda n: section_flags.get(n) is True  # noqa: E731  (lower-cased key: Title-Case flags never match)
    else:
        lowered = {str(k).lower(): bool(v) for k, v in section_flags.items()}
        flag_of = lambda n: lowered.get(n, False)  # noqa: E731

    def present(name_lower: str) -> bool:
        if flag_of(name_lower):
            return True
        if name_lower in text_lower or any(name_lower in h for h in headings):
            return True
        return any(s in text_lower for s in cfg.synonyms.get(name_lower, ()))

    exists = {name.lower(): present(name.lower()) for name in SECTION_NAMES}
    P = 1.0
    for name in required:
        # code: the table is keyed by lower-cased names but looked up by the Title-Case name (always a miss)
        key = name if cfg.section_presence == "code" else name.lower()
        P *= 1.0 if exists.get(key, False) else 0.0

    words = tokenize_words(report)
    per = cfg.words_per_visual["research" if research else "daily"]
    target = max(1.0, len(words) / per)
    img_cnt = len(set(markdown_image_urls(report)))
    W = min(1.0, img_cnt / target)
    S_f = clamp01(P * W * clamp01(theta))
    return S_f, {
        "sections_present": exists, "required": list(required), "P": P, "img_cnt": img_cnt,
        "word_cnt": len(words), "target_visuals": target, "W": W, "theta": theta, "mode": cfg.section_presence,
    }


# ---------------------------------------------------------------------------------------------- scoring
@dataclass
class FLAEResult:
    """FLAE outcome for one report: ``R, I, C, S`` in [0, 1], ``score`` GEN on 0-100 (``gen``: rounded to 3 dp)."""

    R: float
    I: float
    C: float
    S: float
    score: float
    weights: dict[str, float]
    formula: dict[str, float]
    llm: dict[str, float]
    features: dict[str, Any]
    g: dict[str, float]
    logits: list[float]
    structure: dict[str, Any]
    alpha: float
    profile: str
    judge_fallback: bool
    controller: ControllerOutput

    @property
    def gen(self) -> float:
        """GEN rounded to 3 dp (stored value, spec §4.5)."""
        return round(self.score, 3)

    def to_raw(self) -> dict[str, Any]:
        """The ``scoring.raw.general`` record the exporter reads (R, I, C, S, score, weights, features...)."""
        return {
            "R": self.R, "I": self.I, "C": self.C, "S": self.S, "score": self.score,
            "weights": self.weights, "formula": self.formula, "llm": self.llm, "features": self.features,
            "g_doc": self.g, "logits": self.logits, "structure": self.structure, "alpha_formula": self.alpha,
            "profile": self.profile, "judge_fallback": self.judge_fallback, "controller": self.controller.to_dict(),
        }


def compute_flae(
    report: str,
    profile: str,
    judged: JudgeFeatures,
    controller: ControllerOutput,
    cfg: FLAEConfig = FLAEConfig(),
) -> FLAEResult:
    """FLAE from the judge features and the controller output (spec §4.3-4.5); no LLM call."""
    profile = normalize_report_type(profile)
    tf = text_features(report, cfg)
    v = judged.values
    a0, a1, a2, a3, a4 = cfg.readability_coefs
    R_f = clamp01(logistic(a0 + a1 * tf.ttr + a2 * tf.heading_density - a3 * tf.long_sentence_ratio - a4 * v["E"]))
    fl = cfg.floor
    I_f = clamp01((max(fl, v["p_analysis"]) * max(fl, v["rho_connective"]) * max(fl, v["rho_synthesis"])) ** (1.0 / 3.0))
    C_f = clamp01(harmonic_mean([v["U"], v["O"], v["T"]], fl) * max(0.0, 1.0 - cfg.lambda_conflict * v["kappa"]))
    S_f, sstats = structural_completeness(report, judged.sections, v["theta"], profile, cfg)
    formula = {"R": R_f, "I": I_f, "C": C_f, "S": S_f}
    llm = {}
    for d in DIMENSIONS:
        h = judged.holistic.get(f"llm_{d}")
        llm[d] = clamp01(h) if h is not None else formula[d]
    alpha = cfg.alpha_for(profile)
    blended = {d: alpha * formula[d] + (1.0 - alpha) * llm[d] for d in DIMENSIONS}
    R, I, C, S = (blended[d] for d in DIMENSIONS)

    g = dict.fromkeys(DIMENSIONS, 0.0)
    if S < cfg.g_s_low or sstats["P"] == 0.0:
        g["S"] += cfg.g_s_boost
    if v["E"] > cfg.g_r_error or tf.long_sentence_ratio > cfg.g_r_long:
        g["R"] += cfg.g_r_boost
    if tf.heading_density > cfg.g_ic_heading and S > cfg.g_ic_structure:
        g["I"] += cfg.g_ic_boost
        g["C"] += cfg.g_ic_boost
    logits = [math.log(p + cfg.prior_log_eps) + float(controller.v_general[i]) + g[d]
              for i, (p, d) in enumerate(zip(cfg.prior, DIMENSIONS))]
    w = softmax(logits)
    score = 100.0 * sum(wi * blended[d] for wi, d in zip(w, DIMENSIONS))
    features = {
        "TTR": tf.ttr, "H": tf.heading_density, "L": tf.long_sentence_ratio, "img_cnt": tf.img_cnt,
        "word_cnt": tf.word_cnt, **v, "sections_judge": dict(judged.sections),
    }
    return FLAEResult(
        R=R, I=I, C=C, S=S, score=score, weights={f"w_{d}": wi for d, wi in zip(DIMENSIONS, w)},
        formula=formula, llm=llm, features=features, g=g, logits=logits, structure=sstats, alpha=alpha,
        profile=profile, judge_fallback=judged.fallback_used, controller=controller,
    )


def run_flae(
    judge: Judge,
    report: str,
    task_text: str,
    profile: str,
    rules: str,
    cfg: FLAEConfig = FLAEConfig(),
    *,
    controller: ControllerOutput | None = None,
    controller_cfg: ControllerConfig = ControllerConfig(),
    context: Mapping[str, Any] | None = None,
) -> FLAEResult:
    """FLAE for one report: the feature judge call, the controller call (unless given) and :func:`compute_flae`."""
    profile = normalize_report_type(profile)
    judged = judge_flae_features(judge, report, task_text, rules, profile, cfg, context)
    if controller is None:
        controller = run_controller(judge, task_text, profile, use="flae", cfg=controller_cfg, context=context)
    return compute_flae(report, profile, judged, controller, cfg)
