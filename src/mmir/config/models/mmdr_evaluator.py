"""``mmdr.evaluator``: every constant of the MMDR-Bench evaluator (spec shared/specs/mmdr-bench.md), with the
spec's defaults: FLAE (§4), TRACE (§5) with its fetcher (§3, §5.2) and VEF (§5.5), MOSAIC (§6) with its engines
(§6.4), and the task controller (§4.5). The mmir.benchmarks.mmdr modules read these objects."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from mmir.config.models.base import Section

#: report sections of the research profile (spec §4.3)
SECTION_NAMES = ("Executive Summary", "Background", "Methodology", "Analysis & Evidence", "Visual Integration", "Conclusion")
#: URL schemes read from reports (add "mmir" for offline corpora)
URL_SCHEMES: tuple[str, ...] = ("http", "https", "file")
#: claim-URL pairs audited per report (spec §5.1)
MAX_PAIRS = 40
#: weights of GEN, EVI, MM and VEF in the stored MMDR score (spec §3)
MMDR_WEIGHTS: tuple[float, float, float, float] = (2.0, 3.0, 3.0, 2.0)
CHROME_UA = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
             "Chrome/129.0.0.0 Safari/537.36")


def parse_weights(text: str) -> tuple[float, float, float, float]:
    """``MMDR_WEIGHTS``-style ``"2,3,3,2"`` -> floats.

    Raises:
        ValueError: not four comma-separated numbers.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 4:
        raise ValueError(f"MMDR_WEIGHTS must be 4 comma-separated numbers (GEN,EVI,MM,VEF), got {text!r}")
    try:
        return tuple(float(p) for p in parts)  # type: ignore[return-value]
    except ValueError as e:
        raise ValueError(f"MMDR_WEIGHTS must be numbers, got {text!r}") from e


class _Evaluator(Section):
    # lax: lists from YAML become the tuples the evaluator compares and hashes
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)
    # the filled config holds the judges' temperatures and what params.yaml sets; the spec's other constants stay
    # in the typed object (written out they would flood MLflow's params: 100+ keys, some not valid param names)
    filled = frozenset({"temperature"})


class FLAEConfig(_Evaluator):
    """Every FLAE constant (spec §4)."""

    readability_coefs: tuple[float, float, float, float, float] = Field(
        (0.0, 2.0, 1.2, 2.0, 3.0), description="(a0, a_TTR, a_H, a_L, a_E) of R_f = logistic(a0 + a_TTR*TTR + a_H*H - a_L*L - a_E*E)")
    long_sentence_chars: int = Field(35, description="a sentence is long above this many characters (the code's quirk, spec §10.10)")
    long_sentence_words: int = Field(25, description="... or above this many words")
    lambda_conflict: float = Field(2.0, description="weight of the conflict term")
    floor: float = Field(1e-9, description="lower bound of the formula's probabilities")
    alpha: dict[str, float] = Field({"research": 0.60, "daily_hard": 0.40, "daily_easy": 0.30, "daily_medium": 0.35},
                                    description="weight on the formula per profile (§4.4)")
    alpha_default: float = Field(0.35, description="weight on the formula for any other profile")
    alpha_protocol: Literal["spec", "reference-run"] = Field(
        "spec", description="spec: `alpha` (§4.4, the code's _alpha_formula, research 0.60), the documented protocol; "
                            "reference-run: `alpha_reference_run`, to reproduce the authors' published reference outputs")
    alpha_reference_run: dict[str, float] = Field(
        {"research": 0.35, "daily_easy": 0.35, "daily_hard": 0.35, "daily_medium": 0.60},
        description="weight on the formula per profile in the authors' reference run (an older loader scored every task as "
                    "research_<difficulty>, which falls through to 0.35, or research 0.60 without a difficulty)")
    words_per_visual: dict[str, float] = Field({"research": 350.0, "daily": 700.0}, description="words per expected figure (W target)")
    required_research: tuple[str, ...] = Field(SECTION_NAMES, description="sections a research report must have")
    required_daily: tuple[str, ...] = Field(("Executive Summary", "Analysis & Evidence", "Conclusion"),
                                            description="sections a daily report must have")
    synonyms: dict[str, tuple[str, ...]] = Field({
        "executive summary": ("tl;dr", "summary", "概要", "总结"),
        "background": ("context", "背景", "来龙去脉"),
        "methodology": ("method", "approach", "方法", "口径", "how i searched"),
        "analysis & evidence": ("analysis", "evidence", "findings", "分析", "证据", "发现"),
        "visual integration": ("visual", "figure", "chart", "image", "图", "图表", "可视化"),
        "conclusion": ("conclusion", "takeaways", "结论", "建议"),
    }, description="heading synonyms per section")
    section_presence: Literal["code", "spec"] = Field("code", description="code (P is always 0, as the released code) or spec")
    prior: tuple[float, float, float, float] = Field((0.25, 0.25, 0.25, 0.25), description="prior over the four dimensions")
    prior_log_eps: float = Field(1e-9, description="added before the log of the prior")
    g_s_low: float = Field(0.5, description="S += g_s_boost if S < g_s_low or P = 0 (§4.5)")
    g_s_boost: float = Field(1.0, description="see g_s_low")
    g_r_error: float = Field(0.10, description="R += g_r_boost if E > g_r_error or L > g_r_long")
    g_r_long: float = Field(0.35, description="see g_r_error")
    g_r_boost: float = Field(0.8, description="see g_r_error")
    g_ic_heading: float = Field(0.12, description="I, C += g_ic_boost if H > g_ic_heading and S > g_ic_structure")
    g_ic_structure: float = Field(0.7, description="see g_ic_heading")
    g_ic_boost: float = Field(0.4, description="see g_ic_heading")
    report_chars: int = Field(14_000, description="truncation of the report in the judge input")
    rules_chars: int = Field(1_400, description="truncation of the rules in the judge input")
    temperature: float = Field(0.2, ge=0, description="FLAE feature judge (spec §4.2)")
    fallback: dict[str, float] = Field({
        "E": 0.08, "p_analysis": 0.35, "rho_connective": 0.45, "rho_synthesis": 0.35,
        "U": 0.55, "O": 0.50, "T": 0.55, "kappa": 0.02, "theta": 0.65,
        "llm_R": 0.60, "llm_I": 0.55, "llm_C": 0.55, "llm_S": 0.55,
    }, description="feature values used when the judge reply is unusable (§4.2)")

    def alpha_for(self, profile: str) -> float:
        """Weight on the formula value for ``profile`` under :attr:`alpha_protocol` (§4.4)."""
        table = self.alpha if self.alpha_protocol == "spec" else self.alpha_reference_run
        return float(table.get(profile, self.alpha_default))


class TraceConfig(_Evaluator):
    """Every TRACE constant (spec §5)."""

    max_pairs: int = Field(MAX_PAIRS, description="claim-URL pairs audited per report")
    tau_research: float = Field(0.55, description="support threshold tau of research tasks")
    tau_daily: float = Field(0.45, description="support threshold tau of other tasks")
    fetch_failure_floor: float = Field(0.18, description="support floor of a failed, non-prohibited fetch")
    eta: float = Field(1.0, description="sharpness of the dimension posterior")
    prior: tuple[float, float, float, float] = Field((0.40, 0.25, 0.25, 0.10), description="prior over the four dimensions")
    prior_log_eps: float = Field(1e-9, description="added before the log of the prior")
    h_violation_rate: float = Field(0.05, description="Con += h_con_boost and Div += h_div_penalty when violation_rate exceeds this")
    h_con_boost: float = Field(1.0, description="see h_violation_rate")
    h_div_penalty: float = Field(-0.8, description="see h_violation_rate")
    h_cov_min_key: int = Field(3, description="Cov += h_cov_boost when Q_key >= this and E_cov < h_cov_threshold")
    h_cov_threshold: float = Field(0.4, description="see h_cov_min_key")
    h_cov_boost: float = Field(0.8, description="see h_cov_min_key")
    h_fid_halluc: float = Field(0.25, description="Fid += h_fid_boost when mean halluc > this or mean inversion > h_fid_inversion")
    h_fid_inversion: float = Field(0.15, description="see h_fid_halluc")
    h_fid_boost: float = Field(0.8, description="see h_fid_halluc")
    m_star: float = Field(3.0, description="claims per source at which coverage saturates")
    lambda_vef: float = Field(0.4, description="weight of VEF in TRACE = (1 - lambda) EVI + lambda VEF")
    excerpt_chars: int = Field(9_000, description="source excerpt in the judge input")
    rules_chars: int = Field(1_400, description="truncation of the rules in the judge input")
    temperature: float = Field(0.1, ge=0, description="claim-source evidence judge (spec §5.3)")
    pair_fallback: dict[str, Any] = Field({"support_strength": 0.35, "hallucination_prob": 0.25, "inversion_prob": 0.10,
                                           "chain_sound_prob": 0.45, "source_category": "unknown"},
                                          description="judge values used when a reply is unusable")
    schemes: tuple[str, ...] = Field(URL_SCHEMES, description="URL schemes read from reports (add mmir for offline corpora)")
    keep_sentence_urls: bool = Field(False, description="keep sentence_urls on pairs (paper reading; the code drops them)")

    def tau_for(self, profile: str) -> float:
        """Support threshold: ``tau_research`` for research, ``tau_daily`` otherwise."""
        return self.tau_research if profile == "research" else self.tau_daily


class FetchConfig(_Evaluator):
    """Crawl and patience constants (spec §3, §5.2)."""

    user_agent: str = Field(CHROME_UA, description="User-Agent of every fetch (Chrome/129)")
    timeout_s: float = Field(15.0, description="per-fetch timeout")
    max_bytes: int = Field(2_000_000, description="bytes read per fetch")
    patience_research: int = Field(140_000, description="characters of a page a research reader scrolls")
    patience_daily: int = Field(90_000, description="characters of a page any other reader scrolls")
    ideal_image_rank: int = Field(3, description="depth score ramp: full score up to this image rank")
    max_image_rank: int = Field(25, description="depth score ramp: min_depth at this rank")
    min_depth: float = Field(0.10, description="depth score at max_image_rank")
    low_relevance: float = Field(0.05, description="best image relevance below this gives low_relevance_depth")
    low_relevance_depth: float = Field(0.45, description="see low_relevance")
    no_image_depth: float = Field(0.30, description="depth when the page has no <img>")
    max_text_chars: int = Field(40_000, description="cap of the page text / non-HTML body")
    hint_excerpt_chars: int = Field(6_000, description="excerpt around a hint")
    hint_context_chars: int = Field(1_200, description="context kept around a hint")
    context_window: int = Field(500, description="characters either side of a match")
    stub_chars: int = Field(8_000, description="text of a stub page")

    def patience_for(self, profile: str) -> int:
        """Patience budget in characters: ``patience_research`` for research, ``patience_daily`` otherwise."""
        return self.patience_research if profile == "research" else self.patience_daily


class VEFConfig(_Evaluator):
    """VEF settings (spec §5.5)."""

    threshold: int = Field(6, description="pass at raw score >= this (0-10 scale)")
    pass_score: float = Field(100.0, description="VEF of a pass")
    fail_score: float = Field(0.0, description="VEF of a fail")
    temperature: float = Field(0.1, ge=0, description="visual evidence fidelity judge (spec §3 judge_temperature, §5.5)")
    strict: bool = Field(False, description="also require verdict == PASS (paper reading; off for parity)")
    attach_images: bool = Field(True, description="send the images to the VEF judge (see mmdr.judge_images)")


class EngineConfig(_Evaluator):
    """MOSAIC engine constants (spec §6.4)."""

    filled = frozenset({"vqa_temperature", "chart_temperature", "ocr_temperature", "imgpair_temperature"})

    vqa_mode: Literal["logprobs", "text"] = Field("logprobs", description="logprobs (the code: 0 without p_yes) or text")
    vqa_temperature: float = Field(0.0, ge=0, description="VQA engine")
    statement_chars: int = Field(180, description="cut of each statement")
    chart_temperature: float = Field(0.1, ge=0, description="chart engine")
    ocr_temperature: float = Field(0.1, ge=0, description="OCR engine")
    max_claims: int = Field(15, description="claims checked per item")
    imgpair_temperature: float = Field(0.0, ge=0, description="image-pair engine")
    formatting_vqa: float = Field(1.0, description="formatting score of the VQA engine")
    formatting_chart: float = Field(1.0, description="formatting score of the chart engine")
    formatting_ocr: float = Field(0.9, description="formatting score of the OCR engine")
    formatting_imgpair: float = Field(1.0, description="formatting score of the image-pair engine")


class MosaicConfig(_Evaluator):
    """Every MOSAIC constant (spec §6)."""

    filled = frozenset({"classify_temperature", "engines"})

    max_items: int = Field(12, description="items per report (mm_max_items); the image-pair budget is max(1, max_items // 4)")
    caption_chars: int = Field(240, description="cut of each caption")
    seeds_per_claim: int = Field(2, description="seed items per claim")
    pair_images: int = Field(3, description="images per image pair item")
    pair_claim_chars: int = Field(160, description="cut of an image-pair claim")
    routing: Literal["code", "keyword"] = Field("code", description="code (photo fallback, spec §10.9) or keyword (keyword type fallback)")
    clip_threshold: float = Field(0.5, description="image-classifier probability needed to override the text label")
    classify_temperature: float = Field(0.0, ge=0, description="figure type classifier (spec §6.4)")
    type_weights: dict[str, dict[str, float]] = Field({
        "photo": {"semantic": 0.60, "faithful": 0.25, "formatting": 0.15},
        "imgpair": {"semantic": 0.60, "faithful": 0.25, "formatting": 0.15},
        "diagram": {"semantic": 0.50, "faithful": 0.40, "formatting": 0.10},
        "datachart": {"semantic": 0.40, "faithful": 0.50, "formatting": 0.10},
        "ocrchart": {"semantic": 0.40, "faithful": 0.40, "formatting": 0.20},
        "default": {"semantic": 0.50, "faithful": 0.30, "formatting": 0.20},
    }, description="per-type (semantic, faithful, formatting) weights (§6.5)")
    engines: EngineConfig = Field(EngineConfig(), description="the engines")

    @property
    def pair_budget(self) -> int:
        """Image-pair items allowed: ``max(1, max_items // 4)`` when ``max_items >= 4``, else 0."""
        return max(1, self.max_items // 4) if self.max_items >= 4 else 0


class ControllerConfig(_Evaluator):
    """Task controller (spec §4.5)."""

    temperature: float = Field(0.2, ge=0, description="task controller (spec §4.5)")
    mode: Literal["separate", "shared"] = Field("separate", description="separate (the code) or shared")
    v_clip: float | None = Field(None, description="clip of the controller's values; null = unbounded")
    fallback_lambda: float = Field(0.55, description="lambda used when the controller reply is unusable")


class MMDREvaluatorConfig(_Evaluator):
    """The whole evaluator (spec §3 defaults)."""

    filled = frozenset({"flae", "controller", "trace", "vef", "mosaic"})

    min_report_chars: int = Field(1000, description="shorter reports score 0")
    weights: tuple[float, float, float, float] = Field(MMDR_WEIGHTS, description="weights of GEN, EVI, MM and VEF (or a '2,3,3,2' string)")
    gate: Literal["evi", "trace"] = Field("evi", description="the gate of the MMDR score: evi or trace")
    flae: FLAEConfig = Field(FLAEConfig(), description="FLAE")
    trace: TraceConfig = Field(TraceConfig(), description="TRACE")
    fetch: FetchConfig = Field(FetchConfig(), description="the fetcher")
    vef: VEFConfig = Field(VEFConfig(), description="VEF")
    mosaic: MosaicConfig = Field(MosaicConfig(), description="MOSAIC")
    controller: ControllerConfig = Field(ControllerConfig(), description="the task controller")

    @field_validator("weights", mode="before")
    @classmethod
    def _weights_text(cls, value: Any) -> Any:
        return parse_weights(value) if isinstance(value, str) else value

    @classmethod
    def from_mapping(cls, data: dict | None, prefix: str = "mmdr") -> MMDREvaluatorConfig:
        """Parse nested dicts (``mmdr.evaluator``); ``None`` = every default.

        Raises:
            ConfigError: naming ``<prefix>.<dotted key>``.
        """
        from mmir.config.parse import parse

        return parse(cls, data or {}, prefix)
