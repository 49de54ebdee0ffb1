"""RAG QA: strict judge parsing, evidence per setting, agreement, and a run with a real Backend subclass."""

import pandas as pd
import pytest
from scripted import ScriptedBackend
from test_multimodal import IMG, ds, mm_root

from mmir.benchmarks.rag.judge import agreement
from mmir.benchmarks.rag.qa import (
    DomainIndex,
    evidence_for,
    run_setting,
    select_queries,
    summarize,
)
from mmir.config.models import RagConfig
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient, Sampling
from mmir.llm.parsers import SCORE_0_100


@pytest.mark.parametrize("reply, expected", [
    ("Score: 85", 85.0), ("85/100", 85.0), ("**Score**: 85.", 85.0), ('{"score": 72, "why": "ok"}', 72.0),
    ("The answer is mostly right.\nScore: 90", 90.0), ("score=40", 40.0), ("  100 ", 100.0), ("0", 0.0),
    ("Score: 150", None), ("Score: -5", None), ("120/100", None), ("The answer is good.", None), ("", None),
    (None, None), ('{"score": "high"}', None),
])
def test_parse_score(reply, expected):
    assert SCORE_0_100(reply).value == expected


def test_agreement():
    a = agreement([[80, 90], [50, 50], [10, 40], [70]])
    assert a["answers"] == 3 and a["mean_abs_diff"] == pytest.approx((10 + 0 + 30) / 3)
    assert a["within_tolerance"] == pytest.approx(2 / 3)


@pytest.fixture
def prepared(tmp_path):
    out = tmp_path / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp_path)), "d"), out)
    return out


def test_oracle_and_topk_evidence(prepared, tmp_path):
    index = DomainIndex(prepared, {IMG["a0001"]: "OCR"})
    gold = ["d/aaaaaaaa_0.txt", "d/cccccccc_0.txt"]
    assert [e.id for e in evidence_for("oracle", "q1", index, None, 5)] == gold
    with_images = [e.id for e in evidence_for("oracle", "q1", index, None, 5, takes_images=True)]
    assert with_images == gold + [IMG["a0001"], IMG["a0003"], IMG["d0001"]]
    run = {"q1": [("d/bbbbbbbb_0.txt", 3.0), (f"d/aaaaaaaa_1.txt|||{IMG['a0001']}", 2.0), ("d/dddddddd_0.txt", 1.0)]}
    ev = evidence_for("topk:bm25", "q1", index, run, 2)
    assert [e.id for e in ev] == ["d/bbbbbbbb_0.txt", "d/aaaaaaaa_1.txt", IMG["a0001"]]  # first k=2 run lines
    assert ev[2].text.startswith("OCR") and ev[2].image is not None
    assert evidence_for("none", "q1", index, run, 2) == []


def test_run_setting_counts_judge_failures_and_excludes_them(prepared, tmp_path):
    topics = pd.read_parquet(prepared / "topics.parquet").assign(gold_answers=[["sum over count"], ["slope"]])
    topics = select_queries(topics, None)
    gen = ScriptedBackend("It is the sum divided by the count [d/aaaaaaaa_0.txt].")
    # judge: first query gets a clean score, second gets words twice (even after the strict retry)
    judge = ScriptedBackend(lambda p: "Score: 80" if "sum over count" in p else "I cannot say.")
    index = DomainIndex(prepared, {})
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        answers, judgments = run_setting("oracle", topics, index, None, LLMClient(gen, cache),
                                         LLMClient(judge, cache, sampling=Sampling(max_tokens=64)),
                                         RagConfig(generator="g", judge="j", k=5, images=False, judge_repeats=2))
    assert "[d/aaaaaaaa_0.txt] (document)" in gen.prompts[0]
    s = summarize(answers, judgments)
    assert s["queries"] == 2 and s["judge_failures"] == 2 and s["answers_scored"] == 1 and s["score"] == 80.0
    assert judgments.loc[judgments["qid"] == "q2", "status"].tolist() == ["failed", "failed"]
    assert any("could not be read" in p for p in judge.prompts)  # the stricter retry happened


def test_select_queries_keeps_only_reference_answers():
    t = pd.DataFrame({"qid": ["a", "b", "c"], "gold_answers": [["x"], [], [" "]]})
    assert select_queries(t, None)["qid"].tolist() == ["a"]
