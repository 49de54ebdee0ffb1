"""What a reranker sees of a task's queries and candidates: text (documents' text, images as their image text, a
pair's both) and, for a VLM, image bytes (the query's images in order, a candidate's image on Tasks 3-4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.retrieval.items import ImageText, Items, PairBudget, task_items, task_queries


@dataclass(frozen=True)
class Candidate:
    """One item to rerank: its run id, its text, its image (encoded bytes; ``None`` without one)."""

    id: str
    text: str
    image: bytes | None = None


@dataclass(frozen=True)
class RerankQuery:
    """A query as the reranker sees it: its text and its images (encoded bytes, in query order)."""

    qid: str
    text: str
    images: list[bytes] = field(default_factory=list)


class TaskCandidates:
    """The queries and items of one task in one prepared domain, read once.

    Args:
        image_text: text standing for images (the captioner's), needed when the task ranks images or pairs.
        with_images: read image bytes (a VLM reranker).
        variants: a ``qid, query`` parquet whose text replaces each topic's (the query variants of a Task 1 ablation
            system: the reranker sees the text its first stage searched with).
    """

    def __init__(self, task: str, prep: str | Path, image_text: ImageText | None = None, with_images: bool = False,
                 variants: str | Path | None = None):
        self.task, self.prep = task, Path(prep)
        self.items: Items = task_items(task, prep)
        self._index = {item: i for i, item in enumerate(self.items.ids)}
        self.queries = task_queries(task, prep, variants)
        self.image_text = image_text
        self.with_images = with_images
        self._corpus: dict[str, str] = {}
        if any(self.items.doc_ids):
            c = pd.read_parquet(self.prep / "corpus.parquet", columns=["doc_id", "text"])
            self._corpus = dict(zip(c["doc_id"], c["text"]))
        if any(self.items.image_paths) and image_text is None:
            raise ValueError(f"{task} ranks images: a reranker needs their image text (captions)")
        self._corpus_images: dict[str, bytes] = {}
        self._query_images: dict[str, bytes] = {}
        if with_images and any(self.items.image_paths):
            im = pd.read_parquet(self.prep / "images.parquet", columns=["path", "bytes", "ok"])
            self._corpus_images = {p: bytes(b) for p, b, ok in im.itertuples(index=False) if ok}
        if with_images and (self.prep / "query_images.parquet").is_file():
            im = pd.read_parquet(self.prep / "query_images.parquet", columns=["path", "bytes", "ok"])
            self._query_images = {p: bytes(b) for p, b, ok in im.itertuples(index=False) if ok}

    @property
    def item_ids(self) -> set[str]:
        return set(self._index)

    def query(self, qid: str) -> RerankQuery:
        """The query ``qid`` (its decodable images only, in order)."""
        i = self.queries.qids.index(qid)
        paths = self.queries.image_paths[i] if self.queries.image_paths else []
        text = self.queries.texts[i]
        if self.image_text is not None and not self.with_images:  # a text reranker sees query images as image text
            text = "\n\n".join([text, *(self.image_text.captions[p] for p in paths if self.image_text.captions.get(p))])
        return RerankQuery(qid, text, [self._query_images[p] for p in paths if p in self._query_images])

    def candidates(self, ids: list[str]) -> list[Candidate]:
        """The candidates of ``ids`` (items of this task), in the given order."""
        out, join = [], PairBudget().join
        for i in ids:
            r = self._index[i]
            d, p = self.items.doc_ids[r], self.items.image_paths[r]
            text = join(self._corpus[d] if d else "", self.image_text.of(p) if p else "")
            out.append(Candidate(i, text, self._corpus_images.get(p) if p else None))
        return out
