"""The MMDR stage without an LLM: task builder, baseline report assembly, mmir:// fetching from a prepared
corpus, and the steps end to end with a scripted writer and judge (numbers re-derived from the records)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr import check, judge_audit, results
from mmir.benchmarks.mmdr.baseline import (
    Source,
    assemble_report,
    attach_citations,
    gather_sources,
    strip_references,
)
from mmir.benchmarks.mmdr.build_tasks import build_tasks, load_built_tasks
from mmir.benchmarks.mmdr.fetch import default_fetcher, fetch_evidence
from mmir.benchmarks.mmdr.image_resolver import ImageResolver
from mmir.benchmarks.mmdr.local import ImageTextBackend, LocalDomain, mmir_uri
from mmir.benchmarks.mmdr.report_parser import parse_references
from mmir.benchmarks.mmdr.tasks import load_tasks
from mmir.core.errors import ConfigError, DataError
from mmir.workflow import mmdr as pipeline
from mmir.workflow.units import PreparedUnit
from mmir.workflow.validate import validate_config

SCHEMES = ("http", "https", "file", "mmir")
DOCS = [
    ("d/aaaa0001_0.txt", "A histogram shows the frequency of values in bins of equal width."),
    ("d/aaaa0001_1.txt", "The mean of a sample is the sum of the values divided by the count."),
    ("d/bbbb0002_0.txt", "A pie chart shows the parts of a whole as wedges of a circle."),
    ("d/my doc_3.txt", "Quartiles split ordered data into four equal parts."),
]


def _png(seed: int, size: int = 48) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def make_prepared(root, *, bad_path: bool = False):
    """A tiny prepared domain in the layout of mmir.data.prepare (what the MMDR steps read)."""
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(DOCS, columns=["doc_id", "text"]).to_parquet(root / "corpus.parquet", index=False)
    topics = [
        {"qid": "q0", "query": "What is a mean?", "image_paths": [], "gold_answers": []},
        {"qid": "q1", "query": "What does the pie chart show about the wedges?", "image_paths": ["d/query_q1/image_1.png"],
         "gold_answers": []},
        {"qid": "q2", "query": "Read the histogram.", "image_paths": ["d/query_q2/image_1.png", "d/query_q2/image_2.png"],
         "gold_answers": []},
        {"qid": "q3", "query": "Only a broken image.", "image_paths": ["d/query_q3/image_1.png"], "gold_answers": []},
        {"qid": "q4", "query": "Beyond max_tasks.", "image_paths": ["d/query_q4/image_1.png"], "gold_answers": []},
    ]
    if bad_path:
        topics[1]["image_paths"] = ["../outside.png"]
    pd.DataFrame(topics).to_parquet(root / "topics.parquet", index=False)
    qi = [
        {"path": topics[1]["image_paths"][0], "alt": "A pie chart with four wedges: A, B, C, D.", "bytes": _png(1), "ok": True},
        {"path": "d/query_q2/image_1.png", "alt": "Histogram of ages, five bars.", "bytes": _png(2), "ok": True},
        {"path": "d/query_q2/image_2.png", "alt": "unused: not ok", "bytes": _png(3), "ok": False},
        {"path": "d/query_q3/image_1.png", "alt": "broken", "bytes": b"", "ok": False},
        {"path": "d/query_q4/image_1.png", "alt": "", "bytes": _png(4), "ok": True},
    ]
    for r in qi:
        r |= {"sha256": "", "width": 48, "height": 48}
    pd.DataFrame(qi).to_parquet(root / "query_images.parquet", index=False)
    pd.DataFrame([{"path": "d/d_aaaa0001_0001/image_1.png", "sha256": "", "alt": "corpus figure", "bytes": _png(9),
                   "width": 48, "height": 48, "ok": True}]).to_parquet(root / "images.parquet", index=False)
    (root / "qrels.task1.txt").write_text("q1 0 d/bbbb0002_0.txt 1\n")
    return root


@pytest.fixture
def prepared(tmp_path):
    return make_prepared(tmp_path / "prepared" / "ds" / "d")


# ----------------------------------------------------------------------------------------------- task builder
def test_build_tasks_first_n_with_a_usable_image(prepared, tmp_path):
    out = tmp_path / "tasks"
    summary = build_tasks(prepared, "ds", "d", out, max_tasks=2)
    # q0 has no image; q1 and q2 are the first two with a usable image; q2's second image is not ok
    assert summary["qids"] == ["q1", "q2"] and summary["tasks"] == 2
    assert summary["with_images"] == 4 and summary["images_dropped"] == 1 and summary["images"] == 2
    tasks = load_tasks(out / "tasks.jsonl", gt_path=out / "ground_truth.jsonl")
    assert [t.qid for t in tasks] == ["q1", "q2"] and tasks[0].text == "What does the pie chart show about the wedges?"
    assert tasks[0].set == "research" and tasks[0].profile == "research"
    assert tasks[0].ground_truth == "Image 1: A pie chart with four wedges: A, B, C, D."
    assert tasks[1].ground_truth == "Image 1: Histogram of ages, five bars."
    assert open(tasks[0].images[0], "rb").read() == _png(1)
    assert tasks[0].images[0].endswith("images/d/query_q1/image_1.png")
    built = load_built_tasks(out)
    assert [(b.dataset, b.domain, b.topic_qid, b.image_paths) for b in built] == [
        ("ds", "d", "q1", ("d/query_q1/image_1.png",)), ("ds", "d", "q2", ("d/query_q2/image_1.png",))]


def test_build_tasks_skips_queries_without_usable_image_and_counts_missing_alt(prepared, tmp_path):
    s = build_tasks(prepared, "ds", "d", tmp_path / "t", max_tasks=None)
    assert s["qids"] == ["q1", "q2", "q4"] and s["no_usable_image"] == 1  # q3's only image is broken
    assert s["tasks_without_ground_truth"] == 1  # q4 has no alt text: VEF will be 0
    gt = [json.loads(line) for line in (tmp_path / "t" / "ground_truth.jsonl").read_text().splitlines()]
    assert gt[2] == {"qid": "q4", "gt": ""}


def test_build_tasks_bad_input_names_file_row_and_field(tmp_path):
    prep = make_prepared(tmp_path / "p", bad_path=True)
    with pytest.raises(DataError) as e:
        build_tasks(prep, "ds", "d", tmp_path / "t", max_tasks=3)
    assert "query_images.parquet" in str(e.value) and e.value.row == 0 and e.value.field == "path"
    pd.DataFrame({"qid": ["x"]}).to_parquet(prep / "topics.parquet")
    with pytest.raises(DataError, match="missing column 'query'"):
        build_tasks(prep, "ds", "d", tmp_path / "t", max_tasks=3)


# ------------------------------------------------------------------------------------------------- baseline
def _sources():
    return [Source(1, "document", DOCS[0][0], mmir_uri("ds", DOCS[0][0]), DOCS[0][1]),
            Source(2, "document", DOCS[2][0], mmir_uri("ds", DOCS[2][0]), DOCS[2][1]),
            Source(3, "document", DOCS[3][0], mmir_uri("ds", DOCS[3][0]), DOCS[3][1]),
            Source(4, "image", "d/query_q1/image_1.png", mmir_uri("ds", "d/query_q1/image_1.png"), "A B C D", figure=1)]


BODY = (
    "## Executive Summary\n\nA pie chart shows parts of a whole [2]. Bins matter [9].\n\n"
    "## Analysis & Evidence\n\nQuartiles split ordered data into four equal parts of the data.\n\n"
    "## Visual Integration\n\nFigure 1 shows four wedges.\n\n"
    "## Conclusion\n\nThe chart answers the question [2][2].\n\n"
    "### References\n[1] https://made.up/url\n[2] http://another.example\n"
)


def test_baseline_references_are_built_from_the_sources_not_the_model():
    report, st = assemble_report(BODY, _sources(), min_report_chars=50, posthoc=False)
    refs = parse_references(report, SCHEMES)
    # the model's own (made-up) list is cut; [2] and the figure [4] map to mmir URIs; [9] does not exist
    assert refs == {"2": "mmir://ds/d/bbbb0002_0.txt", "4": "mmir://ds/d/query_q1/image_1.png"}
    assert "made.up" not in report and st["model_wrote_references"]
    assert st["citation_markers"] == 4 and st["citations_valid"] == 3 and st["citations_invalid"] == [9]
    assert st["sources_cited"] == 1 and st["sources_uncited"] == 2 and st["figures_cited_by_model"] == 0
    assert st["urls_written_by_model"] == 0 and st["figures_appended"] == 1 and st["references"] == 2
    # the figure block ends the Visual Integration section, before the Conclusion
    vis, fig, concl = report.index("## Visual Integration"), report.index("Figure 1: image 1"), report.index("## Conclusion")
    assert vis < report.index("Figure 1 shows") < fig < concl
    assert "![Figure 1](mmir://ds/d/query_q1/image_1.png)" in report
    assert st["report_chars"] == len(report) and not st["under_min_chars"]
    assert assemble_report(BODY, _sources(), min_report_chars=10_000, posthoc=False)[1]["under_min_chars"]


def test_posthoc_citations_attach_the_covering_source_and_the_figure():
    text, counts = attach_citations(
        "## Analysis\n\nQuartiles split ordered data into four equal parts. Completely unrelated words here now. "
        "Figure 1 shows four wedges. The chart is round. Already cited [2].", _sources(), min_overlap=0.5)
    assert "four equal parts [3]." in text  # best word overlap: the quartiles document
    assert "unrelated words here now." in text and "now [" not in text  # under min_overlap: left alone
    assert "Figure 1 shows four wedges [4]." in text and "The chart is round [4]." in text  # Figure i / image cue
    assert "Already cited [2]." in text and counts == {"attached_sources": 1, "attached_figures": 2}
    report, st = assemble_report(BODY, _sources(), min_report_chars=50, posthoc=True, min_overlap=0.5)
    assert st["posthoc_sources"] == 1 and st["posthoc_figures"] == 1 and st["citations_valid"] == 3  # model's own unchanged
    assert parse_references(report, SCHEMES)["3"] == "mmir://ds/d/my%20doc_3.txt"


def test_strip_references_only_cuts_a_list_header():
    assert strip_references("Text about references in prose.\n\n**Sources:**\n- a") == ("Text about references in prose.", True)
    assert strip_references("No list here.") == ("No list here.", False)


def test_gather_sources_from_run_items_pairs_and_question_images(prepared, tmp_path):
    build_tasks(prepared, "ds", "d", tmp_path / "t", max_tasks=1)
    bt = load_built_tasks(tmp_path / "t")[0]
    dom = LocalDomain("ds", prepared, {"d/query_q1/image_1.png": "OCR: A B C D"})
    run = {"q1": [("d/bbbb0002_0.txt", 3.0), ("d/aaaa0001_0.txt|||d/d_aaaa0001_0001/image_1.png", 2.0),
                  ("d/bbbb0002_0.txt", 1.0)]}
    srcs = gather_sources(bt, dom, run, k=3, image_text=["caption"])
    assert [(s.n, s.kind, s.item_id, s.figure) for s in srcs] == [
        (1, "document", "d/bbbb0002_0.txt", None), (2, "document", "d/aaaa0001_0.txt", None),
        (3, "image", "d/d_aaaa0001_0001/image_1.png", None), (4, "image", "d/query_q1/image_1.png", 1)]
    assert srcs[3].text == "OCR: A B C D" and srcs[2].text == "(no text found in the image)"
    assert gather_sources(bt, dom, run, k=1, image_text=["caption", "alt"])[-1].text == \
        "OCR: A B C D\nA pie chart with four wedges: A, B, C, D."
    with pytest.raises(DataError, match="query q1"):
        gather_sources(bt, dom, {"q1": [("nope.txt", 1.0)]}, k=1, image_text=[], run_file="r.trec")


# ---------------------------------------------------------------------------------------- mmir:// fetching
def test_mmir_uris_resolve_against_the_prepared_corpus(prepared):
    dom = LocalDomain("ds", prepared)
    f = default_fetcher(resolve_local=dom.resolve)
    doc = f.fetch(mmir_uri("ds", "d/my doc_3.txt"))
    assert mmir_uri("ds", "d/my doc_3.txt") == "mmir://ds/d/my%20doc_3.txt"
    assert doc.ok and doc.text() == DOCS[3][1] and doc.content_type.startswith("text/plain")
    img = f.fetch(mmir_uri("ds", "d/query_q1/image_1.png"))
    assert img.ok and img.content_type == "image/png" and img.data == _png(1)
    missing = f.fetch("mmir://ds/d/none.txt")
    assert not missing.ok and missing.status == 404
    assert not f.fetch("mmir://other/d/aaaa0001_0.txt").ok  # another dataset is not this corpus
    ev = fetch_evidence(mmir_uri("ds", DOCS[0][0]), "claim", 140_000, f)
    assert ev.excerpt == DOCS[0][1] and ev.meta["domain"] == "ds" and ev.meta["fetch_ok"] and not ev.is_direct_image
    ev_img = fetch_evidence(mmir_uri("ds", "d/query_q1/image_1.png"), "claim", 140_000, f)
    assert ev_img.is_direct_image
    r = ImageResolver(f).resolve(mmir_uri("ds", "d/query_q1/image_1.png"))
    assert r.ok and r.data == _png(1)
    assert ImageResolver(f).resolve(mmir_uri("ds", DOCS[0][0])).reason == "no_image_found"


def test_image_text_backend_describes_images_for_a_text_only_judge(prepared):
    dom = LocalDomain("ds", prepared, {"d/query_q1/image_1.png": "OCR words"})
    inner = ScriptedBackend(default="YES")
    b = ImageTextBackend(inner, lambda data: dom.describe_bytes(data, ["caption", "alt"]), "caption+alt")
    b.generate([{"role": "user", "content": [{"type": "image", "image": _png(1)}, {"type": "image", "image": _png(77)},
                                             {"type": "text", "text": "Statement: x"}]}])
    prompt = inner.calls[0]
    assert inner.calls[0].n_images == 0  # no image part reaches the text-only backend
    assert "[Image 1, given as text (caption+alt): OCR words\nA pie chart with four wedges: A, B, C, D.]" in prompt
    assert "[Image 2, given as text (caption+alt): (no description available" in prompt
    assert b.stats == {"images_described": 1, "images_without_description": 1}
    assert b.cache_identity()["image_input"] == "text:caption+alt" and b.model_id == inner.model_id


# -------------------------------------------------------------------------------------------------- config
def _config(mmdr: dict | None = None, root: str | None = None) -> dict:
    if root is None:  # validate checks that a local root exists and lists the domain: a bare one will do
        import tempfile
        from pathlib import Path

        root = tempfile.mkdtemp(prefix="mmir-test-mmdr-")
        (Path(root) / "documents").mkdir()
        (Path(root) / "documents" / "d.parquet").write_bytes(b"")
    return {"datasets": {"ds": {"source": "local", "root": root, "domains": ["d"]}},
            "systems": {"bm25": {"kind": "bm25"}}, "tasks": ["task1"],
            "generators": {"g": {"backend": "llama_cpp"}},
            "mmdr": {"generator": "g", "judge": "g", **(mmdr or {})}}


def test_config_defaults_and_errors_name_the_key():
    c = validate_config(_config())
    m = c["mmdr"]
    assert m["max_tasks"] == 2 and m["system"] == "bm25" and m["judge_images"] == "text"
    assert check.evaluator_config(m).trace.schemes == SCHEMES and not check.evaluator_config(m).vef.attach_images
    with pytest.raises(ConfigError) as e:
        validate_config(_config({"evaluator": {"trace": {"schemes": ["http"]}}}))
    assert e.value.key == "mmdr.evaluator.trace.schemes"
    with pytest.raises(ConfigError) as e:
        validate_config(_config({"evaluator": {"trace": {"schemes": list(SCHEMES)}, "nonsense": 1}}))
    assert e.value.key == "mmdr.evaluator.nonsense"
    with pytest.raises(ConfigError) as e:
        validate_config(_config({"system": "dense"}))
    assert e.value.key == "mmdr.system"
    with pytest.raises(ConfigError) as e:
        validate_config(_config({"image_text": ["pixels"]}))
    assert e.value.key.startswith("mmdr.image_text")


# ------------------------------------------------------------------------------------ steps end to end
WRITER = (
    "## Executive Summary\n\nA pie chart shows the parts of a whole as wedges [2]. The mean is the sum divided by the "
    "count [1].\n\n## Background\n\nA histogram shows the frequency of values in bins of equal width [1].\n\n"
    "## Methodology\n\nWe read the sources and the figure.\n\n## Analysis & Evidence\n\n"
    + "The wedges of the pie chart are the parts of the whole, and each wedge is a share [2]. " * 6
    + "\n\n## Visual Integration\n\nFigure 1 shows four wedges labelled A to D [3].\n\n"
    "## Conclusion\n\nThe chart shows four parts of a whole [2].\n"
)
JUDGE = {
    "flae": json.dumps({"E": 0.05, "p_analysis": 0.5, "rho_connective": 0.4, "rho_synthesis": 0.3, "U": 0.8, "O": 0.7,
                        "T": 0.6, "kappa": 0.0, "theta": 0.8, "sections": {}, "llm_R": 0.7, "llm_I": 0.6, "llm_C": 0.6, "llm_S": 0.5}),
    "controller": ["not json", json.dumps({"task_family": "analysis", "v_general": [0, 0, 0, 0], "v_evidence": [0, 0, 0, 0],
                                           "lambda_final": 0.4})],
    "evidence": [json.dumps({"support_strength": 0.8, "hallucination_prob": 0.1, "inversion_prob": 0.0,
                             "chain_sound_prob": 0.9, "source_category": "acceptable", "why": "ok"}), "garbage"],
    "vef": json.dumps({"score": 7, "reason": "right", "verdict": "PASS"}),
    "mm_type": json.dumps({"label": "datachart"}),
    "vqa": "YES",
    "chart": json.dumps([{"claim": "four parts", "is_supported": True, "confidence": 0.9}]),
    "ocr": json.dumps([{"claim": "four parts", "is_supported": True, "confidence": 1.0}]),
}


def _run_stage(tmp_path, monkeypatch, prepared):
    import mmir.llm.backends as backends

    backend = ScriptedBackend(steps={**JUDGE}, default=WRITER)
    monkeypatch.setattr(backends, "make_backend", lambda cfg: backend)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    cfg = validate_config(_config({"max_tasks": 2, "k": 2}))
    cfg["mlflow"] = {"tracking_uri": None, "experiment": "t"}
    m = cfg["mmdr"]
    run = tmp_path / "q.trec"
    run.write_text("q1 Q0 d/aaaa0001_0.txt 1 9 bm25\nq1 Q0 d/bbbb0002_0.txt 2 8 bm25\nq1 Q0 d/aaaa0001_1.txt 3 7 bm25\n"
                   "q2 Q0 d/aaaa0001_1.txt 1 9 bm25\n")
    caps = tmp_path / "ocr.parquet"
    pd.DataFrame([{"path": "d/query_q1/image_1.png", "role": "query", "text": "A B C D"}]).to_parquet(caps)
    base = tmp_path / "results" / "mmdr" / "ds" / "d"
    pipeline.tasks_step("ds", "d", prepared, m, base / "tasks")
    rep = pipeline.reports_step(PreparedUnit("ds", "d", prepared), base / "tasks", m, {"backend": "x"}, tmp_path / "gen.sqlite",
                                base / "reports", run, caps)
    sc = pipeline.score_step(PreparedUnit("ds", "d", prepared), base / "tasks", base / "reports", m, {"backend": "x"},
                             tmp_path / "gen.sqlite", base / "run", caps)
    out = pipeline.report_step(cfg, [base / "run"], [base / "reports"], tmp_path / "mmdr.md", tmp_path / "mmdr.csv",
                               tmp_path / "export", tmp_path / "tracking.json")
    return cfg, base, rep, sc, out


def test_stage_end_to_end_with_a_scripted_judge(tmp_path, monkeypatch, prepared):
    cfg, base, rep, sc, out = _run_stage(tmp_path, monkeypatch, prepared)
    assert rep["reports"] == 2 and rep["failed"] == 0 and sc["tasks"] == sc["scored"] == 2
    # the report cites only the run's top-k (k = 2) and the figure, by mmir URI
    report = (base / "reports" / "q1.md").read_text()
    refs = parse_references(report, SCHEMES)
    assert refs == {"1": "mmir://ds/d/aaaa0001_0.txt", "2": "mmir://ds/d/bbbb0002_0.txt", "3": "mmir://ds/d/query_q1/image_1.png"}
    assert (base / "run" / "reports" / "q1.md").read_text() == report
    recs = [json.loads(line) for line in (base / "run" / "results" / "mmdr.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in recs] == ["q1", "q2"] and recs[0]["topic_qid"] == "q1"

    # every exported row re-derived from the record's stored components (spec §7)
    rows = list(csv.DictReader(open(tmp_path / "export" / "mmdr.task_scores.csv", encoding="utf-8-sig")))
    assert [r["Task ID"] for r in rows] == ["ds/d/q1", "ds/d/q2"]
    for rec, row in zip(recs, rows):
        s, g, e = rec["scores"], rec["scoring"]["raw"]["general"], rec["scoring"]["raw"]["evidence"]
        trace = 0.6 * s["EVI"] + 0.4 * s["VEF"]
        overall = 0.2 * s["GEN"] + 0.5 * trace + 0.3 * s["MM"]
        assert float(row["Overall"]) == pytest.approx(overall, abs=1e-6)
        assert float(row["TRACE"]) == pytest.approx(trace, abs=1e-6)
        assert abs(overall - s["FINAL_MMDR"]) <= 5e-4
        assert float(row["Read."]) == pytest.approx(100 * g["R"], abs=1e-6)
        assert float(row["Con."]) == pytest.approx(100 * e["E_con"], abs=1e-6)
        assert row["Complete"] == "True" and s["VEF"] == 100.0  # raw 7 >= 6
        assert rec["mm"]["activated"] and s["MM"] > 0
    board = dict(out["rows"])["All"]
    assert board["n"] == board["complete"] == 2
    assert board["Overall"] == pytest.approx(sum(float(r["Overall"]) for r in rows) / 2)
    assert board["MOSAIC"] == pytest.approx(sum(r["scores"]["MM"] for r in recs) / 2)
    lb = list(csv.DictReader(open(tmp_path / "export" / "mmdr.leaderboard.csv", encoding="utf-8-sig")))[0]
    assert float(lb["Overall"]) == pytest.approx(round(board["Overall"], 2)) and lb["Model"] == results.model_label(cfg["mmdr"])

    # fallbacks: counted from the saved audit, equal to the manifest's
    audit = [json.loads(line) for line in (base / "run" / "audit.jsonl").read_text().splitlines()]
    assert all(a["text"] is not None for a in audit if a["status"] == "ok")
    counted = {}
    for a in audit:
        counted[a["label"]] = counted.get(a["label"], 0) + int(a["fallback_used"])
    man = json.loads((tmp_path / "export" / "mmdr.leaderboard_manifest.json").read_text())
    assert man["provenance"]["judge_fallbacks"] == counted and counted["controller"] >= 1 and counted["evidence_pair"] >= 1
    assert man["submission_ready"] and man["records_selected"] == 2 and man["provenance"]["judge"]["image_input"] == "text:caption+alt"
    assert "report_baseline_v1" not in man["provenance"]["prompt_sha256"] and "mmdr_vef_v1" in man["provenance"]["prompt_sha256"]
    assert man["provenance"]["judge_replies_cut_at_max_tokens"] == dict.fromkeys(counted, 0)  # scripted replies all "stop"
    writer = man["provenance"]["report_writer"]
    assert writer["prompt"] == "report_baseline_v1" and len(writer["prompt_sha256"]) == 64
    md = (tmp_path / "mmdr.md").read_text()
    assert f"| All‡ | 2 | 2 | {board['Overall']:.2f} | {board['FLAE']:.2f} |" in md
    assert f"{sum(1 for a in audit if a['label'] == 'controller')} / 1 / {counted['controller']}" in md
    # MLflow: a parent and a child per domain plus one for all tasks
    ids = json.loads((tmp_path / "tracking.json").read_text())
    assert len(ids["children"]) == 2
    db = sqlite3.connect(tmp_path / "mlflow.db")
    names = {r[0] for r in db.execute("SELECT name FROM runs")}
    assert {"mmdr", "mmdr/ds/d", "mmdr/All"} <= names
    val = db.execute("SELECT value FROM metrics m JOIN runs r ON m.run_uuid = r.run_uuid WHERE r.name = 'mmdr/All' "
                     "AND m.key = 'Overall'").fetchone()[0]
    assert val == pytest.approx(board["Overall"])


def test_rerun_is_served_by_the_caches(tmp_path, monkeypatch, prepared):
    _, base, _, first, _ = _run_stage(tmp_path, monkeypatch, prepared)
    audit = [json.loads(x) for x in (base / "run" / "audit.jsonl").read_text().splitlines()]
    retry = {a["cache_key"] for a in audit if a["status"] in ("failed", "rejected")}
    cfg, base, rep, sc, out = _run_stage(tmp_path, monkeypatch, prepared)
    assert rep["cache"]["backend_calls"] == 0 and rep["cache"]["hits"] == 2
    assert rep["llm_calls"] == 2 and rep["llm_failures"] == 0
    # failed judge calls and rejected replies are not cached as final (retried); everything else is a cache hit
    assert first["llm_failures"] > 0 and len(retry) > 0
    assert sc["cache"]["backend_calls"] == len(retry) and sc["cache"]["hits"] > 0


def test_example_copies_are_counted_per_module():
    ex = {"support_strength": 0.0, "hallucination_prob": 0.0, "inversion_prob": 0.0, "chain_sound_prob": 0.0,
          "source_category": "unknown", "why": "one short sentence"}
    assert judge_audit.prompt_examples("mmdr_evidence_pair_v1") == [ex]

    def rec(module, prompt, reply, ok=True):
        return {"label": module, "prompt_id": prompt, "text": reply, "parse_ok": ok}

    records = [
        rec("evidence_pair", "mmdr_evidence_pair_v1", json.dumps({**ex, "why": "copied numbers, own words"})),
        rec("evidence_pair", "mmdr_evidence_pair_v1", "```json\n" + json.dumps(ex) + "\n```"),
        rec("evidence_pair", "mmdr_evidence_pair_v1", json.dumps({**ex, "support_strength": 0.7})),  # a judgment
        rec("evidence_pair", "mmdr_evidence_pair_v1", "not json", ok=False),
        rec("vef", "mmdr_vef_v1", json.dumps({"score": 0, "reason": "one or two sentences", "verdict": "FAIL"})),
        rec("vef", "mmdr_vef_v1", json.dumps({"score": 0, "reason": "the axis is wrong", "verdict": "FAIL"})),
        rec("mm_type", "mmdr_mm_type_v1", json.dumps({"label": "photo"})),  # a one-field answer is never a copy
        rec("mm_chart", "mmdr_chart_claims_v1", json.dumps([{"claim": "short paraphrase", "is_supported": True,
                                                              "confidence": 0.0, "reason": "rows/cells used"}])),
    ]
    assert judge_audit.example_copies(records) == {"evidence_pair": 2, "vef": 1, "mm_type": 0, "mm_chart": 1}


def test_cli_runs_each_rule_step(tmp_path, monkeypatch, prepared):
    """``mmir job <rule> ...``: the rules' own steps (inputs, outputs, params from the rule specs) in the
    project layout, one domain here."""
    import shutil

    import yaml

    import mmir.llm.backends as backends
    from mmir import cli

    monkeypatch.setattr(backends, "make_backend", lambda cfg: ScriptedBackend(steps={**JUDGE}, default=WRITER))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    raw = tmp_path / "raw"
    for sub in ("documents", "examples_images"):
        (raw / sub).mkdir(parents=True)
        (raw / sub / "d.parquet").write_bytes(b"")  # only their presence matters here (domain with query images)
    shutil.copytree(prepared, tmp_path / "data" / "prepared" / "ds" / "d")
    run = tmp_path / "results" / "runs" / "task1" / "ds" / "bm25" / "d.trec"
    run.parent.mkdir(parents=True)
    run.write_text("q1 Q0 d/bbbb0002_0.txt 1 9 bm25\nq2 Q0 d/aaaa0001_0.txt 1 9 bm25\n")
    caps = tmp_path / "results" / "captions" / "ds" / "d" / "ocr.parquet"
    caps.parent.mkdir(parents=True)
    pd.DataFrame([{"path": "d/query_q1/image_1.png", "role": "query", "text": "A B C D"}]).to_parquet(caps)
    cfg = _config({"max_tasks": 1, "k": 1})
    cfg["datasets"]["ds"]["root"] = str(raw)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(cfg))
    for rule in ("mmdr_tasks", "mmdr_reports", "mmdr_score"):
        assert cli.main(["job", rule, "dataset=ds", "domain=d"]) == 0
    assert cli.main(["job", "mmdr_report"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "results/tables/mmdr/mmdr.task_scores.csv", encoding="utf-8-sig")))
    assert [r["Task ID"] for r in rows] == ["ds/d/q1"]
    assert parse_references((tmp_path / "results/mmdr/ds/d/reports/q1.md").read_text(), SCHEMES) == {
        "1": "mmir://ds/d/bbbb0002_0.txt", "2": "mmir://ds/d/query_q1/image_1.png"}
    assert json.loads((tmp_path / "results/tracking/mmdr.json").read_text())["parent"]
    assert "| All‡ | 1 | 1 |" in (tmp_path / "results/tables/mmdr.md").read_text()  # ‡ the judge's rejected replies


def test_report_gives_bootstrap_intervals_over_tasks(tmp_path, monkeypatch, prepared):
    """The MMDR table's interval columns: the percentile bootstrap of the mean over the complete tasks (one judging
    each), containing the table's mean; the two tasks' values bound it."""
    import pandas as pd

    _run_stage(tmp_path, monkeypatch, prepared)
    md = (tmp_path / "mmdr.md").read_text()
    assert "95% intervals of the means over complete tasks (percentile bootstrap over tasks" in md
    table = pd.read_csv(tmp_path / "mmdr.csv").set_index("Domain")
    tasks = pd.read_csv(tmp_path / "export" / "mmdr.task_scores.csv", encoding="utf-8-sig")
    done = tasks[tasks["Complete"].astype(str).str.lower() == "true"]
    for col in ("Overall", "FLAE", "TRACE", "MOSAIC"):
        lo, hi = table.at["All", f"{col} ci_low"], table.at["All", f"{col} ci_high"]
        assert lo <= table.at["All", col] + 0.01 and table.at["All", col] <= hi + 0.01
        assert done[col].min() - 0.01 <= lo and hi <= done[col].max() + 0.01
