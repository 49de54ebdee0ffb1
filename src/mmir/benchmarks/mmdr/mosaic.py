"""MOSAIC, Multimodal Support-Aligned Integrity Check (spec §6): MM on 0-100 from image-linked items.

Run only when :func:`mmir.benchmarks.mmdr.aggregate.mosaic_gate` is open: :func:`build_mm_items` (§6.2), type
routing (§6.4; ``routing="code"`` falls back to photo, spec §10.9), image resolution, engines
(:mod:`mmir.benchmarks.mmdr.mm_engines`) and the per-item score (§6.5)::

    score_overall = sum_k w_k m_k / sum_k w_k,   k in (semantic, faithful, formatting)
    photo/imgpair (0.60, 0.25, 0.15)  diagram (0.50, 0.40, 0.10)  datachart (0.40, 0.50, 0.10)
    ocrchart (0.40, 0.40, 0.20)  default (0.50, 0.30, 0.20)

Aggregation (§6.6): ``MM = round(100 * mean(score_overall over scored items), 3)``; ``None`` (stored as 0)
when nothing was scored.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.image_resolver import ImageResolver
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.mm_engines import (
    EngineOutput,
    YesProbability,
    decide_engine,
    run_chart_qa,
    run_generic,
    run_imgpair,
    run_ocr_chart,
    run_vqa,
    vqa_statement,
)
from mmir.config.models.mmdr_evaluator import MosaicConfig

PROMPT_TYPE = "mmdr_mm_type_v1"
MM_TYPES = ("diagram", "datachart", "ocrchart", "photo")
IMAGE_SEED_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tiff", ".svg")
METRIC_DIMS = ("semantic", "faithful", "formatting")

#: ``(label, probability)`` of an image, or ``None`` when the classifier cannot decide.
ImageClassifier = Callable[[bytes], tuple[str, float] | None]


# ------------------------------------------------------------------------------------------------- items
_DIAGRAM_ZH = ("示意图", "结构图", "流程图", "架构图", "关系图")
_DIAGRAM_EN = ("diagram", "architecture", "flowchart")
_CHART_ZH = ("图表", "折线图", "柱状图", "饼图", "统计图", "趋势图", "增长")
_CHART_EN = ("chart", "graph", "%", "trend")
_OCR_ZH = ("表格", "清单", "明细表", "数据表", "截图")
_OCR_EN = ("table", "spreadsheet", "screenshot")
_COMPARE_EN = ("compare", "contrast", "whereas", "while ", "unlike", "similar", "different", "both ", "respectively", "correspond")
_COMPARE_ZH = ("对比", "相比", "相较", "相同", "一致", "不同", "差异", "分别", "前者", "后者", "两图", "两幅", "三图", "对照")
_META_URL = re.compile(r"https?://[^\s)\"'>]+")


def keyword_type(text: str) -> str:
    """Keyword type of a claim (§6.2): diagram, then datachart, then ocrchart cues; else photo."""
    t = (text or "").lower()
    if any(k in text for k in _DIAGRAM_ZH) or any(k in t for k in _DIAGRAM_EN):
        return "diagram"
    if any(k in text for k in _CHART_ZH) or any(k in t for k in _CHART_EN):
        return "datachart"
    if any(k in text for k in _OCR_ZH) or any(k in t for k in _OCR_EN):
        return "ocrchart"
    return "photo"


def is_comparative(text: str) -> bool:
    """The claim compares things (compare, unlike, respectively, 对比, ...): a candidate image-pair claim."""
    t = (text or "").lower()
    return any(k in t for k in _COMPARE_EN) or any(k in (text or "") for k in _COMPARE_ZH)


def urls_in(x: Any) -> list[str]:
    """Every ``http(s)`` URL inside a nested structure of strings, dicts and lists, in order."""
    if isinstance(x, str):
        return _META_URL.findall(x)
    if isinstance(x, Mapping):
        return [u for v in x.values() for u in urls_in(v)]
    if isinstance(x, (list, tuple)):
        return [u for v in x for u in urls_in(v)]
    return []


def is_image_seed(u: str, path_exists: Callable[[str], bool] = os.path.exists) -> bool:
    """``file://``, an existing local path, or an image extension (query dropped)."""
    low = (u or "").lower()
    return low.startswith("file://") or path_exists(u) or low.split("?", 1)[0].endswith(IMAGE_SEED_EXTENSIONS)


def build_mm_items(
    claims: Sequence[Mapping[str, Any]],
    question_id: str = "",
    cfg: MosaicConfig = MosaicConfig(),
    *,
    path_exists: Callable[[str], bool] = os.path.exists,
) -> list[dict[str, Any]]:
    """MOSAIC items from audited claims (spec §6.2, ``build_mm_items_from_golden``).

    Per claim up to 2 image URLs of ``evidence_meta`` then its URL; at most 9 image-text items; image pairs only
    for comparative claims with 2+ images in ``sentence_urls`` (spec §10.8).

    Returns:
        Item dicts (``index``, ``type_rule``, ``type_final``, ``caption``, ``image_path``, ``mm_mode`` ...).
    """
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    seen_pairs: set[tuple[str, str, str]] = set()
    pair_cands: list[dict[str, Any]] = []
    budget = cfg.pair_budget
    single_budget = cfg.max_items - budget
    n_single = 0
    for c in claims:
        if n_single >= single_budget:
            break
        claim = str(c.get("claim") or "").strip()
        url = str(c.get("url") or "").strip()
        meta_imgs = list(dict.fromkeys(u for u in urls_in(c.get("evidence_meta")) if is_image_seed(u, path_exists)))
        seeds = [s for s in (meta_imgs[: cfg.seeds_per_claim] + ([url] if url else [])) if s]
        if not seeds:
            continue
        rule = keyword_type(claim)
        for s in seeds:
            if n_single >= single_budget:
                break
            if s in seen:
                continue
            seen.add(s)
            items.append({
                "index": len(items), "type_rule": rule, "type_final": rule, "cls_source": "rule",
                "caption": claim[: cfg.caption_chars], "paragraphs": [claim] if claim else [], "image_path": s,
                "missing_image": False, "source_url": url or s, "source_file": question_id, "mm_mode": "img_txt",
            })
            n_single += 1
        if budget <= 0:
            continue
        sent_urls = c.get("sentence_urls") or []
        if not isinstance(sent_urls, list) or len(sent_urls) < 2 or not is_comparative(claim):
            continue
        imgs = list(dict.fromkeys(u for u in sent_urls if isinstance(u, str) and is_image_seed(u, path_exists)))
        if len(imgs) < 2:
            continue
        top = imgs[: cfg.pair_images]
        for i in range(len(top)):
            for j in range(i + 1, len(top)):
                key = (top[i], top[j], claim[: cfg.pair_claim_chars])
                if key in seen_pairs:
                    continue
                seen_pairs.add(key)
                pair_cands.append({
                    "index": None, "type_rule": "imgpair", "type_final": "imgpair", "cls_source": "pair",
                    "caption": claim[: cfg.caption_chars], "paragraphs": [claim] if claim else [],
                    "image_path": top[i], "image_path_b": top[j], "missing_image": False,
                    "source_url": f"{top[i]}||{top[j]}", "source_file": question_id, "mm_mode": "img_img",
                })
    n_pairs = 0
    for it in pair_cands:
        if len(items) >= cfg.max_items or n_pairs >= budget:
            break
        it["index"] = len(items)
        items.append(it)
        n_pairs += 1
    return items


# ------------------------------------------------------------------------------------------------ routing
def parse_type_label(obj: Mapping[str, Any] | None) -> str | None:
    """The label of a type-classifier reply when it is one of :data:`MM_TYPES`, else ``None``."""
    if obj is None:
        return None
    lab = str(obj.get("label") or obj.get("type") or "").strip().lower()
    return lab if lab in MM_TYPES else None


def classify_text_type(judge: Judge, caption: str, paragraphs: Sequence[str], cfg: MosaicConfig = MosaicConfig(),
                       context: Mapping[str, Any] | None = None) -> str | None:
    """Pass-1 text classifier (spec §6.4): a label from :data:`MM_TYPES`, or ``None`` (recorded)."""
    obj, call = judge.complete_json("mm_type", PROMPT_TYPE, {"caption": caption, "paragraphs": "\n".join(paragraphs)},
                                    temperature=cfg.classify_temperature, context=context)
    label = parse_type_label(obj)
    if obj is not None and label is None:
        call.invalid_fields.append("label")
    if label is None:
        call.use_fallback("no usable label: routing falls back")
    return label


def pass1_type(text_label: str | None, rule_type: str, routing: str = "code") -> tuple[str, str]:
    """Type before download: the text label, else ``photo`` (code) or the keyword type (``"keyword"``).
    Returns ``(type_final, cls_source)``."""
    if text_label in MM_TYPES:
        return text_label, "text"  # type: ignore[return-value]
    return ("photo", "default") if routing == "code" else (rule_type, "rule")


def chart_flags(type_final: str, has_image: bool) -> dict[str, Any]:
    """``type``/``ocr_needed``/``table_source`` set after each routing pass: a chart or table with an image
    becomes an OCR screenshot (``type = "ocrchart"``), without one a text table; other types unchanged."""
    if type_final in ("datachart", "ocrchart"):
        if has_image:
            return {"type": "ocrchart", "ocr_needed": True, "table_source": "screenshot"}
        return {"type": "datachart", "ocr_needed": False, "table_source": "text"}
    return {"type": type_final, "ocr_needed": False, "table_source": "none"}


def pass2_type(prev_type: str, text_label: str | None, clip: tuple[str, float] | None, threshold: float = 0.5) -> tuple[str, str]:
    """Type after download: the image classifier's label if its probability >= threshold, else the text
    label, else ``prev_type`` (the ``type`` field left by pass 1). Returns ``(type_final, cls_source)``."""
    if clip is not None and clip[0] in MM_TYPES and clip[1] >= threshold:
        return clip[0], "image"
    if text_label in MM_TYPES:
        return text_label, "text"  # type: ignore[return-value]
    return (prev_type if prev_type in MM_TYPES else "photo"), "pass1"


# -------------------------------------------------------------------------------------------- item scores
def item_score(type_final: str, metrics: Mapping[str, float], cfg: MosaicConfig = MosaicConfig()) -> float:
    """``sum_k w_k m_k / sum_k w_k`` over semantic, faithful, formatting with the type's weights (§6.5);
    a missing metric counts as 0. E.g. photo: 0.85*s + 0.15 from a VQA engine."""
    w = cfg.type_weights.get((type_final or "photo").lower(), cfg.type_weights["default"])
    num = den = 0.0
    for k, wk in w.items():
        if wk <= 0:
            continue
        num += float(metrics.get(k, 0.0) or 0.0) * wk
        den += wk
    return num / den if den > 0 else 0.0


def _avg(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def aggregate_items(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Task summary (spec §6.6, ``final_summary.json``'s ``summary``): counts, coverage and ``avg_*`` means over scored items."""
    n_total = len(items)
    n_acc = n_scored = 0
    scores: list[float] = []
    by_type: dict[str, list[float]] = defaultdict(list)
    by_judge: dict[str, list[float]] = defaultdict(list)
    tot_type: dict[str, int] = defaultdict(int)
    acc_type: dict[str, int] = defaultdict(int)
    dims: dict[str, list[float]] = defaultdict(list)
    missing: dict[str, int] = defaultdict(int)
    for it in items:
        t = str(it.get("type_final") or "photo").lower()
        tot_type[t] += 1
        if it.get("missing_image"):
            missing[str(it.get("missing_reason") or "download_failed")] += 1
            continue
        n_acc += 1
        acc_type[t] += 1
        j = it.get("judge") or {}
        s = j.get("score_overall")
        if isinstance(s, (int, float)) and not isinstance(s, bool):
            n_scored += 1
            scores.append(float(s))
            by_type[t].append(float(s))
            by_judge[str(j.get("judge_name", "unknown"))].append(float(s))
        for k, v in (j.get("metrics") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                dims[k].append(float(v))
    return {
        "num_items_total": n_total, "num_items_accessible": n_acc, "num_items_scored": n_scored,
        "mm_coverage_accessible": None if n_total == 0 else round(n_acc / max(1, n_total), 6),
        "mm_coverage_scored": None if n_total == 0 else round(n_scored / max(1, n_total), 6),
        "num_items_by_type_total": dict(tot_type), "num_items_by_type_accessible": dict(acc_type),
        "missing_reason_counts": dict(missing), "avg_score_overall": _avg(scores),
        "avg_score_by_type": {t: _avg(v) for t, v in by_type.items()},
        "avg_score_by_judge": {j: _avg(v) for j, v in by_judge.items()},
        "avg_metric_by_dim": {d: _avg(v) for d, v in dims.items()},
    }


def mm_score_from_summary(summary: Mapping[str, Any]) -> float | None:
    """``round(100 * avg_score_overall, 3)``, or ``None`` when nothing was scored."""
    a = summary.get("avg_score_overall")
    return None if a is None else round(float(a) * 100.0, 3)


# ------------------------------------------------------------------------------------------- orchestration
@dataclass
class MosaicResult:
    """MOSAIC outcome of one report: ``mm_score`` 0-100 (3 dp) or ``None``; ``mm`` the stored value (0 for None)."""

    mm_score: float | None
    summary: dict[str, Any] | None
    items: list[dict[str, Any]]
    summary_path: str | None = None
    reason: str | None = None

    @property
    def mm(self) -> float:
        """Stored MM: ``mm_score`` or 0.0."""
        return 0.0 if self.mm_score is None else float(self.mm_score)

    def payload(self) -> dict[str, Any]:
        """The ``mm`` block of a results record (``l5_final_summary`` is read by the exporter)."""
        s = self.summary or {}
        return {"activated": True, "mm_score": self.mm_score, "reason": self.reason, "num_items": len(self.items),
                "num_items_accessible": s.get("num_items_accessible", 0), "num_items_scored": s.get("num_items_scored", 0),
                "missing_reason_counts": s.get("missing_reason_counts", {}), "l5_final_summary": self.summary_path}


def _judge_item(it: dict[str, Any], out: EngineOutput | None, cfg: MosaicConfig) -> dict[str, Any]:
    t = str(it.get("type_final") or "photo").lower()
    weights = dict(cfg.type_weights.get(t, cfg.type_weights["default"]))
    if it.get("missing_image") or out is None:
        return {"judge_name": f"{t}_mm_judge", "score_overall": None, "metrics": {}, "weights": weights,
                "meta": {"skipped": True, "skip_reason": "missing_image"}}
    return {"judge_name": f"{t}_mm_judge", "score_overall": item_score(t, out.metrics, cfg), "metrics": dict(out.metrics),
            "weights": weights, "meta": {"engine_name": out.engine}}


def run_mosaic(
    claims: Sequence[Mapping[str, Any]],
    judge: Judge,
    resolver: ImageResolver,
    cfg: MosaicConfig = MosaicConfig(),
    *,
    question_id: str = "",
    work_dir: str | Path | None = None,
    image_classifier: ImageClassifier | None = None,
    p_yes: YesProbability | None = None,
    context: Mapping[str, Any] | None = None,
) -> MosaicResult:
    """MOSAIC for one report from its audited claims (spec §6.2-6.6).

    Args:
        work_dir: when given, ``mm_router_routed/all_with_scores.json`` and ``final_summary.json`` go there.
        image_classifier: optional pass-2 classifier ``bytes -> (label, probability)``.
        p_yes: optional VQA probability function (see :mod:`mmir.benchmarks.mmdr.mm_engines`).
    """
    from mmir.core.io import write_text

    ctx = {**(context or {}), "task_id": question_id}
    items = build_mm_items(claims, question_id, cfg)
    if not items:
        return MosaicResult(None, None, [], None, "no_items_from_golden")

    images: dict[int, list[bytes]] = {}
    for it in items:
        ictx = {**ctx, "item": it["index"]}
        if it["mm_mode"] == "img_img":
            ra = resolver.resolve(it["image_path"], it["caption"])
            rb = resolver.resolve(it["image_path_b"], it["caption"])
            ok = ra.ok and rb.ok
            it.update(missing_image=not ok, missing_reason="ok" if ok else "pair_images_unresolved",
                      missing_detail="" if ok else f"{ra.reason}/{rb.reason}",
                      resolved_urls=[ra.image_url, rb.image_url])
            if ok:
                images[it["index"]] = [ra.data, rb.data]  # type: ignore[list-item]
            continue
        label = classify_text_type(judge, it["caption"], it["paragraphs"], cfg, ictx)
        it["text_label"] = label
        t1, src1 = pass1_type(label, it["type_rule"], cfg.routing)
        it.update(type_final=t1, cls_source=src1, **chart_flags(t1, bool(it["image_path"])))
        r = resolver.resolve(it["image_path"], it["caption"])
        it.update(missing_image=not r.ok, missing_reason=r.reason, missing_detail=r.detail,
                  resolved_url=r.image_url, num_candidates=r.num_candidates)
        clip = None
        if r.ok:
            images[it["index"]] = [r.data]  # type: ignore[list-item]
            clip = image_classifier(r.data) if image_classifier is not None else None  # type: ignore[arg-type]
        it["image_label"] = list(clip) if clip else None
        t2, src2 = pass2_type(it["type"], label, clip, cfg.clip_threshold)
        it.update(type_final=t2, cls_source=src2, **chart_flags(t2, bool(it["image_path"])))

    for it in items:
        ictx = {**ctx, "item": it["index"]}
        if it["missing_image"]:
            it["engine"], out = "skipped", None
        else:
            eng = decide_engine(it["type_final"], it["mm_mode"], it.get("ocr_needed", False), it.get("table_source", "none"))
            imgs = images[it["index"]]
            ec = cfg.engines
            if eng == "vqa":
                out = run_vqa(judge, imgs[0], vqa_statement(it["caption"], it["paragraphs"], ec), p_yes=p_yes, cfg=ec, context=ictx)
            elif eng == "chart_qa":
                out = run_chart_qa(judge, it["paragraphs"], cfg=ec, context=ictx)
            elif eng == "ocr_chart":
                out = run_ocr_chart(judge, imgs[0], it["paragraphs"], cfg=ec, context=ictx)
            elif eng == "imgpair":
                claim = "\n".join(it["paragraphs"]).strip() or it["caption"] or "Compare the two images."
                out = run_imgpair(judge, imgs[0], imgs[1], claim, cfg=ec, context=ictx)
            else:
                out = run_generic()
            it["engine"] = eng
            it["engine_output"] = out.to_dict()
        it["judge"] = _judge_item(it, out, cfg)

    summary = aggregate_items(items)
    mm = mm_score_from_summary(summary)
    path = None
    if work_dir is not None:
        routed = Path(work_dir) / "mm_router_routed"
        write_text(routed / "all_with_scores.json", json.dumps(items, ensure_ascii=False, indent=2))
        path = routed / "final_summary.json"
        write_text(path, json.dumps({"summary": summary, "items": items}, ensure_ascii=False, indent=2))
    return MosaicResult(mm, summary, items, str(path) if path else None, None if mm is not None else "no_item_scored")
