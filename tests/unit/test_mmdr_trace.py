"""mmir.benchmarks.mmdr.fetch + mmir.benchmarks.mmdr.trace: patience depth scores, support rules, E_con/E_cov/E_fid/E_div, EVI
and the degenerate branches (spec §5.2-5.4)."""

from __future__ import annotations

import json
import math

import pytest
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.claims import ClaimPair
from mmir.benchmarks.mmdr.fetch import (
    CachedFetcher,
    Evidence,
    FetchConfig,
    FetchResult,
    LocalCorpusFetcher,
    OfflineFetcher,
    RoutingFetcher,
    default_fetcher,
    depth_score_from_rank,
    fetch_evidence,
)
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.trace import (
    AuditedPair,
    PairJudgement,
    TraceConfig,
    audit_pair,
    evidence_components,
    run_evidence,
)
from mmir.config.models import MMDREvaluatorConfig

CLAIM = "The chart shows zebra migration totals"  # image cue "chart"


class DictFetcher:
    """URL -> (content_type, body) fixture fetcher; unknown URLs fail."""

    def __init__(self, pages):
        self.pages, self.calls = pages, []

    def fetch(self, url, *, referer=None):
        self.calls.append(url)
        if url not in self.pages:
            return FetchResult.failure(url, "http 404", status=404)
        ct, body = self.pages[url]
        data = body.encode() if isinstance(body, str) else body
        return FetchResult(url=url, ok=bool(data), content_type=ct, data=data, status=200)


def page_with_images(n: int, relevant: int | None) -> str:
    """HTML with n <img> tags 2,000 characters apart; image ``relevant`` (1-based) has the claim's words."""
    parts = ["<html><body><p>Intro text.</p>"]
    for k in range(1, n + 1):
        alt = "zebra migration totals chart" if k == relevant else f"unrelated picture {k}"
        parts.append(f'<div>{"filler " * 300}</div><img src="/img{k}.png" alt="{alt}">')
    return "".join(parts) + "</body></html>"


@pytest.mark.parametrize("rank,expected", [(1, 1.0), (3, 1.0), (14, 0.55), (25, 0.10), (30, 0.10)])
def test_depth_score_by_rank(rank, expected):
    assert depth_score_from_rank(rank) == pytest.approx(expected)
    f = DictFetcher({"https://p.org/x": ("text/html; charset=utf-8", page_with_images(max(rank, 3), rank))})
    ev = fetch_evidence("https://p.org/x", CLAIM, 1_000_000, f)
    assert ev.meta["best_image"]["rank"] == rank
    assert ev.depth_score == pytest.approx(expected)
    assert "IMAGE_CONTEXT_HINT" in ev.excerpt and f"- img_rank: {rank}" in ev.excerpt


def test_depth_low_relevance_and_no_image():
    f = DictFetcher({"https://p.org/a": ("text/html", page_with_images(5, None)),
                     "https://p.org/b": ("text/html", "<html><body>No pictures at all.</body></html>")})
    assert fetch_evidence("https://p.org/a", "The chart shows quokka", 10**6, f).depth_score == 0.45
    assert fetch_evidence("https://p.org/b", CLAIM, 10**6, f).depth_score == 0.30
    # no image cue in the claim: no image scan, depth 1.0
    assert fetch_evidence("https://p.org/a", "Zebras migrate", 10**6, f).depth_score == 1.0


def test_patience_limits_the_image_scan_and_text():
    html = page_with_images(10, 10)  # the relevant image is ~20,000 characters deep
    f = DictFetcher({"https://p.org/deep": ("text/html", html)})
    ev = fetch_evidence("https://p.org/deep", CLAIM, 5_000, f)
    assert ev.depth_score == 0.45  # the relevant image lies beyond the patience budget
    ev2 = fetch_evidence("https://p.org/deep", "no cue here", 5_000, f)
    assert len(ev2.excerpt) <= 5_000


def test_direct_images_failures_and_plain_text(tmp_path):
    img = tmp_path / "a.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 100)
    f = DictFetcher({"https://t.org/data.csv": ("text/csv", "a,b\n" * 20000),
                     "https://t.org/pic": ("image/jpeg", b"\xff\xd8\xff" + b"0" * 10)})
    ev = fetch_evidence(f"file://{img}", CLAIM, 10**6, f)
    assert ev.is_direct_image and ev.meta["domain"] == "local" and ev.meta["fetch_ok"] and "DIRECT_IMAGE_FILE" in ev.excerpt
    assert not fetch_evidence("file:///nope/x.png", CLAIM, 10**6, f).meta["fetch_ok"]
    ev = fetch_evidence("https://t.org/missing.png", CLAIM, 10**6, f)
    assert ev.is_direct_image and ev.meta["fetch_ok"] is False  # image URL: a stub even when the fetch failed
    assert fetch_evidence("https://t.org/pic", CLAIM, 10**6, f).is_direct_image  # image/* content type
    ev = fetch_evidence("https://t.org/gone", CLAIM, 10**6, f)
    assert (ev.excerpt, ev.depth_score, ev.meta["fetch_ok"]) == ("", 1.0, False)
    ev = fetch_evidence("https://t.org/data.csv", CLAIM, 10**6, f)
    assert len(ev.excerpt) == 40_000 and ev.depth_score == 1.0


def test_fetcher_stack_offline_local_and_cache(tmp_path):
    docs = {("openstax", "bio/ch1"): "Cells are the basic unit of life."}
    fetcher = default_fetcher(resolve_local=lambda d, i: docs.get((d, i)), cache_dir=tmp_path / "cache")
    ok = fetcher.fetch("mmir://openstax/bio%2Fch1")
    assert ok.ok and ok.text() == "Cells are the basic unit of life." and ok.content_type.startswith("text/plain")
    assert not fetcher.fetch("mmir://openstax/missing").ok
    off = fetcher.fetch("https://example.org")
    assert not off.ok and off.error.startswith("offline")
    again = fetcher.fetch("mmir://openstax/bio%2Fch1")
    assert again.from_cache and fetcher.hits == 1
    reloaded = CachedFetcher(RoutingFetcher({"mmir": OfflineFetcher()}), cache_dir=tmp_path / "cache")
    assert reloaded.fetch("mmir://openstax/bio%2Fch1").text() == "Cells are the basic unit of life."  # from disk
    assert not LocalCorpusFetcher(lambda d, i: None).fetch("https://x.org").ok


# ------------------------------------------------------------------------------------------- components
def ap(claim="c", *, w=1.0, s=0.5, key=True, img=False, domain="a.org", cat="acceptable", h=0.0, i=0.0, c=1.0, skip=False):
    return AuditedPair(claim=claim, url=f"https://{domain}/x", citation_id="1", relevance_weight=w, is_key_claim=key,
                       depends_on_image=img, domain=domain, source_category=cat, support_strength=s,
                       supported_by_source=s >= 0.55, hallucination_prob=h, inversion_prob=i, chain_sound_prob=c,
                       depth_score=1.0, evidence_meta={}, skip_text_evidence=skip)


def test_components_on_hand_made_pairs():
    pairs = [
        ap(w=1.0, s=0.8, domain="a.gov", cat="authoritative", h=0.1, i=0.0, c=0.9),
        ap(w=1.4, s=0.3, domain="b.com", h=0.3, i=0.2, c=0.6),
        ap(w=1.2, s=0.6, key=False, domain="reddit.com", cat="prohibited", h=0.2, i=0.1, c=0.5),
        ap(w=1.0, s=0.9, img=True, domain="a.gov", cat="authoritative", skip=True),  # excluded
    ]
    res = evidence_components(pairs, "research")
    E_con = (1.0 * 0.8 + 1.4 * 0.3 + 1.2 * 0.6) / 3.6 * (1 - 1 / 3)
    E_cov = (min(1, 0.8 / 0.55) + min(1, 0.3 / 0.55)) / 2
    E_fid = 3 / (1 / 0.8 + 1 / 0.9 + 1 / (2.0 / 3))
    E_div = 1.0 * min(1.0, (1 + 0.5 * 1) / 3)
    assert (res.E_con, res.E_cov, res.E_fid, res.E_div) == pytest.approx((E_con, E_cov, E_fid, E_div))
    assert res.stats["h_doc"] == {"con": 1.0, "cov": 0.0, "fid": 0.0, "div": -0.8}
    logits = [math.log(p + 1e-9) + h for p, h in zip((0.40, 0.25, 0.25, 0.10), (1.0, 0.0, 0.0, -0.8))]
    z = sum(math.exp(x) for x in logits)
    w = [math.exp(x) / z for x in logits]
    assert res.score == pytest.approx(100 * (w[0] * E_con + w[1] * E_cov + w[2] * E_fid + w[3] * E_div))
    assert res.evi == round(res.score, 3)
    # the daily tau (0.45) and the controller's v_evidence shift
    daily = evidence_components(pairs, "daily_easy", (0.0, 2.0, 0.0, 0.0))
    assert daily.E_cov == pytest.approx((1 + 0.3 / 0.45) / 2)
    assert daily.weights["w_cov"] > res.weights["w_cov"]


def test_cov_and_fid_heuristics():
    pairs = [ap(s=0.1, h=0.5, i=0.3, c=0.2, domain=f"d{k}.org") for k in range(3)]
    res = evidence_components(pairs, "research")
    assert res.stats["Q_key"] == 3 and res.E_cov < 0.4
    assert res.stats["h_doc"] == {"con": 0.0, "cov": 0.8, "fid": 0.8, "div": 0.0}


def test_degenerate_branches():
    none = evidence_components([], "research")
    assert (none.E_con, none.E_cov, none.E_fid, none.E_div, none.score) == (0, 0, 0, 0, 0)
    assert none.stats["reason"] == "no_claim_pairs"
    skipped = evidence_components([ap(skip=True), ap(skip=True, domain="local")], "research")
    assert (skipped.E_con, skipped.E_cov, skipped.E_fid, skipped.E_div, skipped.score) == (0, 0, 1.0, 0, 0)
    assert skipped.stats["reason"] == "all_pairs_skipped_direct_image"
    single = evidence_components([ap(domain="only.org")], "research")
    assert single.E_div == 0.0  # one domain: H_norm = 0


def test_audit_pair_support_rules():
    pair = ClaimPair("claim text", "https://x.org/p", "1", relevance_weight=1.2, is_key_claim=True, depends_on_image=False)
    ok = Evidence("text", 0.55, {"domain": "x.org", "fetch_ok": True})
    a = audit_pair(pair, ok, PairJudgement(0.8, 0.1, 0.0, 0.9, "unknown"), "research")
    assert a.support_strength == pytest.approx(0.44) and not a.supported_by_source  # 0.8*0.55 < 0.55
    assert a.source_category == "acceptable"  # unknown -> domain rules
    daily = audit_pair(pair, ok, PairJudgement(0.9, 0, 0, 0.9, "unknown"), "daily_medium")
    assert daily.support_strength == pytest.approx(0.495) and daily.supported_by_source  # tau 0.45 for daily
    assert not audit_pair(pair, ok, PairJudgement(0.9, 0, 0, 0.9, "unknown"), "research").supported_by_source
    failed = Evidence("", 1.0, {"domain": "x.org", "fetch_ok": False})
    assert audit_pair(pair, failed, PairJudgement(0.0, 0, 0, 0, "acceptable"), "research").support_strength == 0.18
    bad = Evidence("", 1.0, {"domain": "www.reddit.com", "fetch_ok": False})
    a = audit_pair(pair, bad, PairJudgement(0.0, 0, 0, 0, "unknown"), "research")
    assert a.support_strength == 0.0 and a.source_category == "prohibited"
    gov = Evidence("t", 1.0, {"domain": "stats.gov", "fetch_ok": True})
    assert audit_pair(pair, gov, PairJudgement(1, 0, 0, 1, "unknown"), "research").source_category == "authoritative"
    img = Evidence("stub", 1.0, {"domain": "i.org", "fetch_ok": False, "evidence_type": "DIRECT_IMAGE_FILE"})
    a = audit_pair(pair, img, None, "research")
    assert a.skip_text_evidence and a.support_strength == 0.0  # skipped: no floor


# ----------------------------------------------------------------------------------------- end to end
def test_run_evidence_with_stub_judge():
    report = (
        "Zebra numbers rose 12% in 2023 according to the survey [1]. The park counts are published yearly [2].\n\n"
        "Figure 1: a photo of zebras [3]\n\n"
        "References:\n\n[1] https://wild.gov/survey\n\n[2] https://news.com/parks\n\n[3] https://img.org/z.jpg\n"
    )
    f = DictFetcher({"https://wild.gov/survey": ("text/html", "<html><p>Zebra numbers rose 12% in 2023.</p></html>")})
    good = json.dumps({"support_strength": 0.9, "hallucination_prob": 0.0, "inversion_prob": 0.0,
                       "chain_sound_prob": 0.9, "source_category": "authoritative", "why": "stated"})
    backend = ScriptedBackend(steps={
        "evidence": lambda prompt: good if "wild.gov/survey" in prompt.split("Cited URL:")[1][:60] else "garbage",
        "controller": json.dumps({"v_general": [0] * 4, "v_evidence": [0] * 4, "lambda_final": 0.4}),
    })
    judge = Judge(backend)
    res = run_evidence(judge, report, "task", "research", "rules", f)
    by_url = {}
    for a in res.audited:
        by_url.setdefault(a.url, []).append(a)
    survey = by_url["https://wild.gov/survey"][0]
    assert survey.support_strength == pytest.approx(0.9) and survey.supported_by_source
    parks = next(a for a in by_url["https://news.com/parks"] if not a.claim.startswith("https"))
    assert parks.judge_fallback and parks.support_strength == pytest.approx(0.35)  # fallback 0.35 (> floor 0.18)
    assert all(a.skip_text_evidence for a in by_url["https://img.org/z.jpg"])
    steps = backend.steps_called()
    assert steps.count("claim-source evidence check") == sum(not a.skip_text_evidence for a in res.audited)
    assert steps[-1] == "task controller (metric weighting)"
    counts = judge.audit.counts()["evidence_pair"]
    assert counts["fallbacks"] == counts["parse_failures"] >= 1
    golden = res.golden("Q1", "research", "task")
    assert len(golden["claims"]) == len(res.audited) and "sentence_urls" not in golden["claims"][0]
    raw = res.to_raw()
    assert {"E_con", "E_cov", "E_fid"} <= raw.keys()


def test_trace_config_schemes_for_offline_corpus():
    report = "Cells divide by mitosis [1].\n\nReferences:\n\n[1] mmir://openstax/bio-ch10\n"
    docs = {("openstax", "bio-ch10"): "Mitosis is how cells divide."}
    fetcher = default_fetcher(resolve_local=lambda d, i: docs.get((d, i)))
    backend = ScriptedBackend(steps={"evidence": json.dumps({"support_strength": 1.0, "hallucination_prob": 0, "inversion_prob": 0,
                                                       "chain_sound_prob": 1, "source_category": "acceptable", "why": "x"}),
                               "controller": "{}"})
    judge = Judge(backend)
    none = run_evidence(judge, report, "t", "research", "r", fetcher)
    assert none.scores.stats["reason"] == "no_claim_pairs"  # mmir:// is not read by default
    res = run_evidence(judge, report, "t", "research", "r", fetcher,
                       MMDREvaluatorConfig(trace=TraceConfig(schemes=("http", "https", "file", "mmir"))))
    assert res.scores.stats["n_pairs_text"] >= 1 and res.audited[0].domain == "openstax"
    assert "Mitosis is how cells divide." in backend.calls[-2]
    assert FetchConfig().patience_for("research") == 140_000 and FetchConfig().patience_for("daily_easy") == 90_000
