"""MOSAIC (spec §6): item scores per type, aggregation and MM rounding, the None cases, item building,
routing, engines and image resolution, with a scripted judge and local images."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.fetch import FetchResult, default_fetcher
from mmir.benchmarks.mmdr.image_resolver import ImageResolver, page_image_candidates
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.mm_engines import EngineConfig, claim_accuracy, decide_engine
from mmir.benchmarks.mmdr.mosaic import (
    MosaicConfig,
    aggregate_items,
    build_mm_items,
    chart_flags,
    item_score,
    keyword_type,
    mm_score_from_summary,
    pass1_type,
    pass2_type,
    run_mosaic,
)
from mmir.llm.parsers import yes_no_score


def png_bytes(seed: int = 0, size: int = 48) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


# ------------------------------------------------------------------------------------------- item scores
@pytest.mark.parametrize("kind,s,expected", [
    ("photo", 0.4, 0.85 * 0.4 + 0.15),
    ("diagram", 0.4, 0.9 * 0.4 + 0.1),
    ("imgpair", 0.4, 0.85 * 0.4 + 0.15),
    ("photo", 0.0, 0.15),
    ("diagram", 0.0, 0.10),
])
def test_item_score_vqa_like(kind, s, expected):
    assert item_score(kind, {"semantic": s, "faithful": s, "formatting": 1.0, "vqa_score": s}) == pytest.approx(expected)


def test_item_score_chart_types_and_defaults():
    a = 0.5
    assert item_score("datachart", {"data_accuracy": a, "semantic": a, "faithful": a, "formatting": 1.0}) == pytest.approx(0.9 * a + 0.1)
    assert item_score("ocrchart", {"data_accuracy": a, "semantic": a, "faithful": a, "formatting": 0.9}) == pytest.approx(0.8 * a + 0.18)
    assert item_score("ocrchart", {"semantic": 0, "faithful": 0, "formatting": 0.9}) == pytest.approx(0.18)
    assert item_score("weird", {"semantic": 1.0}) == pytest.approx(0.5)  # default weights; missing metrics count 0
    assert item_score("photo", {}) == 0.0


def _item(kind, s=None, missing=False, reason=None):
    it = {"type_final": kind, "missing_image": missing, "missing_reason": reason}
    if not missing:
        m = {"semantic": s, "faithful": s, "formatting": 1.0, ("vqa_score" if kind in ("photo", "diagram") else "data_accuracy"): s}
        it["judge"] = {"judge_name": kind, "score_overall": item_score(kind, m), "metrics": m}
    return it


def test_aggregation_rounding_dims_and_none_cases():
    items = [_item("photo", 0.2), _item("diagram", 0.7), _item("datachart", 1 / 3), _item("photo", missing=True, reason="dead_link")]
    summ = aggregate_items(items)
    overall = (0.85 * 0.2 + 0.15 + 0.9 * 0.7 + 0.1 + 0.9 / 3 + 0.1) / 3
    assert summ["avg_score_overall"] == pytest.approx(overall)
    assert mm_score_from_summary(summ) == round(overall * 100, 3)
    assert summ["num_items_total"] == 4 and summ["num_items_accessible"] == 3 and summ["num_items_scored"] == 3
    assert summ["missing_reason_counts"] == {"dead_link": 1}
    dims = summ["avg_metric_by_dim"]
    assert dims["vqa_score"] == pytest.approx(0.45) and dims["data_accuracy"] == pytest.approx(1 / 3)
    assert dims["semantic"] == pytest.approx((0.2 + 0.7 + 1 / 3) / 3)
    # every image missing: MM None (stored as 0), no dimension averages
    none = aggregate_items([_item("photo", missing=True, reason="blocked")])
    assert mm_score_from_summary(none) is None and none["avg_metric_by_dim"] == {}
    assert aggregate_items([])["mm_coverage_scored"] is None


# ------------------------------------------------------------------------------------------------- items
def test_build_items_seeds_dedup_and_budget():
    claims = [
        {"claim": "Architecture diagram of the system", "url": "https://a.org/page",
         "evidence_meta": {"best_image": {"src": "https://a.org/fig1.png"}, "x": ["https://a.org/fig2.jpg?w=1", "https://a.org/fig3.gif"]}},
        {"claim": "The table lists 5% growth", "url": "https://a.org/fig1.png", "evidence_meta": {}},  # seed already used
        {"claim": "A photo", "url": "", "evidence_meta": None},  # no seed
    ]
    items = build_mm_items(claims, "Q1", path_exists=lambda p: False)
    assert [it["image_path"] for it in items] == ["https://a.org/fig1.png", "https://a.org/fig2.jpg?w=1", "https://a.org/page"]
    assert all(it["type_rule"] == "diagram" and it["mm_mode"] == "img_txt" for it in items)
    assert items[0]["caption"] == "Architecture diagram of the system" and items[0]["source_file"] == "Q1"
    many = [{"claim": f"claim {i}", "url": f"https://s.org/{i}"} for i in range(20)]
    assert len(build_mm_items(many, path_exists=lambda p: False)) == 9  # 12 - 12//4 image-text items
    assert keyword_type("flowchart of steps") == "diagram" and keyword_type("growth trend") == "datachart"
    assert keyword_type("a screenshot") == "ocrchart" and keyword_type("a cat") == "photo"
    assert keyword_type("流程图") == "diagram" and keyword_type("柱状图") == "datachart" and keyword_type("表格") == "ocrchart"


def test_image_pair_items_need_sentence_urls():
    base = {"claim": "Compared with A, B is larger", "url": "https://x.org/a.png", "evidence_meta": {}}
    assert all(it["mm_mode"] == "img_txt" for it in build_mm_items([base], path_exists=lambda p: False))  # code: dead path
    with_urls = {**base, "sentence_urls": ["https://x.org/a.png", "https://x.org/b.png", "https://x.org/c.png"]}
    items = build_mm_items([with_urls], path_exists=lambda p: False)
    pairs = [it for it in items if it["mm_mode"] == "img_img"]
    assert [(p["image_path"], p["image_path_b"]) for p in pairs] == [
        ("https://x.org/a.png", "https://x.org/b.png"), ("https://x.org/a.png", "https://x.org/c.png"),
        ("https://x.org/b.png", "https://x.org/c.png")]
    not_comparative = {**with_urls, "claim": "B is large"}
    assert not [it for it in build_mm_items([not_comparative], path_exists=lambda p: False) if it["mm_mode"] == "img_img"]


# ----------------------------------------------------------------------------------------------- routing
def test_routing_passes():
    assert pass1_type("diagram", "photo") == ("diagram", "text")
    assert pass1_type(None, "datachart") == ("photo", "default")  # code: keyword type discarded
    assert pass1_type(None, "datachart", "keyword") == ("datachart", "rule")
    assert chart_flags("datachart", True) == {"type": "ocrchart", "ocr_needed": True, "table_source": "screenshot"}
    assert chart_flags("photo", True)["table_source"] == "none"
    assert pass2_type("photo", "diagram", ("datachart", 0.7)) == ("datachart", "image")
    assert pass2_type("photo", "diagram", ("datachart", 0.4)) == ("diagram", "text")
    assert pass2_type("ocrchart", None, None) == ("ocrchart", "pass1")
    assert decide_engine("photo") == decide_engine("diagram") == "vqa"
    assert decide_engine("datachart", ocr_needed=True, table_source="screenshot") == "chart_qa"
    assert decide_engine("ocrchart", ocr_needed=True, table_source="screenshot") == "ocr_chart"
    assert decide_engine("ocrchart") == "generic" and decide_engine("x") == "generic"
    assert decide_engine("photo", "img_img") == "imgpair"


def test_claim_accuracy_and_yes_no():
    assert claim_accuracy([]) == (0.0, [], [])
    score, norm, problems = claim_accuracy([
        {"claim": "a", "is_supported": True, "confidence": 0.9},
        {"claim": "b", "is_supported": False, "confidence": 0.3},
        {"claim": "c", "is_supported": "false", "confidence": "x"},
    ])
    assert score == round(0.9 / (0.9 + 0.3 + 1.0), 4) and problems == ["claims[2].confidence"]
    assert claim_accuracy([{"is_supported": True, "confidence": 0}, {"is_supported": False, "confidence": 0}])[0] == 0.5
    assert [yes_no_score(x) for x in ("YES", "No.", "yes and no", "maybe", "Yes, it does")] == [1.0, 0.0, 0.5, 0.5, 1.0]


# ------------------------------------------------------------------------------------------- resolution
class PageFetcher:
    def __init__(self, pages):
        self.pages = pages

    def fetch(self, url, *, referer=None):
        if url not in self.pages:
            return FetchResult.failure(url, "http 404", status=404)
        ct, body = self.pages[url]
        return FetchResult(url=url, ok=True, content_type=ct, data=body if isinstance(body, bytes) else body.encode())


def test_page_candidates_and_resolution():
    html = ('<html><head><meta property="og:image" content="/og.png"><link rel="image_src" href="/logo.png"></head>'
            '<body><img src="/spacer.gif"><img src="/chart.png" alt="zebra totals chart">'
            '<img srcset="/small.png 100w, /big.png 1000w" alt="other"><a href="/raw.jpg">raw</a></body></html>')
    cands = page_image_candidates(html, "https://p.org/article", "zebra totals")
    urls = [c[0] for c in cands]
    assert urls[0] == "https://p.org/og.png"  # the social preview image outranks the figure (spec §10.9)
    assert "https://p.org/logo.png" not in urls and "https://p.org/spacer.gif" not in urls
    assert urls.index("https://p.org/chart.png") < urls.index("https://p.org/raw.jpg")
    img = png_bytes(1)
    f = PageFetcher({"https://p.org/article": ("text/html", html), "https://p.org/og.png": ("image/png", b"tiny"),
                     "https://p.org/chart.png": ("image/png", img), "https://p.org/doc": ("text/html", "<html>no</html>")})
    r = ImageResolver(f).resolve("https://p.org/article", "zebra totals")
    assert r.ok and r.image_url == "https://p.org/chart.png" and r.data == img  # og.png was too small
    assert ImageResolver(f).resolve("https://p.org/og.png").reason == "too_small_or_placeholder"
    assert ImageResolver(f).resolve("https://p.org/nothere.png").reason == "dead_link"
    assert ImageResolver(f).resolve("https://p.org/doc").reason == "no_image_found"


# --------------------------------------------------------------------------------------------- end to end
def _claims(tmp_path):
    photo, chart, table = tmp_path / "photo.png", tmp_path / "chart.png", tmp_path / "table.png"
    for k, p in enumerate((photo, chart, table)):
        p.write_bytes(png_bytes(k))
    return [
        {"claim": "A zebra herd crossing the river", "url": f"file://{photo}", "evidence_meta": {}},
        {"claim": "Sales rose 5% in 2023 per the chart", "url": f"file://{chart}", "evidence_meta": {}},
        {"claim": "The table lists three regions", "url": f"file://{table}", "evidence_meta": {}},
        {"claim": "A picture that cannot be fetched", "url": "https://offline.org/pic.png", "evidence_meta": {}},
    ]


def _mosaic_judge(vqa_reply="YES"):
    labels = {"zebra": "photo", "Sales": "datachart", "table": "ocrchart", "cannot": "photo"}

    def type_reply(prompt):
        cap = prompt.split("Caption:")[1].split("Surrounding text:")[0]
        return json.dumps({"label": next(v for k, v in labels.items() if k in cap)})

    return ScriptedBackend(steps={
        "mm_type": type_reply,
        "vqa": vqa_reply,
        "chart": json.dumps([{"claim": "sales +5%", "is_supported": True, "confidence": 1.0},
                             {"claim": "2023", "is_supported": False, "confidence": 1.0}]),
        "ocr": "no json",
    })


def test_run_mosaic_end_to_end(tmp_path):
    backend = _mosaic_judge()
    judge = Judge(backend)
    cfg = MosaicConfig(engines=EngineConfig(vqa_mode="text"))
    res = run_mosaic(_claims(tmp_path), judge, ImageResolver(default_fetcher()), cfg, question_id="Q7", work_dir=tmp_path / "mm")
    by_type = {it["type_final"]: it for it in res.items if not it["missing_image"]}
    assert by_type["photo"]["engine"] == "vqa" and by_type["photo"]["judge"]["score_overall"] == pytest.approx(1.0)
    assert by_type["datachart"]["engine"] == "chart_qa" and by_type["datachart"]["judge"]["score_overall"] == pytest.approx(0.9 * 0.5 + 0.1)
    assert by_type["ocrchart"]["engine"] == "ocr_chart" and by_type["ocrchart"]["judge"]["score_overall"] == pytest.approx(0.18)
    missing = [it for it in res.items if it["missing_image"]]
    assert len(missing) == 1 and missing[0]["judge"]["score_overall"] is None
    assert res.mm_score == round(100 * (1.0 + 0.55 + 0.18) / 3, 3)
    saved = json.loads((tmp_path / "mm" / "mm_router_routed" / "final_summary.json").read_text(encoding="utf-8"))
    assert saved["summary"]["num_items_scored"] == 3 and res.summary_path.endswith("final_summary.json")
    assert res.payload()["l5_final_summary"] == res.summary_path
    counts = judge.audit.counts()
    assert counts["mm_ocr_chart"]["fallbacks"] == 1 and counts["mm_ocr_chart"]["parse_failures"] == 1
    ocr_call = next(c for c in backend.calls if c.step == "table/chart claim check (image)")
    assert ocr_call.n_images == 1  # the OCR engine sees the image; the chart engine does not
    assert next(c for c in backend.calls if c.step == "table/chart claim check (text)").n_images == 0


def test_vqa_logprobs_mode(tmp_path):
    claims = _claims(tmp_path)[:1]
    judge = Judge(_mosaic_judge())
    res = run_mosaic(claims, judge, ImageResolver(default_fetcher()))  # code default: no log-probabilities -> 0
    assert res.mm_score == 15.0  # 0.85*0 + 0.15: the formatting floor
    assert judge.audit.counts()["mm_vqa"] == {"calls": 1, "cached": 0, "skipped": 1, "generation_failures": 0,
                                              "parse_failures": 0, "partial": 0, "fallbacks": 1}
    res2 = run_mosaic(claims, Judge(_mosaic_judge()), ImageResolver(default_fetcher()), p_yes=lambda img, s: 0.8)
    assert res2.mm_score == round(100 * (0.85 * 0.8 + 0.15), 3)


def test_mosaic_none_cases(tmp_path):
    judge = Judge(_mosaic_judge())
    none = run_mosaic([], judge, ImageResolver(default_fetcher()))
    assert none.mm_score is None and none.mm == 0.0 and none.summary is None and none.reason == "no_items_from_golden"
    unresolved = run_mosaic(_claims(tmp_path)[3:], judge, ImageResolver(default_fetcher()), work_dir=tmp_path / "w")
    assert unresolved.mm_score is None and unresolved.reason == "no_item_scored"
    assert unresolved.summary["avg_metric_by_dim"] == {} and (tmp_path / "w" / "mm_router_routed" / "final_summary.json").exists()


def test_keyword_routing_option(tmp_path):
    claims = _claims(tmp_path)[1:2]
    backend = ScriptedBackend(steps={"mm_type": "no label", "chart": "[]", "vqa": "YES"})
    code = run_mosaic(claims, Judge(backend), ImageResolver(default_fetcher()))
    assert code.items[0]["type_final"] == "photo"  # keyword type discarded (spec §10.9)
    kw = run_mosaic(claims, Judge(backend), ImageResolver(default_fetcher()), MosaicConfig(routing="keyword"))
    # keyword "datachart" -> pass 1 sets type "ocrchart" (a chart with an image) -> pass 2 keeps it
    assert kw.items[0]["type_final"] == "ocrchart"
    clip = run_mosaic(claims, Judge(backend), ImageResolver(default_fetcher()), image_classifier=lambda b: ("diagram", 0.9))
    assert clip.items[0]["type_final"] == "diagram" and clip.items[0]["cls_source"] == "image"
