"""Qrels rows with their provenance, joined to a source's queries under one policy for every source.

A :class:`Judgement` is one qrels row as read (``beir`` TSV/parquet, ``trec`` and BRIGHT's anserini qrels files,
``ir_datasets``' ``qrels_iter``) with the file and the 1-based line (text files) or 0-based row (parquet, iterator
positions) it came from, so that a later check (unknown document: ``missing_gold``) names the qrels file and line,
not the queries file. :func:`attach` applies the qrels checks and counts each row it does not pass on, by reason:

| row | what happens |
|---|---|
| names a query absent from the queries | ``integrity.qrels_unknown_query`` (error, as BEIR's loader raises; warn drops it) |
| repeats a (query, document) pair with the same grade | counted (``duplicate``), kept once |
| repeats a pair with another grade | ``integrity.qrels_conflicting_grades`` (error; warn keeps the last, as BEIR's and |
|  | ir_datasets' loaders do) |
| grade <= 0 | counted (``not_relevant``): not in the prepared qrels, scored as unjudged |

A query with at least one row is judged (``_judged``); what happens to the others is ``integrity.unjudged_queries``
(:func:`mmir.data.prepare.read_queries`).
"""

from __future__ import annotations

from typing import NamedTuple

from mmir.core.errors import DataError
from mmir.data.checks import Checks, NearMiss


class Judgement(NamedTuple):
    """One qrels row: ``qid``, ``doc_id`` (as read; ids are compared exactly), ``rel`` (the grade), ``file`` and the
    place: ``line`` (1-based, text files) or ``row`` (0-based, tables and iterators)."""

    qid: str
    doc_id: str
    rel: int
    file: str
    row: int | None = None
    line: int | None = None

    def place(self) -> str:
        """``qrels/test.tsv, line 551`` or ``irds://x/qrels, row 11``."""
        return f"{self.file}, line {self.line}" if self.line is not None else f"{self.file}, row {self.row}"


def attach(queries: list[dict], judgements: list[Judgement], checks: Checks, queries_where: str,
           qrels_files: list[str]) -> tuple[list[dict], dict]:
    """The query records (``id`` and anything else) with ``gold_ids`` (the relevant documents, in qrels order),
    ``_gold_at`` (each gold id's ``(file, row, line)``) and ``_judged``; and the graded qrels of the gold ids
    ``{qid: {doc_id: rel}}``. ``queries_where`` names the queries in messages (a file, ``irds://<id>/queries``),
    ``qrels_files`` the qrels read (named in prepare.json, and when they hold no row).

    Raises:
        DataError: a qrels row naming an unknown query, or conflicting grades, under the ``error`` policies
            (the qrels file, its line and field; a near miss by surrounding whitespace is named).
    """
    qids = {q["id"] for q in queries}
    near = NearMiss(qids)
    checks.query_files.append(queries_where)
    checks.qrels_files += [str(f) for f in qrels_files if str(f) not in checks.qrels_files]
    empty = "" if qids else f" ({queries_where} holds no query)"
    by_query: dict[str, dict[str, Judgement]] = {}
    for j in judgements:
        checks.read("qrels")
        if j.qid not in qids:
            checks.problem("qrels_unknown_query", DataError(
                j.file, f"query {j.qid!r} is not in {queries_where}{empty}{near(j.qid, queries_where)} (integrity.qrels_unknown_query: "
                        "warn drops such rows, counted)", j.row, "query-id", j.line))
            checks.drop("qrels", "unknown_query", ident=j.qid)
            continue
        seen = by_query.setdefault(j.qid, {})
        prev = seen.get(j.doc_id)
        if prev is not None:
            if prev.rel != j.rel:
                checks.problem("qrels_conflicting_grades", DataError(
                    j.file, f"query {j.qid!r}, document {j.doc_id!r} judged {j.rel} here and {prev.rel} at {prev.place()} "
                            "(integrity.qrels_conflicting_grades: warn keeps the last)", j.row, "score", j.line))
            checks.drop("qrels", "duplicate", ident=j.qid)
        seen[j.doc_id] = j
    out, graded = [], {}
    for q in queries:
        rows = by_query.get(q["id"])
        gold = [j for j in (rows or {}).values() if j.rel > 0]
        if rows and len(gold) < len(rows):
            checks.drop("qrels", "not_relevant", len(rows) - len(gold), ident=q["id"])
        if gold:
            graded[q["id"]] = {j.doc_id: j.rel for j in gold}
        out.append(q | {"gold_ids": [j.doc_id for j in gold], "_gold_at": [(j.file, j.row, j.line) for j in gold],
                        "_judged": rows is not None})
    return out, graded
