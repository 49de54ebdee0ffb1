"""MOSAIC engines (spec §6.4): the per-item checks, chosen by ``type_final``.

=============  ==============  =====================================================================
type_final     engine          metrics (0..1)
=============  ==============  =====================================================================
photo/diagram  ``vqa``         semantic = faithful = vqa_score = P(yes), formatting = 1.0
datachart      ``chart_qa``    claim accuracy against the item's own text (spec §10.6), formatting = 1.0
ocrchart       ``ocr_chart``   same claim accuracy, checked against the image; formatting = 0.9
imgpair        ``imgpair``     faithful = conf (SUPPORTS), 0 (CONTRADICTS), 0.5*conf (UNCLEAR)
other          ``generic``     semantic = faithful = formatting = 0
=============  ==============  =====================================================================

P(yes) needs log-probabilities, which backends do not expose: pass ``p_yes``, else ``vqa_mode="logprobs"``
scores 0 (code behaviour, spec §10.7) and ``vqa_mode="text"`` asks for YES/NO.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmir.benchmarks.mmdr.judge import Judge, as_number, clamp01
from mmir.config.models.mmdr_evaluator import EngineConfig
from mmir.llm.parsers import JSON_ARRAY, JSON_OBJECT, YES_NO

PROMPT_VQA = "mmdr_vqa_yesno_v1"
PROMPT_CHART = "mmdr_chart_claims_v1"
PROMPT_OCR = "mmdr_ocr_chart_claims_v1"
PROMPT_PAIR = "mmdr_imgpair_v1"

#: P(yes) of an image and a statement, or ``None`` when the model cannot give probabilities.
YesProbability = Callable[[bytes, str], float | None]


@dataclass
class EngineOutput:
    """What an engine returns: ``engine`` name, ``metrics`` (numbers only; aggregated by dimension),
    ``details`` (claims, verdicts, raw answers) and whether a fallback value was used."""

    engine: str
    metrics: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    fallback_used: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"engine_name": self.engine, "metrics": dict(self.metrics), "details": self.details,
                "fallback_used": self.fallback_used}


def decide_engine(type_final: str, mm_mode: str = "img_txt", ocr_needed: bool = False, table_source: str = "none") -> str:
    """Engine for an item (spec §6.4): imgpair -> ``imgpair``; ocrchart with ``ocr_needed`` and a
    screenshot source -> ``ocr_chart`` (text source without OCR -> ``chart_qa``, otherwise ``generic``);
    datachart -> ``chart_qa``; photo/diagram -> ``vqa``; anything else -> ``generic``."""
    t = (type_final or "photo").lower()
    if mm_mode == "img_img" or t == "imgpair":
        return "imgpair"
    if t == "ocrchart":
        if not ocr_needed and table_source == "text":
            return "chart_qa"
        if ocr_needed and table_source == "screenshot":
            return "ocr_chart"
        return "generic"
    if t == "datachart":
        return "chart_qa"
    if t in ("diagram", "photo"):
        return "vqa"
    return "generic"


# ---------------------------------------------------------------------------------------------------- VQA
def vqa_statement(caption: str, paragraphs: Sequence[str], cfg: EngineConfig = EngineConfig()) -> str:
    """The statement checked by VQA: the caption, else the first 180 characters of the paragraphs."""
    ctx = "\n".join(str(p) for p in paragraphs)
    return caption or (ctx[: cfg.statement_chars] if ctx else "The image matches the description.")


def run_vqa(
    judge: Judge,
    image: bytes,
    statement: str,
    *,
    p_yes: YesProbability | None = None,
    cfg: EngineConfig = EngineConfig(),
    context: Mapping[str, Any] | None = None,
) -> EngineOutput:
    """Photo/diagram check: does the image show the statement? (spec §6.4, VQA row)."""
    details: dict[str, Any] = {"statement": statement, "mode": cfg.vqa_mode}
    fallback = False
    if cfg.vqa_mode == "logprobs":
        prob = p_yes(image, statement) if p_yes is not None else None
        if prob is None:
            judge.record_skipped("mm_vqa", "no log-probabilities available: VQA score 0 (code behaviour)", context)
            score, fallback = 0.0, True
        else:
            score = clamp01(prob)
        details["p_yes"] = prob
    else:
        r = judge.complete("mm_vqa", PROMPT_VQA, {"statement": statement}, temperature=cfg.vqa_temperature,
                           images=[image], context=context, parser=YES_NO)
        if r.status == "failed":
            r.use_fallback("generation failed: VQA score 0")
            score, fallback = 0.0, True
        elif r.status == "rejected":
            r.use_fallback("unclear YES/NO answer: 0.5")
            score, fallback = 0.5, True
        else:
            score = r.value
        details["answer"] = r.text
    f = cfg.formatting_vqa
    return EngineOutput("vqa", {"semantic": score, "faithful": score, "formatting": f, "vqa_score": score}, details, fallback)


# ------------------------------------------------------------------------------------------- chart claims
def _flag(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no"):
        return v.strip().lower() in ("true", "yes")
    return None


def claim_accuracy(claims: Sequence[Mapping[str, Any]]) -> tuple[float, list[dict[str, Any]], list[str]]:
    """Confidence-weighted share of supported claims, 4 dp (0 for none): ``(score, normalised claims, problems)``."""
    norm, problems = [], []
    for i, c in enumerate(claims):
        sup = _flag(c.get("is_supported"))
        if sup is None:
            problems.append(f"claims[{i}].is_supported")
        conf = as_number(c.get("confidence", 1.0))
        if conf is None:
            problems.append(f"claims[{i}].confidence")
            conf = 1.0
        norm.append({"claim": str(c.get("claim") or ""), "is_supported": bool(sup), "confidence": clamp01(conf),
                     "reason": str(c.get("reason") or "")})
    if not norm:
        return 0.0, norm, problems
    wsum = sum(c["confidence"] for c in norm)
    if wsum <= 1e-8:
        score = sum(1.0 for c in norm if c["is_supported"]) / len(norm)
    else:
        score = sum(c["confidence"] for c in norm if c["is_supported"]) / wsum
    return round(score, 4), norm, problems


def _claims_engine(judge: Judge, module: str, prompt: str, fields: Mapping[str, Any], temperature: float,
                   images: Sequence[bytes], context: Mapping[str, Any] | None) -> tuple[float, dict[str, Any], bool]:
    r = judge.complete(module, prompt, fields, temperature=temperature, images=images, context=context, parser=JSON_ARRAY)
    if r.status == "failed":
        r.use_fallback("generation failed: accuracy 0")
        return 0.0, {"claims": [], "error": r.error}, True
    if r.status == "rejected":
        r.use_fallback("unparseable reply: accuracy 0")
        return 0.0, {"claims": [], "error": r.parse_error}, True
    score, norm, problems = claim_accuracy(r.value)
    r.invalid_fields.extend(problems)
    return score, {"claims": norm, "n_total": len(norm), "n_supported": sum(c["is_supported"] for c in norm),
                   "no_claims": not norm}, False


def run_chart_qa(judge: Judge, paragraphs: Sequence[str], *, cfg: EngineConfig = EngineConfig(),
                 context: Mapping[str, Any] | None = None) -> EngineOutput:
    """Datachart check, text only (spec §6.4; §10.6): the "table" is the item's own paragraphs, so the
    claim is compared with itself. An empty table scores 0 without a call."""
    table = "\n".join(str(p) for p in paragraphs)
    if not table.strip():
        acc, details, fb = 0.0, {"no_table": True, "claims": []}, False
    else:
        acc, details, fb = _claims_engine(
            judge, "mm_chart", PROMPT_CHART,
            {"max_claims": cfg.max_claims, "table": table, "paragraphs": "\n".join(str(p) for p in paragraphs)},
            cfg.chart_temperature, (), context)
    return EngineOutput("chart_qa", {"data_accuracy": acc, "semantic": acc, "faithful": acc,
                                     "formatting": cfg.formatting_chart}, details, fb)


def run_ocr_chart(judge: Judge, image: bytes, paragraphs: Sequence[str], *, cfg: EngineConfig = EngineConfig(),
                  context: Mapping[str, Any] | None = None) -> EngineOutput:
    """Table/screenshot check against the image (spec §6.4, ocr_chart row); formatting 0.9."""
    acc, details, fb = _claims_engine(
        judge, "mm_ocr_chart", PROMPT_OCR,
        {"max_claims": cfg.max_claims, "paragraphs": "\n".join(str(p) for p in paragraphs)},
        cfg.ocr_temperature, [image], context)
    return EngineOutput("ocr_chart", {"data_accuracy": acc, "semantic": acc, "faithful": acc,
                                      "formatting": cfg.formatting_ocr}, details, fb)


# ------------------------------------------------------------------------------------------------ imgpair
def run_imgpair(judge: Judge, image_a: bytes, image_b: bytes, claim: str, *, cfg: EngineConfig = EngineConfig(),
                context: Mapping[str, Any] | None = None) -> EngineOutput:
    """Comparative claim over two images (spec §6.4, imgpair row). An unparseable reply falls back to the
    code's keyword reading (support/yes -> SUPPORTS 0.6, contradict/no -> CONTRADICTS 0.6, else UNCLEAR
    0.3), recorded as a fallback."""
    r = judge.complete("mm_imgpair", PROMPT_PAIR, {"claim": claim}, temperature=cfg.imgpair_temperature,
                       images=[image_a, image_b], context=context, parser=JSON_OBJECT)
    fb = False
    if r.status == "failed":
        r.use_fallback("generation failed: UNCLEAR 0")
        verdict, conf, fb = "UNCLEAR", 0.0, True
    else:
        obj = r.value if r.ok else None
        verdict, conf = "UNCLEAR", 0.0
        if obj is not None:
            verdict = str(obj.get("verdict", "UNCLEAR")).strip().upper()
            n = as_number(obj.get("confidence"))
            if n is None:
                r.invalid_fields.append("confidence")
            conf = n if n is not None else 0.0
            if verdict not in ("SUPPORTS", "CONTRADICTS", "UNCLEAR"):
                r.invalid_fields.append("verdict")
        else:
            t = r.text.lower()
            if "support" in t or "yes" in t:
                verdict, conf = "SUPPORTS", 0.6
            elif "contradict" in t or "no" in t:
                verdict, conf = "CONTRADICTS", 0.6
            else:
                verdict, conf = "UNCLEAR", 0.3
            r.use_fallback(f"unparseable reply: keyword reading {verdict} {conf}")
            fb = True
    conf = clamp01(conf)
    faithful = conf if verdict == "SUPPORTS" else 0.0 if verdict == "CONTRADICTS" else 0.5 * conf
    return EngineOutput("imgpair", {"semantic": faithful, "faithful": faithful, "formatting": cfg.formatting_imgpair},
                        {"verdict": verdict, "confidence": conf, "answer": r.text}, fb)


def run_generic() -> EngineOutput:
    """The fallback engine: every metric 0."""
    return EngineOutput("generic", {"semantic": 0.0, "faithful": 0.0, "formatting": 0.0})
