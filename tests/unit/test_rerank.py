"""The rerank stage: reordering a first-stage run at a depth with strict scores, RankGPT sliding windows against a
reference implementation, unparseable permutations, pointwise scores, cache keys, the step, the config."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pandas as pd
import pytest

from mmir.config.models import ListwiseReranker, PointwiseReranker, VLMReranker
from mmir.core.errors import ConfigError, DataError
from mmir.llm.cache import GenerationCache, generation_key_fields
from mmir.llm.client import LLMClient
from mmir.retrieval.rerank import RERANK_PROMPTS
from mmir.retrieval.rerank.candidates import Candidate, RerankQuery
from mmir.retrieval.rerank.listwise import parse_permutation, parse_score, sliding_windows, windows
from mmir.retrieval.rerank.llm import LLMReranker
from mmir.retrieval.rerank.order import apply_order, check_run, order_by_scores
from mmir.retrieval.rerank.stage import rerank_run
from mmir.retrieval.runs import read_run, write_run
from tests.scripted import ScriptedBackend


def _run(n_queries=3, n_items=30, seed=0):
    rng = random.Random(seed)
    run = {}
    for q in range(n_queries):
        items = [f"d{q}_{i}" for i in range(n_items)]
        run[f"q{q}"] = [(d, float(n_items - i) + rng.random() * 0.1) for i, d in enumerate(items)]
    return run


# ------------------------------------------------------------------------------------------ order at depth
def test_rerank_with_a_deterministic_scorer_matches_an_independent_sort():
    run = _run()
    relevance = {d: (hash(d) % 97) / 7.0 for r in run.values() for d, _ in r}  # a fixed score per item
    depth = 12

    def by_score(qid, ids):
        return order_by_scores([relevance[i] for i in ids])

    out = rerank_run(run, depth, by_score)
    for qid, ranking in run.items():
        head_ids = [d for d, _ in ranking[:depth]]
        # independent: a stable sort on (-score, first-stage rank)
        expected = [d for _, _, d in sorted((-relevance[d], r, d) for r, d in enumerate(head_ids))]
        expected += [d for d, _ in ranking[depth:]]
        assert [d for d, _ in out[qid]] == expected
        scores = [s for _, s in out[qid]]
        assert all(a > b for a, b in zip(scores, scores[1:]))  # strict: no ties
        assert scores == [float(len(ranking) - r) for r in range(len(ranking))]
    assert run == _run()  # the input run is not modified


def test_depth_boundary_only_the_head_moves(tmp_path):
    run = {"q": [(f"d{i}", 10.0 - i) for i in range(10)]}
    reverse = lambda qid, ids: list(range(len(ids)))[::-1]  # noqa: E731
    out = rerank_run(run, 4, reverse)
    assert [d for d, _ in out["q"]] == ["d3", "d2", "d1", "d0", "d4", "d5", "d6", "d7", "d8", "d9"]
    # depth equal to the ranking: everything reversed; a shorter ranking than depth: all of it reranked
    assert [d for d, _ in rerank_run(run, 10, reverse)["q"]] == [f"d{i}" for i in range(9, -1, -1)]
    short = {"q": run["q"][:3]}
    assert [d for d, _ in rerank_run(short, 10, reverse)["q"]] == ["d2", "d1", "d0"]
    # the written file keeps the order and the strict scores through the TREC round trip
    f = tmp_path / "r.trec"
    write_run(f, out, "t")
    assert read_run(f) == out


def test_ties_and_unscored_keep_first_stage_order():
    assert order_by_scores([1.0, 2.0, 1.0, float("nan"), 2.0, float("nan")]) == [1, 4, 0, 2, 3, 5]
    with pytest.raises(ValueError, match="not a permutation"):
        apply_order([("a", 1.0), ("b", 0.5)], [0, 0])


def test_check_run_errors_name_the_file_and_the_item():
    run = {"q1": [("a", 2.0), ("b", 1.0)]}
    with pytest.raises(DataError, match=r"rerank depth 5 is larger than the run's longest ranking \(2 items\)") as e:
        check_run(run, ["q1"], 5, "runs/x.trec")
    assert "runs/x.trec" in str(e.value)
    with pytest.raises(DataError, match="not queries of this task, e.g. 'q9'"):
        check_run({**run, "q9": [("a", 1.0)]}, ["q1"], 1, "runs/x.trec")
    with pytest.raises(DataError, match="query 'q1' ranks 'b'"):
        check_run(run, ["q1"], 1, "runs/x.trec", items_known={"a"})
    assert check_run(run, ["q1", "q2"], 2, "runs/x.trec", items_known={"a", "b"}) == 2


# ------------------------------------------------------------------------------------------ sliding windows
def rankgpt_reference(order, relevance, window, step, passes):
    """RankGPT's sliding_windows (rank_gpt.py), written out: end from the depth down by step, start clamped at 0,
    until a window started at 0; each window sorted by the oracle (a stable sort, as a perfect model would)."""
    item = list(order)
    for _ in range(passes):
        end_pos = len(item)
        start_pos = end_pos - window
        while True:
            start_pos = max(start_pos, 0)
            part = item[start_pos:end_pos]
            item[start_pos:end_pos] = sorted(part, key=lambda x: -relevance[x])
            if start_pos == 0:
                break
            end_pos -= step
            start_pos -= step
    return item


@pytest.mark.parametrize("depth,window,step,passes", [(20, 10, 5, 1), (25, 20, 10, 1), (7, 20, 10, 1), (30, 4, 2, 2),
                                                      (100, 20, 10, 1), (13, 5, 5, 3)])
def test_sliding_windows_equal_the_reference(depth, window, step, passes):
    rng = np.random.default_rng(depth * 31 + window)
    relevance = {i: float(v) for i, v in enumerate(rng.permutation(depth))}
    calls = []

    def oracle(part):
        calls.append(list(part))
        return sorted(range(len(part)), key=lambda j: -relevance[part[j]])

    got, kept = sliding_windows(range(depth), oracle, window=window, step=step, passes=passes)
    assert got == rankgpt_reference(range(depth), relevance, window, step, passes)
    assert kept == 0
    assert len(calls) == passes * len(windows(depth, window, step))
    assert windows(depth, window, step)[-1][0] == 0  # the last window reaches the top
    if depth >= window:  # one pass carries the most relevant candidate to the top
        assert got[0] == max(relevance, key=relevance.get)


def test_windows_cover_the_depth():
    assert windows(25, 20, 10) == [(5, 25), (0, 15)]
    assert windows(20, 10, 5) == [(10, 20), (5, 15), (0, 10)]
    assert windows(3, 10, 5) == [(0, 3)]
    with pytest.raises(ValueError):
        windows(10, 5, 6)


def test_permutation_parser():
    assert parse_permutation("[2] > [3] > [1]", 3).value == [1, 2, 0]
    p = parse_permutation("Ranking: [3] > [3] > [9] > [1]", 4)  # repeat and out-of-range dropped, missing appended
    assert (p.ok, p.value, p.method) == (True, [2, 0, 1, 3], "partial")
    assert parse_permutation("2, 1", 2).value == [1, 0]  # bare numbers when no bracket
    assert not parse_permutation("I cannot rank these passages.", 3).ok
    assert not parse_permutation("[7] > [8]", 3).ok


def test_score_parser():
    assert parse_score("Score: 3").value == 3
    assert parse_score("reasoning... **Score**: 2\nScore: 4").value == 4  # the last marker
    assert parse_score(" 1 ").value == 1
    assert not parse_score("Score: 7").ok  # outside the rubric: rejected, never clipped
    assert not parse_score("quite relevant").ok


# ----------------------------------------------------------------------------------- LLM rerankers (scripted)
QUERY = RerankQuery("q1", "why is the mean pulled by outliers")
CANDS = [Candidate(f"d{i}", f"passage number {i} about statistics") for i in range(6)]


def test_listwise_unparseable_window_keeps_its_order_and_is_counted():
    cfg = ListwiseReranker(kind="llm-listwise", generator="g", window=4, step=2)
    # windows over 6: [2,6), [0,4); the first reply is junk, the second reverses its window
    be = ScriptedBackend(["no idea, sorry", "[4] > [3] > [2] > [1]"])
    rr = LLMReranker(LLMClient(be), cfg, RERANK_PROMPTS.get("rerank_listwise_v1"))
    order = rr.rerank(QUERY, CANDS)
    assert order == [3, 2, 1, 0, 4, 5]
    assert rr.counts["windows"] == 2 and rr.counts["windows_kept"] == 1
    summary = rr.client.audit.summary()
    assert summary == {"llm_calls": 2, "llm_failures": 1}
    # the window's candidates are in the prompt in window order, numbered from 1
    assert "[1] passage number 2" in be.calls[0] and "[4] passage number 5" in be.calls[0]


def test_pointwise_scores_sort_and_failures_go_below():
    cfg = PointwiseReranker(kind="llm-pointwise", generator="g")
    replies = {"passage number 0": "Score: 1", "passage number 1": "Score: 4", "passage number 2": "no score",
               "passage number 3": "Score: 4", "passage number 4": "Score: 0", "passage number 5": "Score: 2"}
    be = ScriptedBackend(contains=replies)
    rr = LLMReranker(LLMClient(be), cfg, RERANK_PROMPTS.get("rerank_pointwise_v1"))
    assert rr.rerank(QUERY, CANDS) == [1, 3, 5, 0, 4, 2]
    assert rr.counts["unscored"] == 1
    assert rr.client.audit.summary() == {"llm_calls": 6, "llm_failures": 1}


def test_vlm_messages_carry_query_and_candidate_images():
    import io

    from PIL import Image

    def png(color):
        buf = io.BytesIO()
        Image.new("RGB", (40, 30), color).save(buf, format="PNG")
        return buf.getvalue()

    cfg = VLMReranker(kind="vlm", generator="g", mode="listwise", window=3, step=3, query_images=1)
    q = RerankQuery("q1", "what does the plot show", [png("red"), png("blue")])
    cands = [Candidate("a", "doc a", png("green")), Candidate("b", "doc b", None), Candidate("c", "doc c", png("white"))]
    be = ScriptedBackend("[3] > [1] > [2]")
    rr = LLMReranker(LLMClient(be), cfg, RERANK_PROMPTS.get("rerank_listwise_v1"), images=True)
    assert rr.rerank(q, cands) == [2, 0, 1]
    assert be.calls[0].n_images == 3  # one query image (capped at query_images=1) + the two candidate images
    assert rr.counts["query_images_cut"] == 1
    assert "Image of passage [1]:" in be.calls[0] and "Image of passage [3]:" in be.calls[0]


def test_cache_key_holds_candidates_order_prompt_model_and_sampling():
    cfg = ListwiseReranker(kind="llm-listwise", generator="g", window=3, step=3)
    tpl = RERANK_PROMPTS.get("rerank_listwise_v1")
    rr = LLMReranker(LLMClient(ScriptedBackend("x")), cfg, tpl)

    def key(cands=CANDS[:3], backend=ScriptedBackend("x"), text=tpl.text, **sampling):
        s = {"temperature": 0.0, "max_tokens": 512, "seed": 0} | sampling
        f = generation_key_fields(backend, rr.listwise_messages(QUERY, cands), tpl.id, text, **s)
        return json.dumps(f, sort_keys=True)

    base = key()
    assert key() == base
    variants = [key(cands=CANDS[:3][::-1]), key(cands=[*CANDS[:2], CANDS[4]]), key(text=tpl.text + " "),
                key(backend=ScriptedBackend("x", model="other")), key(temperature=0.5), key(max_tokens=64), key(seed=1)]
    assert all(v != base for v in variants)
    assert len(set(variants)) == len(variants)


def test_cached_calls_are_not_repeated_and_failures_are(tmp_path):
    cfg = PointwiseReranker(kind="llm-pointwise", generator="g")
    tpl = RERANK_PROMPTS.get("rerank_pointwise_v1")
    be = ScriptedBackend(contains={"passage number 0": "Score: 2", "passage number 1": "junk"})
    with GenerationCache(tmp_path / "g.sqlite") as cache:
        LLMReranker(LLMClient(be, cache), cfg, tpl).rerank(QUERY, CANDS[:2])
        LLMReranker(LLMClient(be, cache), cfg, tpl).rerank(QUERY, CANDS[:2])
    assert len(be.calls) == 3  # the rejected reply is called again, the good one comes from the cache


# ------------------------------------------------------------------------------------------------ the step
def _prepared(tmp_path):
    prep = tmp_path / "prep"
    prep.mkdir()
    docs = [(f"d{i}", f"document {i} text") for i in range(8)]
    pd.DataFrame(docs, columns=["doc_id", "text"]).to_parquet(prep / "corpus.parquet")
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["first query", "second query"]}).to_parquet(prep / "topics.parquet")
    run = {q: [(f"d{i}", 8.0 - i) for i in range(8)] for q in ("q1", "q2")}
    write_run(tmp_path / "first.trec", run, "bm25")
    return prep


class _LengthScorer:
    """A deterministic cross-encoder stand-in: the score is the digit of the document id (d7 best)."""

    device, pairs, truncated = "cpu", 0, 0

    def score(self, query, texts):
        self.pairs += len(texts)
        return np.array([float(t.split()[1]) for t in texts], dtype=np.float32)


def test_rerank_step_writes_run_and_stats(tmp_path):
    from mmir.workflow.rerank_steps import RerankJob, rerank

    prep = _prepared(tmp_path)
    job = RerankJob("task1", prep, "bm25+rr:ce", "ce", {"kind": "cross-encoder", "model": "x"}, 5, tmp_path / "first.trec",
                    tmp_path / "out.trec", tmp_path / "out.json", tmp_path / "out.calls.jsonl")
    stats = rerank(job, scorer=_LengthScorer())
    out = read_run(tmp_path / "out.trec")
    assert [d for d, _ in out["q1"]] == ["d4", "d3", "d2", "d1", "d0", "d5", "d6", "d7"]
    assert stats["pairs"] == 10 and stats["first_stage_depth"] == 8
    assert json.loads((tmp_path / "out.json").read_text())["run_lines"] == 16
    with pytest.raises(DataError, match="depth 9"):
        rerank(dataclasses.replace(job, depth=9), scorer=_LengthScorer())


def test_rerank_step_llm_counts_failures(tmp_path):
    from mmir.workflow.rerank_steps import RerankJob, rerank

    prep = _prepared(tmp_path)
    be = ScriptedBackend(contains={"document 1 text": "Score: 4", "document 2 text": "nonsense"}, default="Score: 1")
    job = RerankJob("task1", prep, "bm25+rr:pw", "pw", {"kind": "llm-pointwise", "generator": "g"}, 3, tmp_path / "first.trec",
                    tmp_path / "out.trec", tmp_path / "out.json", tmp_path / "out.calls.jsonl", generator={"backend": "x"},
                    generation_cache=tmp_path / "g.sqlite")
    stats = rerank(job, backend=be)
    assert [d for d, _ in read_run(tmp_path / "out.trec")["q2"]][:3] == ["d1", "d0", "d2"]
    assert (stats["llm_calls"], stats["llm_failures"], stats["unscored"], stats["windows_kept"]) == (6, 2, 2, 0)
    assert len((tmp_path / "out.calls.jsonl").read_text().splitlines()) == 6


# ----------------------------------------------------------------------------------------------- the config
def _config(**rerank):
    from mmir.workflow.validate import validate_config

    cfg = {"datasets": {"t": {"source": "local", "root": "tests", "domains": ["d"]}},
           "systems": {"bm25": {"kind": "bm25"}},
           "generators": {"g": {"backend": "llama_cpp"}},
           "rerankers": {"pw": {"kind": "llm-pointwise", "generator": "g"}, "ce": {"kind": "cross-encoder", "model": "m"}},
           "rerank": rerank}
    return cfg, validate_config


def test_config_checks_name_the_key():
    from mmir.config import validate_config as schema_check
    from mmir.config.models import parse_params
    from mmir.workflow.validate import check_rerank

    def check(runs, **extra):
        cfg, _ = _config(runs=runs)
        cfg |= extra
        schema_check(cfg)
        check_rerank(parse_params(cfg))

    check([{"system": "bm25", "reranker": "pw", "depth": 20}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.reranker.*'nope' is not a key of rerankers"):
        check([{"system": "bm25", "reranker": "nope"}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.system"):
        check([{"system": "dense", "reranker": "pw"}])
    with pytest.raises(ConfigError, match="made twice"):
        check([{"system": "bm25", "reranker": "pw", "depth": 10}, {"system": "bm25", "reranker": "pw", "depth": 20}])
    with pytest.raises(ConfigError, match=r"rerankers\.pw\.generator"):
        check([], rerankers={"pw": {"kind": "llm-pointwise", "generator": "missing"}})
    with pytest.raises(ConfigError, match="step"):
        check([], rerankers={"lw": {"kind": "llm-listwise", "generator": "g", "window": 4, "step": 5}})
    with pytest.raises(ConfigError, match="kind"):
        check([], rerankers={"x": {"kind": "colbert", "model": "m"}})
    check([{"system": "bm25", "reranker": "pw", "depth": 1000}])  # evaluation.top_k's default
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.depth.*1001 is larger than evaluation\.top_k \(1000\)"):
        check([{"system": "bm25", "reranker": "pw", "depth": 1001}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.depth.*30 is larger than evaluation\.top_k \(20\)"):
        check([{"system": "bm25", "reranker": "pw", "depth": 30}], evaluation={"top_k": 20})
    # a first stage that runs on none of the run's tasks: an error, not a run that silently makes nothing
    mm = {"bm25": {"kind": "bm25"}, "clip": {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True}}
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0'.*clip runs on none of this run's tasks \(task1\)"):
        check([{"system": "clip", "reranker": "pw", "depth": 5, "tasks": ["task1"]}], systems=mm)
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0'.*bm25 runs on none.*\(task2\)"):
        check([{"system": "bm25", "reranker": "pw", "depth": 5, "tasks": ["task2"]}], tasks=["task1", "task2"])  # t: no images


def test_reranked_systems_join_their_first_stage_units():
    from mmir.config import validate_config as schema_check
    from mmir.workflow import units as U

    cfg, _ = _config(runs=[{"system": "bm25", "reranker": "ce", "depth": 50, "tasks": ["task1"]}])
    schema_check(cfg)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(U, "dataset_domains", lambda name, ds: ["d"])
        units = U.task_units(cfg, "task1")
    assert [u["system"] for u in units] == ["bm25", "bm25+rr:ce"]
    assert U.rerank_systems(cfg)["bm25+rr:ce"] == {"base": "bm25", "reranker": "ce", "depth": 50, "tasks": ["task1"],
                                                  "datasets": None}


# ------------------------------------------------------------------------------------------------ the table
def _write_metrics(tmp_path, system, values, domain="d"):
    base = tmp_path / system.replace(":", "_").replace("+", "_")
    (base).mkdir(parents=True, exist_ok=True)
    mf, pf = base / f"{domain}.json", base / f"{domain}.perquery.tsv"
    mf.write_text(json.dumps({"dataset": "ds", "domain": domain, "system": system, "queries": len(values),
                              "measures": {"nDCG@10": float(np.mean(values))}}))
    pf.write_text("qid\tmeasure\tvalue\n" + "".join(f"q{i}\tnDCG@10\t{v}\n" for i, v in enumerate(values)))
    return str(mf), str(pf)


def test_table_tests_each_reranked_row_against_its_own_first_stage(tmp_path):
    """The test against the first stage equals an exact sign-flip test computed here (8 queries: all 256 patterns)."""
    import itertools

    from mmir.workflow.steps import TableFiles, report

    bm25 = [0.1, 0.2, 0.0, 0.5, 0.3, 0.1, 0.0, 0.4]
    dense = [0.3, 0.1, 0.2, 0.2, 0.6, 0.0, 0.1, 0.2]
    rr = [0.4, 0.5, 0.1, 0.6, 0.5, 0.3, 0.0, 0.7]  # better than bm25 on 6 queries, tied on 1, worse on none
    files = [_write_metrics(tmp_path, s, v) for s, v in (("bm25", bm25), ("dense", dense), ("bm25+rr:ce", rr))]
    stats = tmp_path / "rr.stats.json"
    stats.write_text(json.dumps({"llm_calls": 10, "llm_failures": 2}))
    out = TableFiles(tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "t.metrics.json", tmp_path / "t.significance.json")
    report("task1", [m for m, _ in files], "nDCG@10", "official", out, perquery_files=[p for _, p in files],
           significance={"baseline": "dense"}, reranked={"bm25+rr:ce": "bm25"}, rerank_stats={"bm25+rr:ce": [str(stats)]})
    d = np.array(rr) - np.array(bm25)
    flips = [abs(np.mean(d * np.array(s))) for s in itertools.product([1, -1], repeat=len(d))]
    p_exact = np.mean([f >= abs(d.mean()) - 1e-12 for f in flips])
    sig = json.loads((tmp_path / "t.significance.json").read_text())
    label = "bm25+rr:ce ‡"
    cell = sig["rerank"]["ds"][label]["cells"]["Avg."]
    assert sig["rerank"]["ds"][label]["first_stage"] == "bm25"
    assert cell["diff"] == pytest.approx(d.mean() * 100, abs=1e-3)
    assert cell["p"] == pytest.approx(p_exact, abs=1e-9)
    assert sig["datasets"]["ds"]["baseline"] == "dense"  # the table's own baseline is untouched
    md = (tmp_path / "t.md").read_text()
    assert "## ds: reranked vs first stage" in md and f"| {label} | bm25 | +{d.mean() * 100:.1f} |" in md
    assert "‡ = reranker calls failed" in md and "bm25+rr:ce ‡: 2 of 10" in md


def test_mlflow_child_of_a_reranked_system_names_first_stage_reranker_and_counts(tmp_path, monkeypatch):
    import mlflow

    from mmir.config import validate_config as schema_check
    from mmir.core import paths
    from mmir.core.io import write_json, write_text
    from mmir.workflow.rules.common import tracked_reranked, tracked_slice
    from mmir.workflow.steps import track

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    cfg, _ = _config(runs=[{"system": "bm25", "reranker": "pw", "depth": 20}])
    schema_check(cfg)
    units = [{"dataset": "t", "domain": "d", "system": s} for s in ("bm25", "bm25+rr:pw")]
    write_json(paths.prepared("t", "d", "prepare.json"), {"documents": 3})
    for u, calls in zip(units, (None, {"llm_calls": 40, "llm_failures": 3})):
        f = dict(task="task1", **u)
        write_json(paths.METRICS.format(**f), {**u, "task": "task1", "queries": 2, "queries_without_results": 0,
                                                  "run_queries_without_qrels": 0, "measures": {"nDCG@10": 0.5}})
        write_text(paths.PERQUERY.format(**f), "qid\tmeasure\tvalue\nq1\tnDCG@10\t0.5\n")
        write_text(paths.RUN.format(**f), "q1 Q0 a 1 2.0 x\n")
        write_json(paths.RUN_STATS.format(**f), {"seconds": 1.0, **(calls or {})})
    ids = track(tracked_slice(cfg, units), "task1", units, tmp_path / "track.json", reranked=tracked_reranked(cfg, units))
    client = mlflow.tracking.MlflowClient()
    kid = next(r for r in (client.get_run(i) for i in ids["children"]) if json.loads(r.data.tags["wildcards"])["system"] != "bm25")
    assert kid.data.params["rerank.first_stage"] == "bm25" and kid.data.params["rerank.depth"] == "20"
    assert kid.data.params["rerank.reranker.kind"] == "llm-pointwise" and kid.data.params["generator.backend"] == "llama_cpp"
    assert (kid.data.metrics["llm_calls"], kid.data.metrics["llm_failures"]) == (40, 3)
