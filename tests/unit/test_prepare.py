import json

import pandas as pd
import pytest
from conftest import DOCS, EXAMPLES, write_domain

from mmir.core.errors import DataError
from mmir.data.prepare import ALL_FILES, prepare_domain, write_prepared
from mmir.data.trec import read_qrels

LOCAL = {"source": "local", "integrity": {}}


def ds(root, **integrity):
    return {"source": "local", "root": str(root), "integrity": integrity}


def test_prepare_writes_typed_artifacts(tiny_root, tmp_path):
    p = prepare_domain("tiny", ds(tiny_root), "d")
    out = tmp_path / "prep"
    report = write_prepared(p, out)
    assert sorted(f.name for f in out.iterdir()) == sorted(ALL_FILES)
    corpus = pd.read_parquet(out / "corpus.parquet")
    assert corpus["doc_id"].tolist() == sorted((d for d, _ in DOCS), reverse=True)  # trec_eval's tie order
    topics = pd.read_parquet(out / "topics.parquet")
    assert topics["qid"].tolist() == ["q1", "q2"]
    assert list(topics.loc[1, "image_paths"]) == ["d/query_q2/image_1.png"]
    assert read_qrels(out / "qrels.task1.txt") == {"q1": {"d/aaaa0001_0.txt": 1},
                                                   "q2": {"d/bbbb0002_0.txt": 1, "d/bbbb0002_1.txt": 1}}
    assert (out / "excluded.tsv").read_text() == "qid\tdoc_id\nq1\td/cccc0003_0.txt\n"
    assert report["documents"] == 5 and report["qrels_task1"] == 3 and report["excluded_pairs"] == 1
    assert json.loads((out / "prepare.json").read_text())["topics"] == 2


def _expect_error(root, tmp_path, match, row, field, **integrity):
    with pytest.raises(DataError) as exc:
        prepare_domain("tiny", ds(root, **integrity), "d")
    e = exc.value
    assert e.row == row and e.field == field, str(e)
    assert match in str(e) and e.file.endswith(".parquet")
    return e


def test_corrupt_parquet_names_the_file(tmp_path):
    root = write_domain(tmp_path / "raw")
    bad = root / "documents" / "d.parquet"
    bad.write_bytes(bad.read_bytes()[:40])  # truncated file
    with pytest.raises(DataError, match="not a readable parquet file") as exc:
        prepare_domain("tiny", ds(root), "d")
    assert exc.value.file == str(bad)


def test_gold_id_absent_from_corpus(tmp_path):
    ex = [dict(EXAMPLES[0]), dict(EXAMPLES[1], gold_ids=["d/bbbb0002_0.txt", "d/missing_9.txt"])]
    root = write_domain(tmp_path / "raw", examples=ex)
    e = _expect_error(root, tmp_path, "'d/missing_9.txt'", 1, "gold_ids")
    assert "examples/d.parquet" in e.file
    # warn policy: counted, dropped from qrels, everything else kept
    p = prepare_domain("tiny", ds(root, missing_gold="warn"), "d")
    assert p.report["problems"]["missing_gold"] == 1 and p.qrels["q2"] == {"d/bbbb0002_0.txt": 1}


def test_duplicate_document_ids(tmp_path):
    root = write_domain(tmp_path / "raw", docs=DOCS + [("d/aaaa0001_1.txt", "again")])
    e = _expect_error(root, tmp_path, "duplicate document id 'd/aaaa0001_1.txt' (first at row 1)", 5, "id")
    assert "documents/d.parquet" in e.file


def test_empty_query(tmp_path):
    root = write_domain(tmp_path / "raw", examples=[EXAMPLES[0], dict(EXAMPLES[1], query="   ")])
    _expect_error(root, tmp_path, "empty query text for query 'q2'", 1, "query")


def test_duplicate_query_id(tmp_path):
    root = write_domain(tmp_path / "raw", examples=[EXAMPLES[0], dict(EXAMPLES[1], id="q1")])
    _expect_error(root, tmp_path, "duplicate query id 'q1'", 1, "id")


def test_missing_column_names_the_field(tmp_path):
    root = write_domain(tmp_path / "raw")
    pd.DataFrame({"id": ["a"], "text": ["x"]}).to_parquet(root / "documents" / "d.parquet")
    with pytest.raises(DataError) as exc:
        prepare_domain("tiny", ds(root), "d")
    assert exc.value.field == "content" and "missing column" in str(exc.value)


def test_excluded_overlapping_gold_is_warned_and_counted(tmp_path):
    ex = [dict(EXAMPLES[0], negative_ids=["d/aaaa0001_0.txt", "d/cccc0003_0.txt"]), EXAMPLES[1]]
    root = write_domain(tmp_path / "raw", examples=ex)
    p = prepare_domain("tiny", ds(root), "d")
    assert p.report["problems"]["excluded_overlaps_gold"] == 1
    assert p.excluded["q1"] == ["d/aaaa0001_0.txt", "d/cccc0003_0.txt"]  # kept: the official code drops it too
    _expect_error(root, tmp_path, "also gold", 0, "negative_ids", excluded_overlaps_gold="error")


def test_sharded_hub_files_are_read_in_order(tmp_path):
    root = tmp_path / "raw"
    write_domain(root)
    docs = pd.read_parquet(root / "documents" / "d.parquet")
    (root / "documents" / "d.parquet").unlink()
    docs.iloc[:2].to_parquet(root / "documents" / "d-00000-of-00002.parquet", index=False)
    docs.iloc[2:].to_parquet(root / "documents" / "d-00001-of-00002.parquet", index=False)
    p = prepare_domain("tiny", ds(root), "d")
    assert p.corpus["doc_id"].tolist() == [d for d, _ in DOCS]


def test_failed_prepare_leaves_no_partial_output(tmp_path, monkeypatch):
    root = write_domain(tmp_path / "raw", examples=[EXAMPLES[0], dict(EXAMPLES[1], query="")])
    out = tmp_path / "prep"
    with pytest.raises(DataError):
        write_prepared(prepare_domain("tiny", ds(root), "d"), out)
    assert not out.exists()
    # a failure half-way through writing leaves the previous artifacts untouched and no temp files
    good = write_domain(tmp_path / "raw2")
    write_prepared(prepare_domain("tiny", ds(good), "d"), out)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    import mmir.data.trec as trec

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(trec, "write_qrels", boom)
    with pytest.raises(OSError, match="disk full"):
        write_prepared(prepare_domain("tiny", ds(good), "d"), out)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert [f.name for f in out.parent.iterdir() if f.name.startswith(".")] == []


def test_trec_collection(tmp_path):
    (tmp_path / "docs.trec").write_text(
        "<DOC>\n<DOCNO>1</DOCNO>\nalpha beta\n</DOC>\n<DOC>\n<DOCNO> 2 </DOCNO>\n<TEXT>gamma</TEXT>\n</DOC>\n")
    (tmp_path / "topics.trec").write_text("<top>\n<num>7</num><title>\nBETA THINGS\n</title>\n</top>\n")
    (tmp_path / "qrels").write_text("7 0 1 1\n7 0 2 0\n")
    cfg = {"source": "trec", "root": str(tmp_path), "corpus": "docs.trec", "topics": "topics.trec", "qrels": "qrels",
           "topic_field": "title", "integrity": {}}
    p = prepare_domain("t", cfg, "t")
    assert p.corpus.to_dict("records") == [{"doc_id": "1", "text": "alpha beta"}, {"doc_id": "2", "text": "gamma"}]
    assert p.topics["query"].tolist() == ["BETA THINGS"]
    assert p.qrels == {"7": {"1": 1}}
