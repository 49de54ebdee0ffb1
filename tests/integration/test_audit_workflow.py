"""The quality audit (MM-BRIGHT §3) through Snakemake on a real slice of ../shared/data/openstax (statistics, two
queries) with the offline Qwen2.5 0.5B (llama.cpp) as judge. The table is re-derived from the ratings file with
scipy, the counts from the call records, and a second rating run is answered from the generation cache."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from conftest import shared
from scipy import stats as sps

from integration.helpers import openstax_slice as _slice
from integration.helpers import snakemake

pytestmark = pytest.mark.integration


def test_audit_two_queries_with_the_local_llm(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from mmir.benchmarks.mmbright.audit import CRITERIA
    from mmir.workflow.audit import rate_step, read_ratings
    from mmir.workflow.units import PreparedUnit

    root = _slice(shared("openstax"), tmp_path / "slice", n_queries=2, n_doc_images=4)
    gen = {"backend": "llama_cpp", "n_ctx": 4096, "n_threads": 2}
    audit = {"judge": "qwen", "max_queries": 2, "max_documents": 2, "document_chars": 800, "max_tokens": 96}
    params = {"datasets": {"os": {"source": "local", "root": str(root), "domains": ["statistics"]}}, "tasks": ["task1"],
              "systems": {"bm25": {"kind": "bm25"}}, "measures": ["nDCG@10"], "generators": {"qwen": gen}, "audit": audit,
              "expected": [], "paths": {"generation_cache": "results/cache/generations.sqlite"}}  # this test's own cache
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = snakemake(wd, "results/tables/audit.md", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    base = wd / "results/audit/os/statistics"
    ratings = read_ratings(base / "ratings.tsv")
    stats = json.loads((base / "stats.json").read_text())
    calls = [json.loads(x) for x in (base / "calls.jsonl").read_text().splitlines()]

    # the first two topics (file order) with a positive document, each with its positives from the prepared qrels
    prep = wd / "data/prepared/os/statistics"
    qrels = pd.read_csv(prep / "qrels.task1.txt", sep=" ", names=["q", "i", "d", "r"], dtype={"q": str, "d": str, "r": int})
    pos = qrels[qrels["r"] > 0]
    topics = pd.read_parquet(prep / "topics.parquet")["qid"]
    assert ratings["qid"].tolist() == [q for q in topics if q in set(pos["q"])][:2]
    assert ratings["positives"].tolist() == [int((pos["q"] == q).sum()) for q in ratings["qid"]]
    assert [c["status"] for c in calls] == ratings["status"].tolist() and stats["llm_calls"] == 2
    assert (stats["rated"] + stats["failed"] + stats["rejected"], stats["llm_failures"]) == (2, stats["failed"] + stats["rejected"])
    ok = ratings[ratings["status"] == "ok"]
    assert ok[list(CRITERIA)].isin([1, 2, 3, 4, 5]).all().all()  # ratings in 1-5, never clipped or defaulted
    assert ratings[ratings["status"] != "ok"][list(CRITERIA)].isna().all().all()

    # the table from the ratings: mean and t interval per criterion (scipy), the failures counted
    table = pd.read_csv(wd / "results/tables/audit.csv")
    dom = table[table["domain"] == "statistics"].set_index("criterion")
    for c in CRITERIA:
        x = ok[c].astype(float).to_numpy()
        assert dom.loc[c, "n"] == len(x) and dom.loc[c, "failed"] + dom.loc[c, "rejected"] == 2 - len(x)
        if len(x):
            assert dom.loc[c, "mean"] == pytest.approx(x.mean())
        if len(x) > 1 and x.std() > 0:
            assert (dom.loc[c, "ci_low"], dom.loc[c, "ci_high"]) == pytest.approx(
                sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x)))
    md = (wd / "results/tables/audit.md").read_text()
    assert "| statistics | " in md and "MM-BRIGHT paper (GPT-4o" in md

    # a second run of the same ratings: every accepted reply comes from the cache
    monkeypatch.chdir(wd)
    again = rate_step(PreparedUnit("os", "statistics", wd / "data/prepared/os/statistics"), audit, tmp_path / "r.tsv",
                      tmp_path / "c.jsonl", tmp_path / "s.json", generator=gen,
                      generation_cache=wd / "results/cache/generations.sqlite")
    assert again["cache_hits"] == stats["rated"] and again["rated"] == stats["rated"]
