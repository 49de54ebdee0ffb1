"""The example plug-in package (examples/mmir-lsa) installed by the test and run through Snakemake on Tasks 1-2 of the
first run's sample (params.yaml's openstax statistics sample, plus the package's overlay): its nDCG@10 equals a direct
computation with scikit-learn, numpy and pytrec_eval outside mmir, BM25 reranked by its LSA reranker equals a direct
reordering, and a new version of the package re-encodes (every vector a cache miss) and reruns the reranker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN, env

pytestmark = pytest.mark.integration

EXAMPLE = PROJECT / "examples" / "mmir-lsa"
TARGETS = ["results/metrics/task1/openstax/lsa/statistics.json", "results/metrics/task2/openstax/lsa/statistics.json",
           "results/metrics/task1/openstax/bm25+rr:lsa/statistics.json"]
PREP = Path("data/prepared/openstax/statistics")


def install_example(tmp: Path, version: str | None = None) -> Path:
    """``pip install --target`` of a copy of the example package (``version``: its pyproject's version replaced), built
    offline with the venv's setuptools; returns the folder to put on PYTHONPATH. The shared venv is not touched."""
    src = tmp / f"src-{version or 'as-shipped'}"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    if version:
        pyproject = src / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', f'version = "{version}"'))
    target = tmp / f"site-{version or 'as-shipped'}"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
                           "--target", str(target), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return target


def snakemake(wd: Path, site: Path, targets: list[str]) -> subprocess.CompletedProcess:
    """``targets`` with the example's overlay (targets first: ``--configfile`` takes every word after it) and the
    plug-in on PYTHONPATH."""
    e = env()
    e["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [e.get("PYTHONPATH")])])
    return subprocess.run([str(BIN / "snakemake"), "-s", str(PROJECT / "Snakefile"), "--directory", str(wd), "--cores", "2",
                           *targets, "--configfile", str(EXAMPLE / "lsa.yaml"), str(wd / "float32.yaml")],
                          capture_output=True, text=True, env=e, timeout=1500)


def lsa_space(corpus: list[str], options: dict):
    """The example's LSA computed here with scikit-learn: fitted on the corpus texts, unit rows of float32."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(sublinear_tf=options["sublinear_tf"], stop_words=options["stop_words"])
    x = tfidf.fit_transform(corpus)
    svd = TruncatedSVD(n_components=min(options["n_components"], x.shape[0] - 1, x.shape[1] - 1),
                       random_state=options["seed"]).fit(x)

    def vectors(texts: list[str]) -> np.ndarray:
        v = svd.transform(tfidf.transform(texts)).astype(np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    return vectors


def direct_ndcg10(wd: Path, data_root: Path, task: str, options: dict) -> float:
    """nDCG@10 of LSA cosine rankings of the sampled corpus, by pytrec_eval, with the raw data's gold_ids as qrels and
    its negative_ids removed from each ranking (the official protocol); Task 2 queries are their text followed by their
    images' OCR text, as every text system reads them (MM-BRIGHT section 4.1)."""
    import pytrec_eval

    raw = pd.read_parquet(data_root / "examples" / "statistics.parquet").set_index("id")
    corpus = pd.read_parquet(wd / PREP / "corpus.parquet")
    ids = corpus["doc_id"].tolist()
    vectors = lsa_space(corpus["text"].tolist(), options)
    topics = pd.read_parquet(wd / PREP / ("topics.parquet" if task == "task1" else "topics_mm.parquet"))
    texts = topics["query"].tolist()
    if task == "task2":
        ocr = pd.read_parquet(wd / "results/captions/openstax/statistics/ocr.parquet")
        cap = dict(zip(ocr["path"], ocr["text"].fillna("")))
        texts = ["\n\n".join([q, *(cap[p] for p in paths if cap.get(p))]) for q, paths in zip(texts, topics["image_paths"])]
    scores = vectors(texts) @ vectors(corpus["text"].tolist()).T
    run, qrels = {}, {}
    for qid, s in zip(topics["qid"], scores):
        negative = set(raw.at[qid, "negative_ids"])
        run[qid] = {ids[j]: float(s[j]) for j in np.argsort(-s, kind="stable") if ids[j] not in negative}
        qrels[qid] = {d: 1 for d in raw.at[qid, "gold_ids"]}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run)
    return float(np.mean([m["ndcg_cut_10"] for m in per_query.values()]))


def direct_rerank(wd: Path, options: dict, depth: int) -> dict[str, list[str]]:
    """BM25's Task 1 rankings with their top ``depth`` reordered by LSA cosine (ties in BM25 order)."""
    corpus = pd.read_parquet(wd / PREP / "corpus.parquet")
    text = dict(zip(corpus["doc_id"], corpus["text"]))
    vectors = lsa_space(corpus["text"].tolist(), options)
    queries = dict(pd.read_parquet(wd / PREP / "topics.parquet")[["qid", "query"]].itertuples(index=False))
    first: dict[str, list[str]] = {}
    for line in (wd / "results/runs/task1/openstax/bm25/statistics.trec").read_text().splitlines():
        q, _, d, *_ = line.split()
        first.setdefault(q, []).append(d)
    out = {}
    for qid, ranking in first.items():
        head = ranking[:depth]
        v = vectors([queries[qid], *(text[d] for d in head)])
        s = v[1:] @ v[0]
        out[qid] = [head[j] for j in np.lexsort((np.arange(len(head)), -s))] + ranking[depth:]
    return out


def _run_order(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        q, _, d, *_ = line.split()
        out.setdefault(q, []).append(d)
    return out


def test_the_example_plugin_through_snakemake_equals_a_direct_computation_and_a_new_version_reencodes(tmp_path):
    pytest.importorskip("sklearn", reason="scikit-learn (the example plug-in's dependency) is not installed")
    data_root = shared("openstax")
    params = yaml.safe_load((PROJECT / "params.yaml").read_text())
    assert params["datasets"]["openstax"]["sample"], "the first run's sample"
    params["datasets"] = {"openstax": {**params["datasets"]["openstax"], "root": str(data_root)}}
    overlay = yaml.safe_load((EXAMPLE / "lsa.yaml").read_text())
    options, depth = overlay["systems"]["lsa"]["options"], overlay["rerank"]["runs"][0]["depth"]
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    # vectors stored as float32, named although it is the default: the direct computation compares exact scores
    (wd / "float32.yaml").write_text(yaml.safe_dump({"encoding": {"dtype": "float32"}}))

    proc = snakemake(wd, install_example(tmp_path), TARGETS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for task in ("task1", "task2"):
        got = json.loads((wd / f"results/metrics/{task}/openstax/lsa/statistics.json").read_text())
        expect = direct_ndcg10(wd, data_root, task, options)
        print(f"{task} lsa nDCG@10: mmir {got['measures']['nDCG@10']:.6f}, direct {expect:.6f} ({got['queries']} queries)")
        assert got["queries"] == 6 and got["measures"]["nDCG@10"] == pytest.approx(expect, abs=1e-9)
    assert _run_order(wd / "results/runs/task1/openstax/bm25+rr:lsa/statistics.trec") == direct_rerank(wd, options, depth)
    docs = wd / "results/vectors/openstax/statistics/lsa/documents/shard-00000.stats.json"
    first = json.loads(docs.read_text())
    assert first["plugin"].startswith("mmir-lsa==0.1.0 (sha256:") and first["cache_misses"] == first["rows"] > 0
    code = first["plugin"].partition("(")[2]  # the sha256 of the package's code, the same in 0.1.1

    # a new version of the package: Snakemake reruns its jobs (their params name the version), every vector a miss
    # (Task 1 only: Task 2 reruns the same way and would only cost CI time)
    proc = snakemake(wd, install_example(tmp_path, "0.1.1"), [TARGETS[0], TARGETS[2]])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Params have changed since last execution" in proc.stdout + proc.stderr
    again = json.loads(docs.read_text())
    assert again["plugin"] == f"mmir-lsa==0.1.1 ({code}" and again["cache_misses"] == again["rows"] == first["rows"]
    assert again["cache_hits"] == 0
    rerank = json.loads((wd / "results/runs/task1/openstax/bm25+rr:lsa/statistics.stats.json").read_text())
    assert rerank["plugin"] == again["plugin"]
    got = json.loads((wd / "results/metrics/task1/openstax/lsa/statistics.json").read_text())  # same code, same numbers
    assert got["measures"]["nDCG@10"] == pytest.approx(direct_ndcg10(wd, data_root, "task1", options), abs=1e-9)
    assert _run_order(wd / "results/runs/task1/openstax/bm25+rr:lsa/statistics.trec") == direct_rerank(wd, options, depth)
