"""Broken and unusual BEIR, qrels and TREC inputs, each with its expected outcome: an error naming the file, the line
and the field, or the prepared data with every dropped or changed judgement and query counted by reason (issue 31).

The collection is tiny and inline: 3 documents, 3 queries (q9 judged in no split), 4 qrels rows (one of grade 0).
Expected values are written out by hand from the rows each case writes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mmir.core.errors import DataError
from mmir.data.prepare import prepare_domain, read_excluded, write_prepared
from mmir.data.trec import read_qrels, read_qrels_rows, read_trec_documents, read_trec_topics

CORPUS = [{"_id": "d1", "title": "Mean", "text": "the mean of a sample"}, {"_id": "d2", "title": "", "text": "a histogram"},
          {"_id": "d3", "title": "Box", "text": "a box plot shows quartiles"}]
QUERIES = [{"_id": "q1", "text": "sample mean"}, {"_id": "q2", "text": "quartiles"}, {"_id": "q9", "text": "a train query"}]
HEADER = "query-id\tcorpus-id\tscore\n"
ROWS = "q1\td1\t2\nq1\td2\t1\nq1\td3\t0\nq2\td3\t1\n"
QRELS = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}}
#: characters str.splitlines() breaks at besides \n and \r; JSON strings and ids may hold every one of them
SEPARATORS = ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def beir(root: Path, corpus: str | None = None, queries: str | None = None, qrels: str = HEADER + ROWS) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(jsonl(CORPUS) if corpus is None else corpus, encoding="utf-8", newline="")
    (root / "queries.jsonl").write_text(jsonl(QUERIES) if queries is None else queries, encoding="utf-8", newline="")
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8", newline="")
    return root


def prep(root: Path, **integrity):
    return prepare_domain("toy", {"source": "beir", "root": str(root), "integrity": integrity}, "toy")


def error(root: Path, **integrity) -> DataError:
    with pytest.raises(DataError) as exc:
        prep(root, **integrity)
    return exc.value


def balanced(report: dict) -> None:
    """Every judgement and query read is written or dropped for a named reason."""
    for key in ("qrels_rows", "topic_rows"):
        led = report[key]
        assert led["read"] == led["written"] + sum(led["dropped"].values()), (key, led)


# ----------------------------------------------------------------------------- 1. line separators inside strings
@pytest.mark.parametrize("ch", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_separators_inside_json_strings_and_ids_are_read_as_they_are(tmp_path, ch):
    """json.dumps(ensure_ascii=False) writes U+0085/U+2028/U+2029 as they are and escapes the control characters;
    another writer may leave those raw: both forms, in corpus.jsonl(.gz), queries.jsonl and the qrels TSV."""
    did, qid = f"d{ch}1", f"q{ch}1"
    corpus = [{"_id": did, "title": "Mean", "text": f"the mean{ch}of a sample"}, CORPUS[1]]
    queries = [{"_id": qid, "text": f"sample{ch}mean"}]
    qrels = f"{HEADER}{qid}\t{did}\t1\n{qid}\td2\t0\n"
    escaped = json.dumps(ch)[1:-1]  # the character as json.dumps writes it: itself, or \u000b
    for form, text in (("escaped", jsonl(corpus)), ("raw", jsonl(corpus).replace(escaped, ch))):
        root = beir(tmp_path / form, text, jsonl(queries).replace(escaped, ch), qrels)
        if form == "raw":
            (root / "corpus.jsonl.gz").write_bytes(gzip.compress((root / "corpus.jsonl").read_bytes()))
            (root / "corpus.jsonl").unlink()
        p = prep(root)
        assert list(p.corpus["doc_id"]) == [did, "d2"] and p.corpus["text"][0] == f"Mean the mean{ch}of a sample"
        assert list(p.topics["query"]) == [f"sample{ch}mean"] and p.qrels == {qid: {did: 1}}
        # the prepared TREC qrels (fields split at spaces and tabs) and excluded.tsv keep such ids too
        write_prepared(p, tmp_path / form / "out")
        assert read_qrels(tmp_path / form / "out" / "qrels.task1.txt") == {qid: {did: 1}}
    (tmp_path / "excluded.tsv").write_text(f"qid\tdoc_id\n{qid}\t{did}\n{qid}\td2\n", encoding="utf-8")
    assert read_excluded(tmp_path / "excluded.tsv") == {qid: {did, "d2"}}


@pytest.mark.parametrize("ch", SEPARATORS, ids=[f"U+{ord(c):04X}" for c in SEPARATORS])
def test_separators_in_trec_files(tmp_path, ch):
    """TREC qrels keep such ids exactly; SGML documents and topics collapse ASCII layout whitespace only (\\v, \\f are
    layout; U+0085, U+2028, U+2029, \\x1c-\\x1e are text)."""
    (tmp_path / "qrels").write_text(f"7{ch}a 0 doc{ch}1 1\n7{ch}a\t0\tdoc2\t0\n", encoding="utf-8")
    assert [(j.qid, j.doc_id, j.rel, j.line) for j in read_qrels_rows(tmp_path / "qrels")] == [
        (f"7{ch}a", f"doc{ch}1", 1, 1), (f"7{ch}a", "doc2", 0, 2)]
    (tmp_path / "docs.trec").write_text(f"<DOC>\n<DOCNO>1</DOCNO>\nalpha{ch}beta\n</DOC>\n", encoding="utf-8")
    (tmp_path / "topics.trec").write_text(f"<top>\n<num>7</num><title>\nbeta{ch}things\n</title>\n</top>\n", encoding="utf-8")
    kept = ch not in "\x0b\x0c"
    assert list(read_trec_documents(tmp_path / "docs.trec")) == [("1", f"alpha{ch if kept else ' '}beta")]
    assert read_trec_topics(tmp_path / "topics.trec") == [("7", f"beta{ch if kept else ' '}things")]


# ------------------------------------------------------------------------------- 2. byte order marks, CRLF, blank lines
def test_a_bom_crlf_and_blank_lines_change_nothing(tmp_path):
    ref = prep(beir(tmp_path / "ref"))
    bom = "\ufeff"
    # a headerless qrels file starting with a BOM: its first judgement used to be lost (its query id was '\ufeffq1')
    root = beir(tmp_path / "odd", bom + jsonl(CORPUS).replace("\n", "\r\n"), bom + jsonl(QUERIES).replace("\n", "\n\n"),
                bom + ROWS.replace("\n", "\r\n"))
    p = prep(root)
    assert p.qrels == ref.qrels == QRELS and p.corpus.equals(ref.corpus) and p.topics.equals(ref.topics)
    assert p.report["qrels_rows"]["read"] == 4
    # line numbers stay the editor's: physical lines, blank ones counted
    (root / "queries.jsonl").write_text(jsonl(QUERIES[:1]) + "\n\n" + '{"_id": "q2", "text": }\n', encoding="utf-8")
    e = error(root)
    assert (Path(e.file).name, e.line) == ("queries.jsonl", 4) and "queries.jsonl, line 4:" in str(e)


def test_blank_lines_are_counted_and_named(tmp_path):
    # two in queries.jsonl (lines 2 and 3), one in the qrels (line 3): read past, and counted with their lines
    p = prep(beir(tmp_path / "b", queries=jsonl(QUERIES).replace("\n", "\n\n\n", 1), qrels=HEADER + ROWS.replace("\n", "\n\n", 1)))
    assert p.qrels == QRELS and p.report["problems"]["blank_lines"] == 3
    assert [e.split("/")[-1] for e in p.report["examples"]["blank_lines"]] == [
        "test.tsv: 1 blank line skipped (line 3)", "queries.jsonl: 2 blank lines skipped (line 2, 3)"]
    trec = tmp_path / "t"
    trec.mkdir()
    (trec / "docs.trec").write_text("<DOC>\n<DOCNO>1</DOCNO>\nalpha\n</DOC>\n")
    (trec / "topics.trec").write_text("<top>\n<num>7</num><title> alpha\n</top>\n")
    (trec / "qrels").write_text("\n7 0 1 1\n")
    t = prepare_domain("t", {"source": "trec", "root": str(trec), "corpus": "docs.trec", "topics": "topics.trec",
                             "qrels": "qrels"}, "t")
    assert t.report["problems"]["blank_lines"] == 1 and t.report["examples"]["blank_lines"][0].endswith("(line 1)")


@pytest.mark.parametrize("file", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_cr_only_line_ends_are_named_as_such(tmp_path, file):
    root = beir(tmp_path / "b")
    (root / file).write_bytes((root / file).read_bytes().replace(b"\n", b"\r"))
    e = error(root)
    assert (Path(e.file).name, e.line) == (Path(file).name, 1)
    assert "its lines end with a carriage return alone (\\r, classic Mac OS line ends)" in str(e)


@pytest.mark.parametrize("corpus", ["", "\n\n", "\r\n"])
def test_an_empty_corpus_is_named_as_such(tmp_path, corpus):
    e = error(beir(tmp_path / "b", corpus))  # was: the first qrels row's document "is not in the corpus"
    assert Path(e.file).name == "corpus.jsonl" and "the corpus is empty: no document in it" in str(e)


# -------------------------------------------------------------------- 3. judgements: dropped or changed rows, by reason
def test_the_reference_collection_accounts_for_every_row(tmp_path):
    p = prep(beir(tmp_path / "b"))
    assert p.qrels == QRELS and list(p.topics["qid"]) == ["q1", "q2"]
    assert p.report["qrels_rows"] == {"read": 4, "written": 3, "dropped": {"not_relevant": 1}, "dropped_ids": {"not_relevant": ["q1"]}}
    assert p.report["topic_rows"] == {"read": 3, "written": 2, "dropped": {"unjudged": 1}, "dropped_ids": {"unjudged": ["q9"]}}
    assert p.report["problems"]["unjudged_queries"] == 1 and "'q9'" in p.report["examples"]["unjudged_queries"][0]


def test_qrels_naming_an_unknown_query_stop_unless_warn_which_counts_them(tmp_path):
    root = beir(tmp_path / "b", qrels=HEADER + ROWS + "q7\td1\t1\nq8\td2\t1\nq7\td3\t1\n")
    e = error(root)
    assert (Path(e.file).name, e.line, e.field) == ("test.tsv", 6, "query-id") and "'q7' is not in" in str(e)
    assert "(datasets.toy.integrity.qrels_unknown_query: warn drops such rows" in str(e)  # the key the user sets
    p = prep(root, qrels_unknown_query="warn")
    assert p.qrels == QRELS and p.report["problems"]["qrels_unknown_query"] == 3
    assert p.report["qrels_rows"]["dropped"] == {"unknown_query": 3, "not_relevant": 1}
    assert p.report["qrels_rows"]["dropped_ids"]["unknown_query"] == ["q7", "q8"]
    balanced(p.report)


def test_ids_are_compared_exactly_and_a_near_miss_is_named(tmp_path):
    root = beir(tmp_path / "q", qrels=HEADER + ROWS.replace("q2\t", "q2 \t"))
    e = error(root)
    assert (e.line, e.field) == (5, "query-id")
    assert "'q2 ' is not in" in str(e) and "has 'q2': the ids differ by surrounding whitespace" in str(e)
    root = beir(tmp_path / "d", qrels=HEADER + ROWS.replace("\td2\t", "\t d2\t"))
    e = error(root)
    assert (Path(e.file).name, e.line, e.field) == ("test.tsv", 3, "corpus-id")
    assert "' d2'" in str(e) and "the corpus has 'd2'" in str(e)
    p = prep(root, missing_gold="warn")
    assert p.qrels == {"q1": {"d1": 2}, "q2": {"d3": 1}} and p.report["qrels_rows"]["dropped"]["missing_gold"] == 1
    balanced(p.report)


def test_duplicate_rows_are_counted_and_conflicting_grades_stop_unless_warn(tmp_path):
    p = prep(beir(tmp_path / "same", qrels=HEADER + ROWS + "q1\td1\t2\n"))
    assert p.qrels == QRELS and p.report["qrels_rows"]["dropped"]["duplicate"] == 1
    root = beir(tmp_path / "conflict", qrels=HEADER + ROWS + "q1\td1\t1\n")
    e = error(root)
    assert (e.line, e.field) == (6, "score") and "judged 1 here and 2 at" in str(e) and "test.tsv, line 2" in str(e)
    p = prep(root, qrels_conflicting_grades="warn")
    assert p.qrels == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}  # the last, as BEIR's loader keeps it
    assert p.report["problems"]["qrels_conflicting_grades"] == 1
    balanced(p.report)


@pytest.mark.parametrize("policy, topics, error_line", [("drop", ["q1", "q2"], None), ("keep", ["q1", "q2", "q9"], None),
                                                        ("error", None, 3)])
def test_unjudged_queries_policy(tmp_path, policy, topics, error_line):
    root = beir(tmp_path / "b")
    if error_line:
        e = error(root, unjudged_queries=policy)
        assert (Path(e.file).name, e.line) == ("queries.jsonl", error_line) and "'q9' has no judgement" in str(e)
        return
    p = prep(root, unjudged_queries=policy)
    assert list(p.topics["qid"]) == topics and p.qrels == QRELS and "no_gold" not in p.report["problems"]
    balanced(p.report)


def test_a_judged_query_without_a_relevant_document_is_no_gold(tmp_path):
    p = prep(beir(tmp_path / "b", qrels=HEADER + ROWS + "q9\td1\t0\n"))
    assert list(p.topics["qid"]) == ["q1", "q2", "q9"] and "q9" not in p.qrels  # judged (grade 0): ranked, not scored
    assert p.report["problems"]["no_gold"] == 1 and p.report["qrels_rows"]["dropped"]["not_relevant"] == 2


# ----------------------------------------------------------------------------------- 4. nothing to score
@pytest.mark.parametrize("queries, qrels, file, reason", [
    ("", HEADER + ROWS, "queries.jsonl", "the queries file holds no query"),
    (None, HEADER, "test.tsv", "the qrels hold no judgement"),
    (None, HEADER + "q1\td3\t0\n", "test.tsv", "none of the 1 judged queries has a relevant document"),
])
def test_no_scorable_query_stops_unless_warn_which_says_why(tmp_path, queries, qrels, file, reason):
    root = beir(tmp_path / "b", queries=queries, qrels=qrels)
    if queries == "":  # the qrels name queries the empty file lacks: that stops first, and says the file is empty
        e = error(root)
        assert (Path(e.file).name, e.line) == ("test.tsv", 2) and "queries.jsonl holds no query" in str(e)
    e = error(root, qrels_unknown_query="warn")
    assert Path(e.file).name == file and reason in str(e) and "no scorable query" in str(e)
    p = prep(root, no_scorable_queries="warn", qrels_unknown_query="warn")
    report = write_prepared(p, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "prepare.json").read_text())
    assert saved["scorable_queries"] == report["scorable_queries"] == 0 and reason in saved["scorable_reason"]
    assert (tmp_path / "out" / "qrels.task1.txt").read_text() == ""


# ----------------------------------------------------------------------------------- 5. text whitespace
def test_surrounding_whitespace_is_stripped_after_joining_and_counted(tmp_path):
    corpus = [{"_id": "d1", "title": " Mean", "text": "the mean \n"}, {"_id": "d2", "title": "", "text": " a  histogram"},
              CORPUS[2]]
    root = beir(tmp_path / "b", jsonl(corpus), jsonl([{"_id": "q1", "text": "sample mean\t"}, QUERIES[1]]))
    p = prep(root)
    # MTEB's (title + " " + text).strip(); inner whitespace is text
    assert list(p.corpus["text"]) == [(d["title"] + " " + d["text"]).strip() for d in corpus]
    assert list(p.topics["query"]) == ["sample mean", "quartiles"]
    assert p.report["texts_stripped"] == {"documents": 2, "queries": 1}
    kept = prep(root, text_whitespace="keep")
    assert list(kept.corpus["text"])[:2] == [" Mean the mean \n", " a  histogram"] and kept.topics["query"][0] == "sample mean\t"


# ----------------------------------------------------------------------------------- 6. malformed files
@pytest.mark.parametrize("name, content, where", [
    ("corpus.jsonl", b'{"_id": "d1", "text": "caf\xe9"}\n', ("corpus.jsonl", 1, None, "invalid UTF-8 at byte offset")),
    ("corpus.jsonl", jsonl(CORPUS[:2]).encode() + b'["d3"]\n', ("corpus.jsonl", 3, None, "expected a JSON object")),
    ("corpus.jsonl", jsonl(CORPUS[:2]).encode() + b'{"_id": true, "text": "x"}\n', ("corpus.jsonl", 3, "_id", "boolean")),
    ("queries.jsonl", jsonl(QUERIES[:1]).encode() + b'{"_id": "q2", "text": 5}\n', ("queries.jsonl", 2, "text", "expected text")),
    ("qrels/test.tsv", (HEADER + "q1\td1\n").encode(), ("test.tsv", 2, None, "got 2 field(s)")),
    ("qrels/test.tsv", (HEADER + "q1\t\t1\n").encode(), ("test.tsv", 2, "corpus-id", "empty")),
    ("qrels/test.tsv", (HEADER + "q1\td1\t1.5\n").encode(), ("test.tsv", 2, "score", "not an integer")),
    ("qrels/test.tsv", (HEADER + "q1 d1 1\n").encode(), ("test.tsv", 2, None, "got 1 field(s)")),
])
def test_malformed_beir_files_name_file_line_and_field(tmp_path, name, content, where):
    root = beir(tmp_path / "b")
    (root / name).write_bytes(content)
    e = error(root)
    assert (Path(e.file).name, e.line, e.field) == where[:3] and where[3] in str(e) and f", line {where[1]}" in str(e)


def test_trec_collection_errors_name_the_line(tmp_path):
    (tmp_path / "docs.trec").write_text("<DOC>\n<DOCNO>1</DOCNO>\nalpha beta \n</DOC>\n<DOC>\n<DOCNO>2</DOCNO>\ngamma\n</DOC>\n")
    (tmp_path / "topics.trec").write_text("\ufeff<top>\n<num>7</num><title> beta\n</top>\n<top>\n<num>8</num><title>x\n</top>\n")
    ds = {"source": "trec", "root": str(tmp_path), "corpus": "docs.trec", "topics": "topics.trec", "qrels": "qrels"}
    for qrels, where in (("7 0 1 1\n9 0 2 1\n", (2, "query-id", "'9' is not in")), ("7 0 1 1\n\n7 0 5 1\n", (3, "corpus-id", "'5'")),
                         ("7 0 1\n", (1, None, "got 3 field(s)")), ("7 0 1 yes\n", (1, "rel", "not an integer"))):
        (tmp_path / "qrels").write_text(qrels)
        with pytest.raises(DataError) as exc:
            prepare_domain("t", ds, "t")
        e = exc.value
        assert (Path(e.file).name, e.line, e.field) == ("qrels", *where[:2]) and where[2] in str(e), str(e)
    (tmp_path / "qrels").write_text("7 0 1 1\n7 0 2 0\n")
    p = prepare_domain("t", ds, "t")
    assert list(p.topics["qid"]) == ["7"] and p.qrels == {"7": {"1": 1}}  # 8 is unjudged: dropped
    assert p.report["topic_rows"]["dropped"] == {"unjudged": 1} and p.report["qrels_rows"]["dropped"] == {"not_relevant": 1}
    (tmp_path / "docs.trec").write_text("<DOC>\n<DOCNO>1</DOCNO>\nx\n</DOC>\n\n<DOC>\n<TEXT>y</TEXT>\n</DOC>\n")
    with pytest.raises(DataError) as exc:
        prepare_domain("t", ds, "t")
    assert (exc.value.line, exc.value.field) == (6, "DOCNO")


# ------------------------------------------------------------------------------- 6b. ids a TREC file cannot hold
@pytest.mark.parametrize("file, old, new, where", [
    ("corpus.jsonl", '"d2"', '"d 2"', (2, "_id", "document id 'd 2' holds a space")),
    ("corpus.jsonl", '"d3"', '"d\\t3"', (3, "_id", "document id 'd\\t3' holds a tab")),
    ("queries.jsonl", '"q2"', '"q2 "', (2, "_id", "query id 'q2 ' holds a space")),
])
def test_an_id_a_trec_file_cannot_hold_stops_at_prepare(tmp_path, file, old, new, where):
    """mmir's runs and qrels split fields at spaces and tabs: such an id passed prepare and retrieve, then scoring
    failed on mmir's own qrels file. The qrels judge the same id (a TSV cannot hold a tab in one: there they keep
    'd3'), so only the id itself is wrong."""
    root = beir(tmp_path / "b")
    (root / file).write_text((root / file).read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    ident = json.loads(new)
    tsv = root / "qrels" / "test.tsv"
    tsv.write_text("".join("\t".join(ident if f == json.loads(old) and "\t" not in ident else f for f in line.split("\t"))
                           for line in tsv.read_text().splitlines(keepends=True)), encoding="utf-8")
    e = error(root)
    assert (Path(e.file).name, e.line, e.field) == (file, *where[:2]) and where[2] in str(e), str(e)
    assert "TREC run and qrels files split their fields at spaces and tabs" in str(e)


def test_a_trec_docno_with_a_space_stops_at_its_line(tmp_path):
    (tmp_path / "docs.trec").write_text("<DOC>\n<DOCNO>1</DOCNO>\nalpha\n</DOC>\n<DOC>\n<DOCNO> LA 2 </DOCNO>\nbeta\n</DOC>\n")
    (tmp_path / "topics.trec").write_text("<top>\n<num>7</num><title> beta\n</top>\n")
    (tmp_path / "qrels").write_text("7 0 1 1\n")
    with pytest.raises(DataError) as exc:
        prepare_domain("t", {"source": "trec", "root": str(tmp_path), "corpus": "docs.trec", "topics": "topics.trec",
                             "qrels": "qrels"}, "t")
    assert (Path(exc.value.file).name, exc.value.line, exc.value.field) == ("docs.trec", 5, "DOCNO")
    assert "document id 'LA 2' holds a space" in str(exc.value)


def test_a_backslash_in_a_beir_id_is_kept_as_written(tmp_path):
    """MM-BRIGHT's hub layout reads a backslash in an id as / (its Windows paths); a BEIR id is the user's: a\\b and
    a/b are two documents, each judged as written, in the prepared qrels too."""
    corpus = [{"_id": "a\\b", "text": "the mean"}, {"_id": "a/b", "text": "the median"}]
    root = beir(tmp_path / "b", jsonl(corpus), jsonl(QUERIES[:2]), HEADER + "q1\ta\\b\t1\nq2\ta/b\t1\n")
    p = prep(root)
    assert list(p.corpus["doc_id"]) == ["a\\b", "a/b"] and p.qrels == {"q1": {"a\\b": 1}, "q2": {"a/b": 1}}
    assert p.report["backslash_refs"] == 0
    write_prepared(p, tmp_path / "out")
    assert read_qrels(tmp_path / "out" / "qrels.task1.txt") == {"q1": {"a\\b": 1}, "q2": {"a/b": 1}}


# ----------------------------------------------------------------- 6c. what a table says a warn policy dropped
def test_a_table_says_how_many_qrels_rows_a_warn_policy_dropped(tmp_path):
    from conftest import PROJECT

    from mmir.reporting.dropped import qrels_drop_notes
    from mmir.workflow.rules import RULES
    from mmir.workflow.validate import load_config

    # one row names a document the corpus lacks, one a query the queries lack: both dropped under warn, counted
    root = beir(tmp_path / "b", qrels=HEADER + ROWS + "q2\td9\t1\nq7\td1\t1\n")
    p = prep(root, missing_gold="warn", qrels_unknown_query="warn")
    write_prepared(p, tmp_path / "out", {"dataset": "toy", "domain": "toy"})
    assert qrels_drop_notes([tmp_path / "out" / "prepare.json"]) == [
        "`toy`: prepare dropped 2 of its 6 qrels rows under warn policies (integrity.missing_gold: 1 in toy; "
        "integrity.qrels_unknown_query: 1 in toy); the scores use the rest."]
    write_prepared(prep(beir(tmp_path / "c")), tmp_path / "ok", {"dataset": "toy", "domain": "toy"})
    assert qrels_drop_notes([tmp_path / "ok" / "prepare.json"]) == []  # grade 0 rows are no policy's drop
    cfg = load_config(str(PROJECT / "params.yaml"), [])  # the report job reads each domain's prepare.json
    assert "data/prepared/openstax/statistics/prepare.json" in RULES["report"].input(cfg, {"task": "task1"})["prepared"]


# --------------------------------------------------------------------------- 7. how a data error reaches the user
@pytest.fixture
def broken_project(tmp_path, monkeypatch):
    """A project whose BEIR dataset judges a document its corpus lacks (qrels/test.tsv, line 6)."""
    import yaml

    beir(tmp_path / "toy", qrels=HEADER + ROWS + "q2\tdX\t1\n")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"datasets": {"toy": {"source": "beir", "root": str(tmp_path / "toy")}},
                                                          "systems": {"bm25": {"kind": "bm25"}}, "tasks": ["task1"]}))
    monkeypatch.chdir(tmp_path)
    return tmp_path, f"{tmp_path / 'toy' / 'qrels' / 'test.tsv'}, line 6, field 'corpus-id': document 'dX'"


def test_the_cli_prints_one_error_line_and_the_traceback_only_with_debug(broken_project, capsys):
    from mmir import cli

    _, where = broken_project
    assert cli.main(["job", "prepare", "dataset=toy", "domain=toy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmir: error: {where}") and err.count("\n") == 1 and "Traceback" not in err
    assert cli.main(["--debug", "job", "prepare", "dataset=toy", "domain=toy"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1].startswith(f"mmir: error: {where}")
    assert not (broken_project[0] / "data" / "prepared").exists()


def test_a_snakemake_job_logs_the_traceback_and_prints_one_line(broken_project, capsys):
    """pipeline/scripts/step.py's body, on the object Snakemake injects (its fields, as the prepare rule fills them)."""
    from types import SimpleNamespace

    from mmir.workflow.rules import RULES, run_snakemake_job
    from mmir.workflow.validate import load_config

    tmp, where = broken_project
    job = RULES["prepare"].job(load_config("params.yaml"), {"dataset": "toy", "domain": "toy"})
    log = tmp / "prepare.log"
    smk = SimpleNamespace(rule="prepare", wildcards=job.wildcards, input=job.input, output=job.output,
                          params=SimpleNamespace(slice=job.params), log=[str(log)], threads=1)
    with pytest.raises(SystemExit) as exc:
        run_snakemake_job(smk)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmir: error: {where}") and err.count("\n") == 1 and str(log) in err
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "rule prepare failed" in text and where in text


@pytest.mark.parametrize("ds, fix", [
    ({"source": "bright", "domains": ["biology"]}, "keep `source: bright` and add `root: /path/to/BRIGHT`"),
    ({"source": "beir", "repo_id": "mteb/scifact", "revision": "0" * 40}, "keep `source: beir`, add `root: /path/to/scifact`"),
    ({"source": "hf", "domains": ["biology"]}, "`source: local` and `root: /path/to/MM-BRIGHT`"),
])
def test_offline_fetch_names_the_fix_of_each_hub_source(tmp_path, monkeypatch, ds, fix):
    from mmir.config.models import parse_dataset
    from mmir.data.hub import check_reachable
    from mmir.workflow import steps

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="cannot reach the Hugging Face hub") as exc:
        steps.fetch("x", ds, "biology", tmp_path / "marker.json")
    assert fix in str(exc.value) and not (tmp_path / "marker.json").exists()
    parsed = parse_dataset(ds)
    with pytest.raises(DataError) as exc:  # the Snakefile's onstart check, before any job
        check_reachable(parsed.repo_id, parsed.revision, parsed.source)
    assert fix in str(exc.value)


def test_brights_layout_read_as_local_stops_naming_source_bright(tmp_path):
    """Following the old offline message (source: local) kept BRIGHT's excluded_ids in the ranking, silently."""
    import pandas as pd

    for config, df in {"documents": pd.DataFrame({"id": ["a"], "content": ["x"]}),
                       "examples": pd.DataFrame({"id": ["0"], "query": ["q"], "gold_ids": [["a"]], "gold_ids_long": [["N/A"]],
                                                 "excluded_ids": [["b"]]})}.items():
        (tmp_path / config).mkdir()
        df.to_parquet(tmp_path / config / "biology-00000-of-00001.parquet")
    with pytest.raises(DataError, match="read it with `source: bright`") as exc:
        prepare_domain("b", {"source": "local", "root": str(tmp_path)}, "biology")
    assert exc.value.field == "negative_ids" and "excluded_ids" in str(exc.value)
    p = prepare_domain("b", {"source": "bright", "root": str(tmp_path)}, "biology")
    assert p.excluded == {} and p.report["problems"]["excluded_not_in_corpus"] == 1


def test_the_prepare_log_accounts_for_every_row(tmp_path, monkeypatch, caplog):
    from mmir.workflow import steps

    monkeypatch.chdir(tmp_path)
    root = beir(tmp_path / "b", qrels=HEADER + ROWS + "q7\td1\t1\nq8\td2\t1\nq7\td3\t1\n")
    ds = {"source": "beir", "root": str(root), "integrity": {"qrels_unknown_query": "warn"}}
    with caplog.at_level("INFO", logger="mmir"):
        report = steps.prepare("toy", ds, "toy", tmp_path / "out")
    balanced(report)
    lines = [r.getMessage() for r in caplog.records]
    assert "qrels rows: read 7, written 3, dropped 4: unknown_query 3 (e.g. q7, q8); not_relevant 1 (e.g. q1)" in lines
    assert "queries: read 3, written 2, dropped 1: unjudged 1 (e.g. q9)" in lines and "scorable queries: 2" in lines
    assert any(m.startswith("qrels_unknown_query: 3 (kept going") and "test.tsv, line 6" in m for m in lines)
    assert json.loads((tmp_path / "out" / "prepare.json").read_text())["qrels_rows"] == report["qrels_rows"]
