"""A query's multimodal knowledge base (spec §1) from a retrieval run over an MM-BRIGHT-layout prepared domain.

Pages are those of the top-N retrieved documents, images the pages' document images. Tables
(``data/prepared/<dataset>/<domain>/``): ``corpus.parquet`` (``doc_id, text``; page key by
:func:`mmir.data.multimodal.doc_base_key`) and ``images.parquet`` (``path, alt, bytes, ok``; page key by
:func:`mmir.data.multimodal.image_base_key`). Rules: :func:`build_knowledge_base`. Images start unscored;
selection keeps only scored ones (spec §3 step 4). README: "M2RAG".
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from mmir.benchmarks.m2rag.records import (
    Chunk,
    CountReport,
    ImageItem,
    M2RAGQuery,
    Webpage,
)
from mmir.core.errors import DataError
from mmir.data.multimodal import doc_base_key, image_base_key
from mmir.retrieval.runs import Run, read_run

PageScope = Literal["page", "retrieved"]
_PASSAGE_N = re.compile(r"_(\d+)\.txt$")
CHUNK_SEPARATOR = "\n\n"


@dataclass
class PreparedDomain:
    """The two tables of a prepared domain the knowledge base needs (``corpus``, ``images``), indexed by page key."""

    corpus: pd.DataFrame
    images: pd.DataFrame
    name: str = "domain"
    _text: dict[str, str] = field(init=False, repr=False)
    _pages: dict[str, list[str]] = field(init=False, repr=False)
    _page_images: dict[str, list[dict]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for col in ("doc_id", "text"):
            if col not in self.corpus.columns:
                raise DataError(f"{self.name}/corpus.parquet", f"missing column '{col}'")
        for col in ("path", "bytes"):
            if col not in self.images.columns:
                raise DataError(f"{self.name}/images.parquet", f"missing column '{col}'")
        self._text = dict(zip(self.corpus["doc_id"].astype(str), self.corpus["text"].astype(str), strict=True))
        self._pages = {}
        for d in self._text:
            self._pages.setdefault(page_key(d), []).append(d)
        for docs in self._pages.values():
            docs.sort(key=passage_index)
        self._page_images = {}
        for rec in self.images.to_dict("records"):
            key = image_base_key(str(rec["path"]))
            if key is not None:
                self._page_images.setdefault(key, []).append(rec)
        for recs in self._page_images.values():
            recs.sort(key=lambda r: _image_sort_key(str(r["path"])))

    @classmethod
    def from_dir(cls, prepared_dir: str | Path) -> PreparedDomain:
        """Read ``corpus.parquet`` and ``images.parquet`` (absent = no images) of a prepared domain.

        Raises:
            DataError: ``corpus.parquet`` is missing or a required column is absent.
        """
        d = Path(prepared_dir)
        corpus_path = d / "corpus.parquet"
        if not corpus_path.is_file():
            raise DataError(str(corpus_path), "prepared corpus not found (run the prepare step)")
        corpus = pd.read_parquet(corpus_path, columns=["doc_id", "text"])
        img_path = d / "images.parquet"
        if img_path.is_file():
            images = pd.read_parquet(img_path)
        else:
            images = pd.DataFrame(columns=["path", "alt", "bytes", "ok"])
        return cls(corpus=corpus, images=images, name=str(d))

    def text(self, doc_id: str) -> str | None:
        """The passage text, or ``None`` for an unknown id."""
        return self._text.get(doc_id)

    def page_docs(self, key: str) -> list[str]:
        """The page's document ids in passage order."""
        return list(self._pages.get(key, []))

    def page_images(self, key: str) -> list[dict]:
        """The page's image rows (dicts) in path order."""
        return list(self._page_images.get(key, []))


def page_key(doc_id: str) -> str:
    """Page key of a document: its base key, or the id itself when it has none."""
    return doc_base_key(doc_id) or doc_id


def passage_index(doc_id: str) -> int:
    """Passage number ``n`` of ``<...>_<n>.txt`` (0 when absent)."""
    m = _PASSAGE_N.search(doc_id)
    return int(m.group(1)) if m else 0


def _image_sort_key(path: str) -> tuple:
    nums = [int(x) for x in re.findall(r"\d+", path.rsplit("_", 1)[-1])]
    return (path.rsplit("/", 1)[0], nums, path)


@dataclass
class KnowledgeBaseReport(CountReport):
    """Counts over the knowledge bases built (``queries``, ``queries_without_ranking``, ``docs_unknown``,
    ``pages``, ``passages``, ``images``, ``images_not_ok``, ``images_anchored``, ``images_unanchored``,
    ``images_passage_not_in_kb``) with up to five examples each."""


@dataclass(frozen=True)
class ImagePlacement:
    """How a knowledge base takes its page images.

    Attributes:
        passages: image path -> doc id of the passage the image belongs to, where known.
        score: give every image this ``final_score``; default ``None`` = unscored.
        max_per_page: cap per page, anchored images first (``None`` = all; others ``images_over_page_limit``).
    """

    passages: Mapping[str, str] | None = None
    score: float | None = None
    max_per_page: int | None = None


def build_knowledge_base(qid: str, query: str, ranking: Sequence[tuple[str, float]], domain: PreparedDomain, *,
                         top_n: int = 5, page_scope: PageScope = "page", images: ImagePlacement = ImagePlacement(),
                         report: KnowledgeBaseReport | None = None) -> M2RAGQuery:
    """The knowledge base of one query.

    Pages in the order of their best-ranked document among the first ``top_n``; each passage one
    :class:`~mmir.benchmarks.m2rag.records.Chunk` ending in a blank line; page images with ``ok``, in path order,
    anchored after their passage when ``images.passages`` knows it, else unanchored.

    Args:
        ranking: ``[(doc_id, score), ...]`` in rank order.
        page_scope: ``"page"`` (all passages of each page) or ``"retrieved"`` (only the retrieved ones).
        images: anchors, score and per-page cap of the page images (:class:`ImagePlacement`).

    Returns:
        :class:`~mmir.benchmarks.m2rag.records.M2RAGQuery` (no auxiliary images).

    Raises:
        ValueError: ``top_n < 1`` or an unknown ``page_scope``.
    """
    if top_n < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    if page_scope not in ("page", "retrieved"):
        raise ValueError(f"page_scope must be 'page' or 'retrieved', got {page_scope!r}")
    rep = report if report is not None else KnowledgeBaseReport()
    image_passages = images.passages or {}
    image_score, max_page_images = images.score, images.max_per_page
    rep.add("queries")
    top: dict[str, float] = {}
    for doc_id, score in ranking:
        if len(top) >= top_n:
            break
        if doc_id in top:
            continue
        if domain.text(doc_id) is None:
            rep.add("docs_unknown", example=f"{qid}: {doc_id}")
            continue
        top[doc_id] = float(score)
    if not top:
        rep.add("queries_without_ranking", example=qid)
    page_order: list[str] = []
    for doc_id in top:
        key = page_key(doc_id)
        if key not in page_order:
            page_order.append(key)
    pages = []
    for rank, key in enumerate(page_order):
        docs = domain.page_docs(key) if page_scope == "page" else sorted(
            (d for d in top if page_key(d) == key), key=passage_index)
        if not docs:  # a document whose id has no page key
            docs = [d for d in top if page_key(d) == key]
        chunks = [Chunk(split_id=i, text=_chunk_text(domain.text(d) or ""), doc_id=d, retrieval_score=top.get(d))
                  for i, d in enumerate(docs)]
        rep.add("pages")
        rep.add("passages", len(chunks))
        by_doc = {c.doc_id: c for c in chunks}
        rows = []
        for rec in domain.page_images(key):
            ok = rec.get("ok", True)
            if ok is not None and not bool(ok):
                rep.add("images_not_ok", example=str(rec["path"]))
            else:
                rows.append(rec)
        if max_page_images is not None and len(rows) > max_page_images:
            first = sorted(range(len(rows)), key=lambda i: (image_passages.get(str(rows[i]["path"])) not in by_doc, i))
            keep = sorted(first[:max_page_images])
            rep.add("images_over_page_limit", len(rows) - len(keep), example=f"{qid}: page {key}")
            rows = [rows[i] for i in keep]
        images = []
        for rec in rows:
            path = str(rec["path"])
            image_id = len(images)
            anchor_doc = image_passages.get(path)
            chunk = by_doc.get(anchor_doc) if anchor_doc else None
            if anchor_doc and chunk is None:
                rep.add("images_passage_not_in_kb", example=f"{path} -> {anchor_doc}")
                if page_scope == "retrieved":
                    continue
            data = rec.get("bytes")
            if isinstance(data, dict):  # hub Image feature layout
                data = data.get("bytes")
            alt = rec.get("alt")
            item = ImageItem(image_id=image_id, cached_image_url=path, image_url=path,
                             data=bytes(data) if isinstance(data, (bytes, bytearray)) else None,
                             alt=alt if isinstance(alt, str) else "", final_score=image_score,
                             width=_int(rec.get("width")), height=_int(rec.get("height")))
            if chunk is not None:
                item.split_id, item.anchored = chunk.split_id, True
                chunk.text = _add_placeholder(chunk.text, image_id)
                chunk.image_ids.append(image_id)
                rep.add("images_anchored")
            else:
                item.split_id, item.anchored = None, False
                rep.add("images_unanchored")
            images.append(item)
        rep.add("images", len(images))
        title = (domain.text(docs[0]) or key).strip().split("\n", 1)[0][:200] if docs else key
        pages.append(Webpage(webpage_id=rank, title=title, url=key, chunks=chunks, images=images))
    return M2RAGQuery(query_id=str(qid), content=query, webpages=pages, aux_images=[])


def _int(v) -> int | None:
    try:
        return int(v) if v is not None and v == v else None
    except (TypeError, ValueError):
        return None


def _chunk_text(text: str) -> str:
    return text.rstrip() + CHUNK_SEPARATOR


def _add_placeholder(text: str, image_id: int) -> str:
    return text.rstrip() + f"\n<IMAGE_PLACEHOLDER>[{image_id}]" + CHUNK_SEPARATOR


def build_knowledge_bases(run: Run | str | Path, topics: Mapping[str, str], domain: PreparedDomain, *,
                          top_n: int = 5, page_scope: PageScope = "page", images: ImagePlacement = ImagePlacement(),
                          qids: Iterable[str] | None = None) -> tuple[list[M2RAGQuery], KnowledgeBaseReport]:
    """Knowledge bases for every topic (or ``qids``); a topic missing from the run gets none (``queries_without_ranking``).

    Returns:
        ``(queries, report)``.

    Raises:
        DataError: a run file with bad lines; a requested qid missing from ``topics``.
    """
    ranking = read_run(run) if isinstance(run, (str, Path)) else run
    rep = KnowledgeBaseReport()
    out = []
    for qid in (list(qids) if qids is not None else list(topics)):
        if qid not in topics:
            raise DataError("topics", f"query id {qid!r} has no query text")
        out.append(build_knowledge_base(qid, topics[qid], ranking.get(qid, []), domain, top_n=top_n,
                                        page_scope=page_scope, images=images, report=rep))
    return out, rep


# ------------------------------------------------------------------------------------ image placement
def load_image_captions(tsv: str | Path) -> dict[str, str]:
    """``{image path: caption}`` from ``meta/<domain>.document_images.tsv`` (empty captions left out).

    Raises:
        DataError: the file lacks ``path``/``caption`` or cannot be read.
    """
    p = Path(tsv)
    try:
        with open(p, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            if not reader.fieldnames or not {"path", "caption"} <= set(reader.fieldnames):
                raise DataError(str(p), f"expected columns 'path' and 'caption', got {reader.fieldnames}")
            return {r["path"]: r["caption"] for r in reader if r.get("caption")}
    except OSError as e:
        raise DataError(str(p), f"cannot read: {e}") from e


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def image_passages_from_captions(domain: PreparedDomain, captions: Mapping[str, str], *, probe_chars: int = 60,
                                 min_chars: int = 20) -> dict[str, str]:
    """``{image path: doc id}`` for images whose caption probe (first ``probe_chars``, case-folded) is in exactly one passage."""
    out: dict[str, str] = {}
    for path, caption in captions.items():
        probe = _norm(caption)[:probe_chars]
        key = image_base_key(path)
        if key is None or len(probe) < min_chars:
            continue
        hits = [d for d in domain.page_docs(key) if probe in _norm(domain.text(d) or "")]
        if len(hits) == 1:
            out[path] = hits[0]
    return out


__all__ = [
    "CHUNK_SEPARATOR", "ImagePlacement", "KnowledgeBaseReport", "PageScope", "PreparedDomain", "build_knowledge_base",
    "build_knowledge_bases", "image_passages_from_captions", "load_image_captions", "page_key", "passage_index",
]
