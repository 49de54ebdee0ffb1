"""The quality audit of MM-BRIGHT §3: the Likert parsers on real reply shapes (valid, out of range, unparseable), the
judge through the real generation cache (scripted backend; failures counted, never a default score), the cache key
(each part changed -> a miss), the aggregation against scipy, the workflow steps, the reproduction rows and the config."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from scripted import ScriptedBackend

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.benchmarks.mmbright.audit import (
    ALL,
    AUDIT_LIKERT,
    AUDIT_LIKERT_JSON,
    CRITERIA,
    PAPER_AVERAGES,
    aggregate,
    rate,
    select_queries,
)
from mmir.config.models import AuditConfig
from mmir.core.errors import ConfigError, DataError
from mmir.core.paths import PIPELINE
from mmir.evaluation.expected import check, load_expected, observations_from_audit_csv
from mmir.llm.backends import GenerationFailure
from mmir.llm.cache import GenerationCache
from mmir.llm.client import LLMClient
from mmir.llm.prompts import PromptTemplate
from mmir.workflow import rules as R
from mmir.workflow import units as U
from mmir.workflow.audit import rate_step, read_ratings, report_step
from mmir.workflow.targets import family_targets
from mmir.workflow.units import PreparedUnit
from mmir.workflow.validate import validate_config

FOUR = {"readability": 4, "clarity": 3, "evidence_usefulness": 5, "evidence_sufficiency": 2}


# ------------------------------------------------------------------------------------------------ parsers
@pytest.mark.parametrize("reply, method", [
    ('{"readability": 4, "clarity": 3, "evidence_usefulness": 5, "evidence_sufficiency": 2}', "json"),
    ('```json\n{\n  "readability": 4,\n  "clarity": 3,\n  "evidence_usefulness": 5,\n  "evidence_sufficiency": 2\n}\n```', "json"),
    ('Here is my rating:\n{"Readability": "4", "Clarity": 3.0, "Evidence usefulness": 5, "Evidence sufficiency": 2}\n'
     "The passages cover the concept.", "json"),
    ('{"ratings": {"readability": {"score": 4, "reason": "clear"}, "clarity": {"score": 3}, "usefulness": 5, '
     '"sufficiency": 2}}', "json"),
    ("**Readability**: 4/5\n**Clarity**: 3/5\n- Evidence usefulness: 5\n- Evidence sufficiency (is it enough?): 2", "pairs"),
    ("1. Readability: 4 - the question is well formed\n2. Clarity: 3\n3. Evidence Usefulness: 5\n4. Evidence Sufficiency: 2",
     "pairs"),
    # a JSON object with a trailing comma (not JSON) still names its four pairs
    ('{"readability": 4, "clarity": 3, "evidence_usefulness": 5, "evidence_sufficiency": 2,}', "pairs"),
])
def test_lenient_parser_reads_real_reply_shapes(reply, method):
    p = AUDIT_LIKERT(reply)
    assert p.ok and p.value == FOUR and p.method == method
    assert AUDIT_LIKERT_JSON(reply).ok == (method == "json")


@pytest.mark.parametrize("reply, error", [
    ('{"readability": 4, "clarity": 3, "evidence_usefulness": 5, "evidence_sufficiency": 6}', "Evidence sufficiency: 6 is outside 1-5"),
    ('{"readability": 0, "clarity": 3, "evidence_usefulness": 5, "evidence_sufficiency": 2}', "Readability: 0 is outside 1-5"),
    ("Readability: 8/10\nClarity: 4\nEvidence usefulness: 3\nEvidence sufficiency: 3", "Readability: rated on a 1-10 scale"),
    ('{"readability": 4.5, "clarity": 4, "evidence_usefulness": 3, "evidence_sufficiency": 3}', "Readability: 4.5 is not an integer"),
    ('{"readability": "high", "clarity": 4, "evidence_usefulness": 3, "evidence_sufficiency": 3}', "Readability: 'high' is not a number"),
])
def test_out_of_range_ratings_are_rejected_never_clipped(reply, error):
    p = AUDIT_LIKERT(reply)
    assert not p.ok and p.value is None and error in p.error


@pytest.mark.parametrize("reply, error", [
    # the prompt's format line echoed back, placeholders unfilled
    ('{"readability": <n>, "clarity": <n>, "evidence_usefulness": <n>, "evidence_sufficiency": <n>}', "no criterion rating"),
    ("The question is clear and the passages are relevant.", "no criterion rating"),
    ('{"readability": 4, "clarity": 4}', "no rating for Evidence usefulness, Evidence sufficiency"),
    ("Readability: 4\nClarity: 4\nReadability: 3\nEvidence usefulness: 3\nEvidence sufficiency: 3", "Readability rated 4 and 3"),
    ("", "empty reply"),
])
def test_unparseable_replies_are_rejected(reply, error):
    p = AUDIT_LIKERT(reply)
    assert not p.ok and error in p.error


# ----------------------------------------------------------------------------------------------- judging
CFG = AuditConfig(judge="g", max_documents=2, document_chars=200, query_chars=300, max_tokens=64)
TOPICS = pd.DataFrame({"qid": ["q1", "q2", "q3", "q4"], "query": ["what is a mean", "what is a median?", "why", "none"]})
CORPUS = {"d1": "the mean is the sum over the count " * 20, "d2": "the median is the middle value", "d3": "quartiles",
          "d4": "a box plot"}
POSITIVES = {"q1": ["d1", "d2", "d3"], "q2": ["d2"], "q3": ["d4"]}


def _reply(call):
    if "what is a mean" in call:
        return json.dumps(FOUR)
    if "what is a median" in call:
        return '{"readability": 5, "clarity": 5, "evidence_usefulness": 9, "evidence_sufficiency": 5}'  # out of range
    return GenerationFailure("timeout", "slow")


def test_rate_counts_failures_and_never_gives_a_default_score():
    todo = select_queries(TOPICS, POSITIVES, 0)
    assert list(todo["qid"]) == ["q1", "q2", "q3"]  # q4 has no positive document
    backend = ScriptedBackend(_reply)
    frame, counts = rate(todo, POSITIVES, CORPUS, LLMClient(backend), MMBRIGHT_PROMPTS.get("audit_v1"), AUDIT_LIKERT, CFG)
    assert counts == {"queries": 3, "rated": 1, "failed": 1, "rejected": 1, "documents_cut": 1}
    assert list(frame["status"]) == ["ok", "rejected", "failed"]
    assert frame.loc[0, list(CRITERIA)].tolist() == list(FOUR.values())
    assert frame.loc[1:, list(CRITERIA)].isna().all().all()  # no stand-in score
    assert "Evidence usefulness: 9 is outside 1-5" in frame.loc[1, "error"]
    first = backend.calls[0]
    assert "[Passage 1] d1" in first and "[Passage 2] d2" in first and "d3" not in first  # max_documents 2
    cut = " ".join(CORPUS["d1"].split())[:200].rstrip() + " ..."
    assert "(2 shown of 3)" in first and f"[Passage 1] d1\n{cut}\n" in first  # document_chars cut
    assert select_queries(TOPICS, POSITIVES, 2)["qid"].tolist() == ["q1", "q2"]


def test_the_cache_key_holds_every_part_of_the_input(tmp_path):
    """Each part that changes the judge's input or sampling misses the cache; the same call hits."""
    prompt = MMBRIGHT_PROMPTS.get("audit_v1")
    todo = TOPICS.head(1)
    pos = {"q1": ["d1", "d2"]}

    def calls(*, backend=None, topics=todo, corpus=CORPUS, positives=pos, tpl=prompt, cfg=CFG) -> int:
        b = backend or ScriptedBackend(json.dumps(FOUR))
        before = len(b.calls)
        with GenerationCache(tmp_path / "g.sqlite") as cache:
            rate(topics, positives, corpus, LLMClient(b, cache), tpl, AUDIT_LIKERT, cfg)
        return len(b.calls) - before

    assert calls() == 1 and calls() == 0  # the same input: a hit
    changed = {
        "query": dict(topics=todo.assign(query=["what is a mean value"])),
        "document text": dict(corpus={**CORPUS, "d2": "the median splits the data"}),
        "positives": dict(positives={"q1": ["d1", "d3"]}),
        "max_documents": dict(cfg=CFG.model_copy(update={"max_documents": 1})),
        "document_chars": dict(cfg=CFG.model_copy(update={"document_chars": 150})),
        "query_chars": dict(cfg=CFG.model_copy(update={"query_chars": 5})),
        "temperature": dict(cfg=CFG.model_copy(update={"temperature": 0.5})),
        "max_tokens": dict(cfg=CFG.model_copy(update={"max_tokens": 65})),
        "seed": dict(cfg=CFG.model_copy(update={"seed": 1})),
        "prompt text": dict(tpl=PromptTemplate("audit_v1", prompt.text + "\n")),
        "prompt id": dict(tpl=PromptTemplate("audit_v2", prompt.text)),
        "model": dict(backend=ScriptedBackend(json.dumps(FOUR), model="other")),
        "model revision": dict(backend=ScriptedBackend(json.dumps(FOUR), revision="r2")),
    }
    for part, kw in changed.items():
        assert calls(**kw) == 1, f"changing the {part} did not miss the cache"
        assert calls(**kw) == 0, f"the {part} change was not cached"


def test_a_rejected_reply_is_retried_on_the_next_run(tmp_path):
    bad = '{"readability": 7, "clarity": 5, "evidence_usefulness": 5, "evidence_sufficiency": 5}'
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        b1 = ScriptedBackend(bad)
        f1, c1 = rate(TOPICS.head(1), POSITIVES, CORPUS, LLMClient(b1, cache), MMBRIGHT_PROMPTS.get("audit_v1"), AUDIT_LIKERT, CFG)
        b2 = ScriptedBackend(json.dumps(FOUR))
        f2, c2 = rate(TOPICS.head(1), POSITIVES, CORPUS, LLMClient(b2, cache), MMBRIGHT_PROMPTS.get("audit_v1"), AUDIT_LIKERT, CFG)
    assert c1["rejected"] == 1 and len(b1.calls) == 1
    assert c2["rated"] == 1 and len(b2.calls) == 1 and f2.loc[0, "readability"] == 4


# ------------------------------------------------------------------------------------------- aggregation
def _frame(rng, n, failed=0, rejected=0) -> pd.DataFrame:
    rows = [{"qid": f"q{i}", "status": "ok", "positives": 2, "shown": 2, "error": "",
             **{c: int(rng.integers(1, 6)) for c in CRITERIA}} for i in range(n)]
    rows += [{"qid": f"f{i}", "status": "failed", "positives": 1, "shown": 1, "error": "x", **dict.fromkeys(CRITERIA)}
             for i in range(failed)]
    rows += [{"qid": f"r{i}", "status": "rejected", "positives": 1, "shown": 1, "error": "y", **dict.fromkeys(CRITERIA)}
             for i in range(rejected)]
    return pd.DataFrame(rows).astype({c: "Int64" for c in CRITERIA})


def test_aggregate_matches_scipy_t_intervals():
    rng = np.random.default_rng(7)
    frames = {("x", "a"): _frame(rng, 12, failed=1, rejected=2), ("x", "b"): _frame(rng, 5), ("y", "c"): _frame(rng, 1)}
    out = aggregate(frames, 0.95).set_index(["dataset", "domain", "criterion"])
    for (ds, dom), f in [*list(frames.items())[:2], (("x", ALL), pd.concat([frames["x", "a"], frames["x", "b"]]))]:
        ok = f[f["status"] == "ok"]
        for c in CRITERIA:
            x = ok[c].to_numpy(dtype=float)
            r = out.loc[(ds, dom, c)]
            assert r["n"] == len(x) and r["mean"] == pytest.approx(x.mean())
            lo, hi = sps.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
            assert (r["ci_low"], r["ci_high"]) == pytest.approx((lo, hi))
            assert r["failed"] == (f["status"] == "failed").sum() and r["rejected"] == (f["status"] == "rejected").sum()
    one = out.loc[("y", "c", "clarity")]  # n = 1: a mean, no interval
    assert one["n"] == 1 and not math.isnan(one["mean"]) and math.isnan(one["ci_low"])
    assert (out.loc[("x", ALL, "readability")]["queries"], out.loc[("y", ALL, "readability")]["n"]) == (20, 1)


# ---------------------------------------------------------------------------------------- workflow steps
def _prepared(tmp_path) -> Path:
    prep = tmp_path / "prep"
    prep.mkdir()
    TOPICS.to_parquet(prep / "topics.parquet", index=False)
    pd.DataFrame(list(CORPUS.items()), columns=["id", "text"]).to_parquet(prep / "corpus.parquet", index=False)
    (prep / "qrels.task1.txt").write_text("".join(f"{q} 0 {d} 1\n" for q, ds in POSITIVES.items() for d in ds) + "q4 0 d3 0\n")
    return prep


def test_rate_and_report_steps_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    prep = _prepared(tmp_path)
    out = {k: tmp_path / "a" / f for k, f in (("ratings", "ratings.tsv"), ("calls", "calls.jsonl"), ("stats", "stats.json"))}
    cfg = CFG.model_dump()
    stats = rate_step(PreparedUnit("x", "d", prep), cfg, *out.values(), generator=ScriptedBackend(_reply),
                      generation_cache=tmp_path / "g.sqlite")
    assert (stats["topics"], stats["topics_with_positives"], stats["queries"]) == (4, 3, 3)
    assert (stats["rated"], stats["failed"], stats["rejected"], stats["llm_calls"], stats["llm_failures"]) == (1, 1, 1, 3, 2)
    assert stats["means"]["readability"] == 4.0 and stats["parser"] == "audit_likert" and "audit_v1" in stats["prompt"]
    ratings = read_ratings(out["ratings"])
    assert ratings["qid"].tolist() == ["q1", "q2", "q3"] and ratings["readability"].tolist()[0] == 4
    assert ratings["readability"].isna().tolist() == [False, True, True]
    calls = [json.loads(x) for x in out["calls"].read_text().splitlines()]
    assert [c["status"] for c in calls] == ["ok", "rejected", "failed"] and calls[1]["text"]
    config = {"audit": {**cfg, "datasets": None}, "generator": {"backend": "scripted"}, "confidence": 0.95,
              "units": [{"dataset": "x", "domain": "d"}], "mlflow": {"tracking_uri": None, "experiment": "t"}}
    md, csv = tmp_path / "t/audit.md", tmp_path / "t/audit.csv"
    ids = report_step(config, [out["ratings"]], [out["stats"]], md, csv, tmp_path / "t/tracking.json")
    text = md.read_text()
    assert "| d | 1 | 1 | 1 | 4.00 | 3.00 | 5.00 | 2.00 |" in text  # n = 1: no interval
    assert "| MM-BRIGHT paper (GPT-4o, 29 domains, all queries) | | | | 4.47 | 4.18 | 3.80 | 4.10 |" in text
    assert "Student-t interval" in text and "never given a default score" in text
    table = pd.read_csv(csv)
    assert set(table["domain"]) == {"d", ALL} and set(table["judge"]) == {"scripted"}
    assert table[table["measure"] == "Clarity"]["mean"].tolist() == [3.0, 3.0]
    db = sqlite3.connect(tmp_path / "m.db")
    assert {"audit", "audit/x/d", "audit/x/All"} <= {r[0] for r in db.execute("SELECT name FROM runs")}
    assert len(ids["children"]) == 2 and "readability_mean" in {r[0] for r in db.execute("SELECT key FROM metrics")}


def test_a_positive_missing_from_the_corpus_names_the_file(tmp_path):
    prep = _prepared(tmp_path)
    (prep / "qrels.task1.txt").write_text("q1 0 nope 1\n")
    with pytest.raises(DataError, match="qrels.task1.txt.*'nope' is not in corpus.parquet"):
        rate_step(PreparedUnit("x", "d", prep), CFG.model_dump(), tmp_path / "r.tsv", tmp_path / "c.jsonl", tmp_path / "s.json",
                  generator=ScriptedBackend("x"), generation_cache=tmp_path / "g.sqlite")


# ------------------------------------------------------------------------------------------ reproduction
def test_the_paper_averages_are_the_expected_entries():
    entries = [e for e in load_expected([PIPELINE / "expected/mm-bright-paper.yaml"]) if e.task == "audit"]
    assert {e.measure: e.value for e in entries} == {CRITERIA[c]: v for c, v in PAPER_AVERAGES.items()}
    assert {(e.system, e.variant, e.domain, len(e.domains)) for e in entries} == {("gpt-4o", "all queries", "Avg.", 29)}


def _audit_csv(path: Path, dataset: str, judge: str, variant: str, domains: list[str], value: float) -> Path:
    rows = [{"dataset": dataset, "domain": d, "judge": judge, "variant": variant, "measure": m, "mean": value}
            for d in [*domains, ALL] for m in CRITERIA.values()]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_reproduction_compares_only_when_judge_and_data_match(tmp_path):
    from mmir.data.domains import MM_BRIGHT_DOMAINS

    entries = [e for e in load_expected([PIPELINE / "expected/mm-bright-paper.yaml"]) if e.task == "audit"]
    hub = {"mmb": "mm-bright/MM-BRIGHT"}

    def rows(judge, variant, domains, datasets=hub):
        obs = observations_from_audit_csv(_audit_csv(tmp_path / "a.csv", next(iter(datasets)), judge, variant, domains, 4.2))
        return check(entries, obs, {}, datasets, {"audit"}, {})

    ok = rows("gpt-4o-2024-08-06", "all queries", list(MM_BRIGHT_DOMAINS))
    # 4.2 vs 4.47, 4.18, 3.80, 4.10 with tolerance 0.15: |-0.27| <= 2 x 0.15, 0.02, 0.40 > 0.30, 0.10
    assert ok["status"].tolist() == ["OKish", "OK", "FAIL", "OK"]
    assert ok["diff"].tolist() == pytest.approx([4.2 - 4.47, 4.2 - 4.18, 4.2 - 3.80, 4.2 - 4.10])
    assert set(rows("qwen2.5-coder-0.5b", "all queries", list(MM_BRIGHT_DOMAINS))["note"]) == {
        "judge qwen2.5-coder-0.5b is not gpt-4o"}
    assert set(rows("gpt-4o", "first 3 queries per domain", list(MM_BRIGHT_DOMAINS))["note"]) == {
        "the audit rated the first 3 queries per domain; the expected value is for all queries"}
    assert set(rows("gpt-4o", "all queries", ["biology"])["note"]) == {"Avg. over 1 domain (1 of the expected 29)"}
    assert set(rows("gpt-4o", "all queries", ["statistics"], {"openstax": None})["note"]) == {"dataset mm-bright not in this run"}


# ---------------------------------------------------------------------------------------------- config
def _config(tmp_path, **audit) -> dict:
    root = tmp_path / "raw"
    from conftest import write_domain

    write_domain(root)
    cfg = {"datasets": {"x": {"source": "local", "root": str(root)}}, "tasks": ["task1"], "systems": {"bm25": {"kind": "bm25"}},
           "generators": {"g": {"backend": "llama_cpp"}}, "audit": {"judge": "g", "max_queries": 2, **audit}}
    return validate_config(cfg)


def test_config_units_params_and_switches(tmp_path):
    cfg = _config(tmp_path)
    assert U.audit_units(cfg) == [{"dataset": "x", "domain": "d"}]
    assert family_targets(cfg, "audit") == ["results/tables/audit.md", "results/tables/audit.csv", "results/tracking/audit.json"]
    w = {"dataset": "x", "domain": "d"}
    job = R.RULES["audit"].job(cfg, w)
    assert set(job.input) == {"topics", "corpus", "qrels"} and job.params["generator"] == {"backend": "llama_cpp"}
    assert job.params["audit"]["max_queries"] == 2 and "datasets" not in job.params["audit"]
    rep = R.RULES["audit_report"].job(cfg, {})
    assert rep.input["ratings"] == ["results/audit/x/d/ratings.tsv"]
    # the confidence level changes the table, not the ratings; a sampling setting changes the ratings
    wider = copy.deepcopy(cfg)
    wider["significance"]["confidence"] = 0.9
    assert R.RULES["audit"].slice(wider, w) == job.params and R.RULES["audit_report"].params(wider, {}) != rep.params
    hot = copy.deepcopy(cfg)
    hot["audit"]["temperature"] = 0.7
    assert R.RULES["audit"].slice(hot, w) != job.params
    assert "results/tables/audit.csv" in R.RULES["reproduction"].job(cfg, {}).input["audit"]
    off = copy.deepcopy(cfg)
    off["audit"]["enabled"] = False
    assert family_targets(off, "audit") == [] and U.audit_units(off) == []
    null = copy.deepcopy(cfg)
    null["audit"] = None
    assert family_targets(validate_config(null), "audit") == []


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="audit.judge.*'nope' is not a key of generators"):
        _config(tmp_path, judge="nope")
    with pytest.raises(ConfigError, match="audit.prompt"):
        _config(tmp_path, prompt="audit_v9")
    with pytest.raises(ConfigError, match="audit.parser"):
        _config(tmp_path, parser="last_integer")
    with pytest.raises(ConfigError, match=r"audit.datasets.0"):
        _config(tmp_path, datasets=["nope"])


def test_the_report_lineage_names_the_audit_prompt(tmp_path):
    from mmir.config.models import parse_slice
    from mmir.reporting.lineage import used_prompts

    cfg = _config(tmp_path)
    assert used_prompts(parse_slice({"audit": cfg["audit"]})) == {"mmbright": ["audit_v1"]}
    assert used_prompts(parse_slice({"audit": {**cfg["audit"], "enabled": False}})) == {}
