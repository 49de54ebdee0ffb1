"""A report-writing baseline for MMDR tasks: retrieve, then write a cited report with a generator backend.

Sources: the first ``k`` items of the task's query in a TREC run, then the question's images (Figure 1, 2, ...),
each with a ``mmir://`` URI. Prompt ``prompts/report_baseline_v1.txt``. Assembly is deterministic
(:func:`assemble_report`): the model's own references are cut, optional post-hoc citations (ALCE) by
content-word overlap >= ``min_overlap``, figure blocks at the end of Visual Integration, then ``References:``.
README: "MMDeepResearch-Bench".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mmir.benchmarks.mmdr.build_tasks import BuiltTask
from mmir.benchmarks.mmdr.judge import MMDR_PROMPTS
from mmir.benchmarks.mmdr.local import LocalDomain, mmir_uri
from mmir.benchmarks.mmdr.report_parser import CITATION_RE, url_pattern
from mmir.config.models import MMDRConfig
from mmir.core.errors import DataError
from mmir.llm.client import LLMClient
from mmir.llm.prompts import PromptTemplate

PROMPT = "report_baseline_v1"
NO_TEXT = "(no text found in the image)"

_REF_HEAD = re.compile(
    r"(?im)^[ \t]{0,3}(?:#{1,6}[ \t]*)?[*_]*[ \t]*(?:references?|reference list|sources|bibliography|works cited|citations)"
    r"[ \t]*[*_]*[ \t]*:?[ \t]*[*_]*[ \t]*$"
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*$")
_SENT_SEP = re.compile(r"((?<=[。！？!?.])\s+|\n{2,})")
_FIGURE_REF = re.compile(r"\bfig(?:ure|\.)?\s*(\d+)", re.IGNORECASE)
_TRAILING = re.compile(r"([.!?。！？:;]*)(\s*)$")
_ANY_URL = url_pattern(("http", "https", "file", "mmir"))


@dataclass
class Source:
    """One numbered source of a report (``kind`` ``"document"`` or ``"image"``; ``figure`` set for question images)."""

    n: int
    kind: str
    item_id: str
    uri: str
    text: str
    figure: int | None = None
    image: bytes | None = None


def load_template() -> PromptTemplate:
    """The writer prompt (``prompts/report_baseline_v1.txt`` of :data:`~mmir.benchmarks.mmdr.judge.MMDR_PROMPTS`)."""
    return MMDR_PROMPTS.get(PROMPT)


def gather_sources(bt: BuiltTask, dom: LocalDomain, run: dict[str, list[tuple[str, float]]] | None, k: int,
                   image_text: Sequence[str], run_file: str | None = None) -> list[Source]:
    """The numbered sources of a task: the run's first ``k`` items for its query, then the question's images.

    Raises:
        DataError: a run item is neither a document nor an image of the domain (names the run file and query).
    """
    out: list[Source] = []
    seen: set[str] = set()
    items = [d for d, _ in (run or {}).get(bt.topic_qid, [])[:k]]
    for it in items:
        try:
            evidence = dom.index.item(it)
        except KeyError as e:
            raise DataError(str(run_file or "run"), f"query {bt.topic_qid}: {e.args[0]}", field="docid") from e
        for e in evidence:
            if e.id in seen:
                continue
            seen.add(e.id)
            if e.image is None:
                out.append(Source(len(out) + 1, "document", e.id, mmir_uri(bt.dataset, e.id), str(e.text)))
            else:
                out.append(Source(len(out) + 1, "image", e.id, mmir_uri(bt.dataset, e.id),
                                  dom.describe(e.id, image_text) or NO_TEXT, image=bytes(e.image)))
    for i, p in enumerate(bt.image_paths, 1):
        img = dom.index.image_bytes.get(p)
        out.append(Source(len(out) + 1, "image", p, mmir_uri(bt.dataset, p), dom.describe(p, image_text) or NO_TEXT,
                          figure=i, image=None if img is None else bytes(img)))
    return out


def report_messages(template: PromptTemplate, question: str, sources: Sequence[Source], *, evidence_chars: int = 6000,
                    images: bool = False) -> list[dict[str, Any]]:
    """Chat messages for one report. Retrieved sources share ``evidence_chars`` characters equally (each cut
    at its share, at least 200); question images are listed as figures with their text (and attached as
    image parts when ``images``)."""
    retrieved = [s for s in sources if s.figure is None]
    figures = [s for s in sources if s.figure is not None]
    share = max(200, evidence_chars // max(1, len(retrieved)))
    src_lines = []
    for s in retrieved:
        label = f"document {s.item_id}" if s.kind == "document" else f"image {s.item_id}, as text"
        src_lines.append(f"[{s.n}] ({label})\n{s.text[:share]}")
    fig_lines = [f"Figure {s.figure} (cite it as [{s.n}]): {s.text}" for s in figures]
    text = template.render(question=question.strip(), images="\n".join(fig_lines) or "(none)",
                           sources="\n\n".join(src_lines) or "(no sources were found)")
    if not images:
        return [{"role": "user", "content": text}]
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image", "image": s.image} for s in figures if s.image is not None]
    return [{"role": "user", "content": parts}]


def strip_references(body: str) -> tuple[str, bool]:
    """``body`` without a references list the model wrote (from its first header line on); ``(text, cut)``."""
    m = _REF_HEAD.search(body or "")
    if not m:
        return (body or "").rstrip(), False
    return body[: m.start()].rstrip(), True


def attach_citations(body: str, sources: Sequence[Source], *, min_overlap: float = 0.3, min_words: int = 4,
                     tokenize=None) -> tuple[str, dict[str, int]]:
    """Post-hoc citations (see the module docstring): ``(body with markers added, counts)``; counts
    ``attached_sources`` and ``attached_figures``. Separators, headings and sentences that already cite a
    valid number are kept as they are; the marker goes before the sentence's final punctuation."""
    from mmir.benchmarks.mmdr.claims import is_image_dependent_claim
    from mmir.retrieval.bm25 import make_tokenizer

    tok = tokenize or make_tokenizer("en", "english")
    by_n = {s.n: s for s in sources}
    retrieved = [s for s in sources if s.figure is None]
    figures = {s.figure: s for s in sources if s.figure is not None}
    doc_words = dict(zip([s.n for s in retrieved], (set(t) for t in tok([s.text for s in retrieved])))) if retrieved else {}
    pieces = _SENT_SEP.split(body or "")
    counts = {"attached_sources": 0, "attached_figures": 0}
    for i in range(0, len(pieces), 2):
        sent = pieces[i]
        plain = sent.strip()
        if not plain or _HEADING.match(plain) or plain.startswith("!["):
            continue
        if any(int(c) in by_n for c in CITATION_RE.findall(plain)):
            continue
        words = set(tok([plain])[0])
        n = None
        m = _FIGURE_REF.search(plain)
        if m and int(m.group(1)) in figures:
            n, kind = figures[int(m.group(1))].n, "attached_figures"
        elif len(figures) == 1 and is_image_dependent_claim(plain):
            n, kind = next(iter(figures.values())).n, "attached_figures"
        elif len(words) >= min_words and doc_words:
            best = max(doc_words, key=lambda k: (len(words & doc_words[k]) / len(words), -k))
            if len(words & doc_words[best]) / len(words) >= min_overlap:
                n, kind = best, "attached_sources"
        if n is None:
            continue
        t = _TRAILING.search(sent)
        head = sent[: t.start()] if t else sent
        pieces[i] = f"{head.rstrip()} [{n}]{t.group(1) if t else ''}{t.group(2) if t else ''}"
        counts[kind] += 1
    return "".join(pieces), counts


def _insert_figures(body: str, block: str) -> str:
    """Place ``block`` at the end of the Visual Integration section, else before the Conclusion heading,
    else at the end."""
    lines = body.split("\n")
    heads = [(i, m.group(1).lower()) for i, line in enumerate(lines) if (m := _HEADING.match(line))]
    vis = next((i for i, h in heads if "visual" in h), None)
    if vis is not None:
        nxt = next((i for i, _ in heads if i > vis), None)
        at = len(lines) if nxt is None else nxt
    else:
        at = next((i for i, h in heads if "conclusion" in h), len(lines))
    before, after = "\n".join(lines[:at]).rstrip(), "\n".join(lines[at:]).strip()
    return "\n\n".join(x for x in (before, block, after) if x)


def assemble_report(body: str, sources: Sequence[Source], *, min_report_chars: int = 1000, posthoc: bool = True,
                    min_overlap: float = 0.3) -> tuple[str, dict[str, Any]]:
    """The final report and what the model did: ``(report, stats)`` (citation counts, figures, lengths)."""
    text, cut = strip_references(body)
    by_n = {s.n: s for s in sources}
    markers = [int(c) for c in CITATION_RE.findall(text)]
    valid = [n for n in markers if n in by_n]
    invalid = sorted({n for n in markers if n not in by_n})
    figures = [s for s in sources if s.figure is not None]
    model_fig = len([s for s in figures if s.n in set(valid)])
    model_urls = len(_ANY_URL.findall(text))
    added = {"attached_sources": 0, "attached_figures": 0}
    if posthoc:
        text, added = attach_citations(text, sources, min_overlap=min_overlap)
    cited = sorted({int(c) for c in CITATION_RE.findall(text) if int(c) in by_n})
    blocks = [f"Figure {s.figure}: image {s.figure} given with the question [{s.n}]\n![Figure {s.figure}]({s.uri})" for s in figures]
    report = _insert_figures(text, "\n\n".join(blocks)) if blocks else text
    ref_numbers = sorted(set(cited) | {s.n for s in figures})
    report = report.rstrip() + "\n\nReferences:\n" + "".join(f"[{n}] {by_n[n].uri}\n" for n in ref_numbers)
    retrieved = [s.n for s in sources if s.figure is None]
    stats = {
        "body_chars": len(text), "model_wrote_references": cut, "citation_markers": len(markers),
        "citations_valid": len(valid), "citations_invalid": invalid,
        "figures_cited_by_model": model_fig, "urls_written_by_model": model_urls,
        "posthoc_sources": added["attached_sources"], "posthoc_figures": added["attached_figures"],
        "sources_cited": len([n for n in cited if n in retrieved]), "sources_uncited": len([n for n in retrieved if n not in cited]),
        "figures_appended": len(figures), "references": len(ref_numbers),
        "report_chars": len(report), "under_min_chars": len(report) < min_report_chars,
    }
    return report, stats


def write_report(bt: BuiltTask, dom: LocalDomain, run: dict | None, client: LLMClient, template: PromptTemplate,
                 mmdr: MMDRConfig, *, min_report_chars: int, run_file: str | None = None) -> tuple[str, dict[str, Any]]:
    """Write one report with the writer settings of ``mmdr`` (k, image_text, evidence_chars, images, report_max_tokens,
    report_temperature, seed, posthoc_citations, posthoc_min_overlap); a failed generation gives an empty body and
    ``status = "failed"``, never raised.

    Returns:
        ``(report, record)`` (qid, sources, :func:`assemble_report` stats, status, tokens).
    """
    sources = gather_sources(bt, dom, run, mmdr.k, mmdr.image_text, run_file)
    msgs = report_messages(template, bt.task.text, sources, evidence_chars=mmdr.evidence_chars, images=mmdr.images)
    r = client.call(msgs, template, label="report", context={"qid": bt.task.qid}, temperature=mmdr.report_temperature,
                    max_tokens=mmdr.report_max_tokens, seed=mmdr.seed)
    ok = r.ok
    body = r.text if ok else ""
    report, stats = assemble_report(body, sources, min_report_chars=min_report_chars, posthoc=mmdr.posthoc_citations,
                                    min_overlap=mmdr.posthoc_min_overlap)
    record = {
        "qid": bt.task.qid, "topic_qid": bt.topic_qid, "dataset": bt.dataset, "domain": bt.domain,
        "sources": [{k_: v for k_, v in asdict(s).items() if k_ not in ("text", "image")} for s in sources],
        **stats, "status": "ok" if ok else "failed", "error": None if ok else r.error,
        "cached": r.cached, "finish_reason": r.finish_reason if ok else None,
        "completion_tokens": r.completion_tokens if ok else None,
    }
    return report, record
