"""One small collection with unjudged queries and surrounding whitespace in three forms (BEIR files, the same files
read through ir_datasets' own BEIR readers, TREC files): one policy for every source, so the prepared files, a BM25
run and its metrics are byte-identical. The expected texts and qrels are computed here from the records (MTEB's
``(title + " " + text).strip()``, the judged queries, the rows of grade > 0). Inner whitespace is text, which SGML does not
keep: the collection has none."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mmir.core.errors import DataError
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.data.trec import read_qrels
from mmir.workflow import retrieval_steps
from mmir.workflow.steps import score

DOCS = [("d1", "Mean", "the mean of a sample is its average "), ("d2", "", " a histogram shows counts of values "),
        ("d3", "Box plot", "a box plot shows quartiles and the median "), ("d4", "Median", "the median splits a sample\t"),
        ("d5", "Variance", "the variance measures spread around the mean")]
QUERIES = [("1", "sample mean "), ("2", " box plot quartiles"), ("3", "median of a sample "), ("4", "unjudged spread "),
           ("5", "another split's query")]
QRELS = [("1", "d1", 2), ("1", "d4", 1), ("1", "d5", 0), ("2", "d3", 1), ("3", "d4", 2), ("3", "d3", 1)]
FILES = ("corpus.parquet", "topics.parquet", "qrels.task1.txt", "excluded.tsv")


def beir_form(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, t, x in DOCS))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS))
    return root


def trec_form(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "docs.trec").write_text("".join(f"<DOC>\n<DOCNO> {d} </DOCNO>\n<TITLE>{t}</TITLE>\n<TEXT>\n{x}\n</TEXT>\n</DOC>\n"
                                            for d, t, x in DOCS))
    (root / "topics.trec").write_text("".join(f"<top>\n<num> Number: {q}\n<title> {t}\n</top>\n\n" for q, t in QUERIES))
    (root / "qrels").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in QRELS))
    return root


def irds_form(beir: Path, name: str, qrels: Path | None = None) -> str:
    """The BEIR files registered with ir_datasets through its own BEIR readers (as its ``beir/*`` ids read them)."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import LocalDownload

    ir_datasets.registry.register(name, Dataset(
        BeirDocs(name, LocalDownload(beir / "corpus.jsonl"), BeirTitleDoc),
        BeirQueries(name, LocalDownload(beir / "queries.jsonl"), GenericQuery),
        BeirQrels(LocalDownload(qrels or beir / "qrels" / "test.tsv"), {0: "not", 1: "relevant", 2: "highly"})))
    return name


@pytest.fixture
def forms(tmp_path, monkeypatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    beir = beir_form(tmp_path / "beir")
    return tmp_path, {
        "beir": {"source": "beir", "root": str(beir)},
        "ir_datasets": {"source": "ir_datasets", "dataset_id": irds_form(beir, f"mmir-test/forms-{tmp_path.name}"),
                        "doc_fields": ["title", "text"]},
        "trec": {"source": "trec", "root": str(trec_form(tmp_path / "trec")), "corpus": "docs.trec", "topics": "topics.trec",
                 "qrels": "qrels"},
    }


def test_three_forms_give_byte_identical_prepared_files_runs_and_metrics(forms):
    tmp, entries = forms
    out = {}
    for form, ds in entries.items():
        prep = tmp / form / "prepared"
        report = write_prepared(prepare_domain("toy", ds, "toy"), prep)
        run = tmp / form / "bm25.trec"
        retrieval_steps.retrieve(retrieval_steps.RetrieveJob("task1", prep, "bm25", {"kind": "bm25", "k1": 0.9, "b": 0.4},
                                                             {"protocol": "official", "top_k": 10}, run, tmp / form / "run.json"))
        metrics = score(run, prep / "qrels.task1.txt", ["nDCG@10", "MAP"], tmp / form / "m.json", tmp / form / "m.tsv", {})
        out[form] = (prep, report, run, metrics)
    prep, report, run, metrics = out["beir"]
    # the independent expectation: MTEB's joined-and-stripped texts, the judged queries, the rows of grade > 0
    # the corpus in trec_eval's tie order of the ids (descending), not the source's
    assert list(pd.read_parquet(prep / "corpus.parquet")["text"]) == [(t + " " + x).strip() for _, t, x in DOCS[::-1]]
    assert list(pd.read_parquet(prep / "topics.parquet")["query"]) == [t.strip() for q, t in QUERIES[:3]]
    assert read_qrels(prep / "qrels.task1.txt") == {"1": {"d1": 2, "d4": 1}, "2": {"d3": 1}, "3": {"d4": 2, "d3": 1}}
    assert report["topic_rows"] == {"read": 5, "written": 3, "dropped": {"unjudged": 2}, "dropped_ids": {"unjudged": ["4", "5"]}}
    assert report["qrels_rows"]["dropped"] == {"not_relevant": 1} and report["scorable_queries"] == 3
    assert report["texts_stripped"] == {"documents": 4, "queries": 3}
    assert 0 < metrics["measures"]["nDCG@10"] < 1 and metrics["queries"] == 3
    for form in ("ir_datasets", "trec"):
        other = out[form]
        for name in FILES:
            assert (other[0] / name).read_bytes() == (prep / name).read_bytes(), (form, name)
        assert other[2].read_bytes() == run.read_bytes(), form
        assert other[3]["measures"] == metrics["measures"], form
        for key in ("topic_rows", "qrels_rows", "scorable_queries"):
            assert other[1][key] == report[key], (form, key)


def test_ir_datasets_errors_name_irds_part_and_position(forms):
    """Its BEIR qrels reader checks the header line with a bare ``assert``: a headerless file used to surface as an
    AssertionError without a message."""
    tmp, entries = forms
    (tmp / "headerless.tsv").write_text("".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS))
    name = irds_form(tmp / "beir", f"mmir-test/headerless-{tmp.name}", tmp / "headerless.tsv")
    with pytest.raises(DataError) as exc:
        prepare_domain("toy", {"source": "ir_datasets", "dataset_id": name, "doc_fields": ["title", "text"]}, "toy")
    e = exc.value
    assert (e.file, e.row) == (f"irds://{name}/qrels", 0) and f"irds://{name}/qrels, row 0:" in str(e)
    assert "AssertionError (no message)" in str(e) and "query-id" in str(e) and "headerless.tsv" in str(e)
    # an unknown query in ir_datasets' qrels is named at its position, as in a file
    (tmp / "unknown.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n7\td2\t1\n")
    name = irds_form(tmp / "beir", f"mmir-test/unknown-{tmp.name}", tmp / "unknown.tsv")
    with pytest.raises(DataError) as exc:
        prepare_domain("toy", {"source": "ir_datasets", "dataset_id": name, "doc_fields": ["title", "text"]}, "toy")
    assert (exc.value.file, exc.value.row, exc.value.field) == (f"irds://{name}/qrels", 1, "query-id")
