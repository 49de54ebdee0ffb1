"""Vaswani (../shared/data/vaswani, TREC form) rewritten in BEIR form and as a local ir_datasets dataset (TREC files
read by ir_datasets' own TrecDocs/TrecQueries/TrecQrels, registered with ir_datasets.registry): each form is prepared,
BM25 runs through mmir's retrieval stage, and the prepared files, run files and metrics equal the TREC form's byte for
byte. Every form also holds 7 unjudged topics (a BEIR queries file often holds every split's queries) and the BEIR
form's texts end in a space (the ir_datasets form's in newlines): one policy for every source drops the first and
strips the second."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import shared

from mmir.data.prepare import prepare_domain, write_prepared
from mmir.data.trec import read_qrels, read_trec_documents, read_trec_topics
from mmir.workflow import retrieval_steps
from mmir.workflow.steps import score

BM25 = {"kind": "bm25", "k1": 0.9, "b": 0.4}
MEASURES = ["nDCG@10", "R@100", "MAP", "P@10", "MRR"]
IRDS_ID = "mmir-test/vaswani-trec"
#: topics no qrels row judges, in every form
UNJUDGED = [(str(100 + i), f"UNJUDGED TOPIC {i}") for i in range(1, 8)]
FILES = ("corpus.parquet", "topics.parquet", "qrels.task1.txt", "excluded.tsv")


def _topics(trec: Path, unjudged: list) -> list[tuple[str, str]]:
    return read_trec_topics(trec / "query-text.trec") + unjudged


def _beir_form(trec: Path, dest: Path, unjudged: list = (), pad: str = "") -> Path:
    """corpus.jsonl, queries.jsonl, qrels/test.tsv from the TREC files (parsed by an independent reader: json + csv);
    ``pad`` ends every text, ``unjudged`` topics are added to the queries."""
    (dest / "qrels").mkdir(parents=True)
    with open(dest / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d, t in read_trec_documents(trec / "corpus" / "doc-text.trec"):
            f.write(json.dumps({"_id": d, "title": "", "text": t + pad}) + "\n")
    with open(dest / "queries.jsonl", "w", encoding="utf-8") as f:
        for q, t in _topics(trec, list(unjudged)):
            f.write(json.dumps({"_id": q, "text": t + pad}) + "\n")
    rows = [f"{q}\t{d}\t{r}" for q, v in read_qrels(trec / "qrels").items() for d, r in v.items()]
    (dest / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return dest


def _trec_topics(trec: Path, dest: Path, unjudged: list) -> Path:
    dest.write_text(trec.joinpath("query-text.trec").read_text(encoding="utf-8")
                    + "".join(f"<top>\n<num>{q}</num><title>\n{t}\n</title>\n</top>\n" for q, t in unjudged), encoding="utf-8")
    return dest


def _irds_form(trec: Path, dest: Path, unjudged: list = ()) -> str:
    """Standard TREC files (``<TEXT>`` bodies, ``<num> Number:`` topics) registered as a local ir_datasets dataset."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecDocs, TrecQrels, TrecQueries
    from ir_datasets.util import LocalDownload

    dest.mkdir(parents=True)
    with open(dest / "docs.trec", "w", encoding="utf-8") as f:
        for d, t in read_trec_documents(trec / "corpus" / "doc-text.trec"):
            f.write(f"<DOC>\n<DOCNO>{d}</DOCNO>\n<TEXT>\n{t}\n</TEXT>\n</DOC>\n")
    with open(dest / "topics.trec", "w", encoding="utf-8") as f:
        for q, t in _topics(trec, list(unjudged)):
            f.write(f"<top>\n<num> Number: {q}\n<title> {t}\n<desc> Description:\n\n<narr> Narrative:\n\n</top>\n\n")
    if IRDS_ID not in ir_datasets.registry:
        ir_datasets.registry.register(IRDS_ID, Dataset(
            TrecDocs(LocalDownload(dest / "docs.trec"), parser="text", content_tags=["TEXT"]),
            TrecQueries(LocalDownload(dest / "topics.trec")),
            TrecQrels(LocalDownload(trec / "qrels"), {0: "not relevant", 1: "relevant"})))
    return IRDS_ID


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    trec = shared("vaswani") / "trec"
    tmp = tmp_path_factory.mktemp("vaswani")
    entries = {
        "trec": {"source": "trec", "root": str(trec), "corpus": "corpus/doc-text.trec",
                 "topics": str(_trec_topics(trec, tmp / "topics.trec", UNJUDGED)), "qrels": "qrels"},
        "beir": {"source": "beir", "root": str(_beir_form(trec, tmp / "beir", UNJUDGED, pad=" "))},
        "ir_datasets": {"source": "ir_datasets", "dataset_id": _irds_form(trec, tmp / "irds", UNJUDGED), "query_fields": ["title"],
                        "cache_dir": str(tmp / "irds-home")},
    }
    out = {}
    for form, ds in entries.items():
        prep = tmp / form / "prepared"
        report = write_prepared(prepare_domain("vaswani", ds, "vaswani"), prep)
        run = tmp / form / "bm25.trec"
        retrieval_steps.retrieve(retrieval_steps.RetrieveJob("task1", prep, "bm25", BM25, {"protocol": "official", "top_k": 1000},
                                                             run, tmp / form / "bm25.stats.json"))
        metrics = score(run, prep / "qrels.task1.txt", MEASURES, tmp / form / "m.json", tmp / form / "m.perquery.tsv", {})
        out[form] = {"prep": prep, "report": report, "run": run, "metrics": metrics, "perquery": tmp / form / "m.perquery.tsv"}
    return out


def test_three_forms_prepare_the_same_collection(forms):
    for form in ("beir", "ir_datasets"):
        r, t = forms[form]["report"], forms["trec"]["report"]
        assert (r["documents"], r["topics"], r["topics_with_qrels"], r["qrels_task1"]) == (11429, 93, 93, 2083)
        assert (r["documents"], r["topics"], r["qrels_task1"]) == (t["documents"], t["topics"], t["qrels_task1"])
        for name in FILES:
            assert (forms[form]["prep"] / name).read_bytes() == (forms["trec"]["prep"] / name).read_bytes(), (form, name)
    for form, f in forms.items():
        print(f"\n{form}: texts stripped {f['report']['texts_stripped']}, queries {f['report']['topic_rows']['dropped']}")
        assert f["report"]["topic_rows"] == {"read": 100, "written": 93, "dropped": {"unjudged": 7},
                                             "dropped_ids": {"unjudged": [q for q, _ in UNJUDGED[:5]]}}, form
        assert f["report"]["qrels_rows"] == {"read": 2083, "written": 2083, "dropped": {}, "dropped_ids": {}}, form
    assert forms["beir"]["report"]["texts_stripped"] == {"documents": 11429, "queries": 93}
    assert forms["trec"]["report"]["texts_stripped"] == {"documents": 0, "queries": 0}  # SGML: layout collapsed on reading


def test_three_forms_give_byte_identical_runs_and_metrics(forms):
    ref = forms["trec"]
    for form, f in forms.items():
        values = ", ".join(f"{m} {v:.4f}" for m, v in f["metrics"]["measures"].items())
        print(f"\n{form}: {f['run'].stat().st_size} bytes of run, {values}")
    for form in ("beir", "ir_datasets"):
        assert forms[form]["run"].read_bytes() == ref["run"].read_bytes(), form
        assert forms[form]["perquery"].read_bytes() == ref["perquery"].read_bytes(), form
        assert forms[form]["metrics"]["measures"] == ref["metrics"]["measures"], form
    # the TREC form's nDCG@10 is a real value (checked against pytrec_eval in the scoring tests), not an empty run
    assert 0.3 < ref["metrics"]["measures"]["nDCG@10"] < 0.6
