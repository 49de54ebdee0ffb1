"""Ablation queries (captions, reformulation) and the grid tables, with a real Backend subclass and cache."""


import pandas as pd
import pytest
from scripted import ScriptedBackend

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.benchmarks.mmbright.queries import caption_augmented, reformulate
from mmir.core.io import write_json
from mmir.llm.backends import GenerationFailure
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient
from mmir.reporting.ablation import ablation_frame, write_ablation

TOPICS = pd.DataFrame({"qid": ["a", "b", "c"], "query": ["q one", "q two", "q three"],
                       "image_paths": [["i1", "i2"], [], ["i3"]]})


def test_caption_augmented_keeps_image_order_and_skips_empty():
    out = caption_augmented(TOPICS, {"i1": "FIRST", "i2": "", "i3": "THIRD"})
    assert out["query"].tolist() == ["q one\n\nFIRST", "q two", "q three\n\nTHIRD"]


def test_reformulate_statuses_counts_and_cache(tmp_path):
    backend = ScriptedBackend(contains={"q one": "The user needs the mean.\nSearch query: sample mean formula",
                                        "q two": "just some keywords without the marker",
                                        "q three": GenerationFailure("empty", "empty content")})
    tpl = MMBRIGHT_PROMPTS.get("reformulate_v1")
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        frame, counts = reformulate(TOPICS, {"i1": "a chart"}, LLMClient(backend, cache), tpl)
        assert cache.stats["backend_calls"] == 3
    assert frame["query"].tolist() == ["sample mean formula", "just some keywords without the marker", "q three"]
    assert frame["status"].tolist() == ["ok", "no_marker", "failed"]
    assert counts == {"ok": 1, "no_marker": 1, "failed": 1}
    calls = len(backend.calls)
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        reformulate(TOPICS, {"i1": "a chart"}, LLMClient(backend, cache), tpl)
        assert cache.stats["hits"] == 2
    assert len(backend.calls) == calls + 1  # only the failed one is retried; the rest come from the cache


def _metric(tmp, dom, system, v):
    p = tmp / f"{dom}-{system}.json"
    write_json(p, {"dataset": "os", "domain": dom, "system": system, "queries": 5, "measures": {"nDCG@10": v}})
    return p


def test_ablation_table_cells_deltas_and_plot(tmp_path):
    derived = {"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr", "grid": "caption", "source": "ocr"},
               "bm25+cap:vlm": {"base": "bm25", "variant": "cap-vlm", "grid": "caption", "source": "vlm"}}
    files = [_metric(tmp_path, "s", "bm25", 0.20), _metric(tmp_path, "c", "bm25", 0.40),
             _metric(tmp_path, "s", "bm25+cap:ocr", 0.25), _metric(tmp_path, "c", "bm25+cap:ocr", 0.41),
             _metric(tmp_path, "s", "bm25+cap:vlm", 0.10), _metric(tmp_path, "c", "bm25+cap:vlm", 0.30)]
    frame = ablation_frame(files, "nDCG@10", derived)
    assert frame.set_index("variant")["delta"].round(6).to_dict() == {"ocr": 3.0, "vlm": -10.0}
    out = {k: tmp_path / f"x.{k}" for k in ("md", "csv", "png", "pcsv")}
    write_ablation("caption", frame, "nDCG@10", out["md"], out["csv"], out["png"], out["pcsv"])
    assert "| bm25 | 30.0 | 33.0 (+3.0) | 20.0 (-10.0) |" in out["md"].read_text()
    assert out["png"].read_bytes()[:4] == b"\x89PNG"
    plot = pd.read_csv(out["pcsv"])
    assert sorted(plot["variant"]) == ["ocr", "plain", "vlm"]


def test_a_domain_without_a_number_leaves_the_ablation_cell_empty(tmp_path):
    """A variant whose domain has no scorable query (measures null) gets no average over the other domains."""
    derived = {"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr", "grid": "caption", "source": "ocr"}}
    files = [_metric(tmp_path, "s", "bm25", 0.20), _metric(tmp_path, "c", "bm25", 0.40),
             _metric(tmp_path, "s", "bm25+cap:ocr", 0.25), _metric(tmp_path, "c", "bm25+cap:ocr", None)]
    frame = ablation_frame(files, "nDCG@10", derived)
    assert frame["value"].isna().all() and frame["plain"].item() == pytest.approx(30.0)
    out = {k: tmp_path / f"x.{k}" for k in ("md", "csv", "png", "pcsv")}
    write_ablation("caption", frame, "nDCG@10", out["md"], out["csv"], out["png"], out["pcsv"])
    assert "| bm25 | 30.0 | – |" in out["md"].read_text()
