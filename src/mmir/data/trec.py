"""TREC collections: SGML-style documents and topics, and qrels (``qid iter docid rel``).

Documents and topics carry no layout: their text is the body without tags, runs of ASCII whitespace (space, tab,
newlines, ``\\v``, ``\\f``) collapsed to one space; other characters (U+0085, U+2028, U+00A0, ...) are kept. Qrels
fields are separated by spaces or tabs, lines by ``\\n`` (:mod:`mmir.data.lines`); ids are kept exactly. Files are
UTF-8 (optionally ``.gz``; a byte order mark is dropped); other bytes stop with the line and byte offset.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mmir.config.models import TrecDataset
from mmir.core.errors import DataError
from mmir.core.paths import resolve_path
from mmir.data.checks import Checks
from mmir.data.judgements import Judgement, attach
from mmir.data.lines import LineCounter, fields, numbered, read_text

if TYPE_CHECKING:
    from mmir.data.frames import SourceFrames

_DOC = re.compile(r"<DOC>(.*?)</DOC>", re.S | re.I)
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_LAYOUT = re.compile(r"[ \t\n\r\x0b\x0c]+")


def collapse(text: str) -> str:
    """``text`` with each run of ASCII whitespace as one space, none at either end."""
    return _LAYOUT.sub(" ", text).strip(" ")


def read_trec_documents(path: str | Path, lines: bool = False) -> Iterator[tuple]:
    """Yield ``(docno, text)`` from a TREC file or every file of a directory (sorted); with ``lines``, ``(docno, text,
    file, 1-based line of its <DOC>)``.

    Text is the body with tags removed and layout whitespace collapsed (:func:`collapse`). Raises DataError for a
    <DOC> without <DOCNO> or with an empty one (naming file and line).
    """
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    if not files:
        raise DataError(path, "no TREC document files found")
    for f in files:
        text = read_text(f)
        line_at = LineCounter(text)
        for m in _DOC.finditer(text):
            body, line = m.group(1), line_at(m.start())
            no = _DOCNO.search(body)
            docno = collapse(no.group(1)) if no else ""
            if not docno:
                raise DataError(f, f"<DOC> without {'a' if no else 'an empty'} <DOCNO>", field="DOCNO", line=line)
            content = collapse(_TAG.sub(" ", body[: no.start()] + body[no.end():]))
            yield (docno, content, str(f), line) if lines else (docno, content)


def read_trec_topics(path: str | Path, field: str = "title", lines: bool = False) -> list[tuple]:
    """``[(qid, text)]`` from a TREC topics file; ``field`` is title, desc or title+desc; with ``lines``,
    ``(qid, text, 1-based line of its <top>)``."""
    path = Path(path)
    text = read_text(path)
    line_at = LineCounter(text)
    topics = []
    for m in _TOP.finditer(text):
        body, line = m.group(1), line_at(m.start())
        num = re.search(r"<num>\s*(?:Number:)?\s*([^<\n]+)", body, re.I)
        if not num:
            raise DataError(path, "<top> without <num>", field="num", line=line)
        parts = {}
        for tag in ("title", "desc", "narr"):
            t = re.search(rf"<{tag}>(.*?)(?=<(?:/{tag}|title|desc|narr|/top)>|$)", body, re.S | re.I)
            if t:
                parts[tag] = collapse(re.sub(r"^\s*(Description|Narrative):", "", t.group(1)))
        wanted = ["title", "desc"] if field == "title+desc" else [field]
        qid, query = collapse(num.group(1)), " ".join(parts.get(w, "") for w in wanted).strip(" ")
        topics.append((qid, query, line) if lines else (qid, query))
    if not topics:
        raise DataError(path, "no <top> entries found")
    return topics


def read_qrels_rows(path: str | Path, blanks: list[int] | None = None) -> list[Judgement]:
    """The rows of a TREC qrels file in file order, each with its line (the blank lines skipped appended to
    ``blanks``). Raises DataError naming the line of a malformed entry, or a file with CR-only line ends."""
    path = Path(path)
    out = []
    for i, line in numbered(read_text(path), path, blanks):
        parts = fields(line)
        if len(parts) != 4:
            raise DataError(path, f"expected 'qid iter docid rel', got {len(parts)} field(s): {line[:80]!r}", line=i)
        try:
            rel = int(parts[3])
        except ValueError as exc:
            raise DataError(path, f"relevance {parts[3]!r} is not an integer", field="rel", line=i) from exc
        out.append(Judgement(parts[0], parts[2], rel, str(path), line=i))
    return out


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels as ``{qid: {docid: rel}}`` (a repeated pair: the last line). Raises DataError naming the line of
    a malformed entry."""
    qrels: dict[str, dict[str, int]] = {}
    for j in read_qrels_rows(path):
        qrels.setdefault(j.qid, {})[j.doc_id] = j.rel
    return qrels


def write_qrels(path: str | Path, qrels: dict[str, dict[str, int]]) -> None:
    """Write TREC qrels atomically, sorted by qid then docid."""
    from mmir.core.io import write_text

    lines = [f"{q} 0 {d} {r}" for q in sorted(qrels) for d, r in sorted(qrels[q].items())]
    write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def read_frames(ds: TrecDataset, domain: str, raw_root: str | Path | None = None) -> SourceFrames:
    """The documents, topics and qrels of a TREC collection as MM-BRIGHT tables (graded qrels kept, each row's line
    named; the topics joined to the qrels by :func:`mmir.data.judgements.attach`).

    Raises:
        DataError: a malformed document, topic or qrels line (file, line, field), a qrels row naming an unknown topic.
    """
    from mmir.data.frames import SourceFrames, docs_frame, examples_frame  # pandas: not for the qrels readers

    root = resolve_path(ds.root)
    corpus_path, topics_path, qrels_path = root / ds.corpus, root / ds.topics, root / ds.qrels
    checks = Checks(ds.integrity.model_dump(), str(root))
    docs = docs_frame(((d, t, f, i, n, "DOCNO") for i, (d, t, f, n) in enumerate(read_trec_documents(corpus_path, lines=True))),
                      str(corpus_path))
    blanks: list[int] = []
    judgements = read_qrels_rows(qrels_path, blanks)
    checks.blank_lines(qrels_path, blanks)
    topics = [{"id": qid, "query": text, "_file": str(topics_path), "_row": i, "_line": n, "_query_field": ds.topic_field,
               "_id_field": "num"}
              for i, (qid, text, n) in enumerate(read_trec_topics(topics_path, ds.topic_field, lines=True))]
    topics, graded = attach(topics, judgements, checks, str(topics_path), [str(qrels_path)])
    return SourceFrames({"docs": docs, "ex": examples_frame(topics), "exm": None}, root, graded, {}, checks)
