"""TREC collections: SGML-style documents and topics, and qrels (``qid iter docid rel``)."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from pathlib import Path

from mmir.core.errors import DataError

_DOC = re.compile(r"<DOC>(.*?)</DOC>", re.S | re.I)
_DOCNO = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)


def _open_text(path: Path) -> str:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def read_trec_documents(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield ``(docno, text)`` from a TREC file or every file of a directory (sorted).

    Text is the body with tags removed and whitespace collapsed. Raises DataError for a <DOC> without
    <DOCNO> (naming file and line).
    """
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    if not files:
        raise DataError(path, "no TREC document files found")
    for f in files:
        text = _open_text(f)
        for m in _DOC.finditer(text):
            body = m.group(1)
            no = _DOCNO.search(body)
            if not no:
                raise DataError(f, f"<DOC> without <DOCNO> at line {_line_of(text, m.start())}", field="DOCNO")
            content = _TAG.sub(" ", body[: no.start()] + body[no.end() :])
            yield no.group(1).strip(), " ".join(content.split())


def read_trec_topics(path: str | Path, field: str = "title") -> list[tuple[str, str]]:
    """``[(qid, text)]`` from a TREC topics file; ``field`` is title, desc or title+desc."""
    path = Path(path)
    text = _open_text(path)
    topics = []
    for m in _TOP.finditer(text):
        body = m.group(1)
        num = re.search(r"<num>\s*(?:Number:)?\s*([^<\n]+)", body, re.I)
        if not num:
            raise DataError(path, f"<top> without <num> at line {_line_of(text, m.start())}", field="num")
        parts = {}
        for tag in ("title", "desc", "narr"):
            t = re.search(rf"<{tag}>(.*?)(?=<(?:/{tag}|title|desc|narr|/top)>|$)", body, re.S | re.I)
            if t:
                parts[tag] = " ".join(re.sub(r"^\s*(Description|Narrative):", "", t.group(1)).split())
        wanted = ["title", "desc"] if field == "title+desc" else [field]
        topics.append((num.group(1).strip(), " ".join(parts.get(w, "") for w in wanted).strip()))
    if not topics:
        raise DataError(path, "no <top> entries found")
    return topics


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels as ``{qid: {docid: rel}}``. Raises DataError naming the line of a malformed entry."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DataError(path, f"line {i}: expected 'qid iter docid rel', got {line!r}")
        try:
            rel = int(parts[3])
        except ValueError as exc:
            raise DataError(path, f"line {i}: relevance {parts[3]!r} is not an integer", field="rel") from exc
        qrels.setdefault(parts[0], {})[parts[2]] = rel
    return qrels


def write_qrels(path: str | Path, qrels: dict[str, dict[str, int]]) -> None:
    """Write TREC qrels atomically, sorted by qid then docid."""
    from mmir.core.io import write_text

    lines = [f"{q} 0 {d} {r}" for q in sorted(qrels) for d, r in sorted(qrels[q].items())]
    write_text(path, "\n".join(lines) + ("\n" if lines else ""))
