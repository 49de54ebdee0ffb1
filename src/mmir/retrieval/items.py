"""What each task ranks and what its queries are, for any retriever (MM-BRIGHT §3.1, §4.1).

Items (store row = item index): Tasks 1-2 the corpus documents, Task 3 the decodable corpus images, Task 4 the
(document, image) pairs of ``pairs.parquet``. Queries: Task 1 ``topics.parquet`` (or ablation variants), Tasks
2-4 the multimodal topics. Text systems see images as text (captioner text, plus alt text when ``alt_text``);
a pair's text gives document and image text each its own share of the encoder's token limit (of a character budget
for encoders without a tokenizer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.core.errors import DataError
from mmir.core.tasks import task as task_spec
from mmir.encoders.truncation import TextLimit


@dataclass(frozen=True)
class Items:
    """The items of a task: ``ids`` (the run's item ids), ``doc_ids`` / ``image_paths`` (``""`` where none)."""

    task: str
    ids: list[str]
    doc_ids: list[str]
    image_paths: list[str]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Queries:
    """The queries of a task: ``qids``, ``texts`` and each query's ``image_paths`` (in query order)."""

    qids: list[str]
    texts: list[str]
    image_paths: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.qids)


def task_items(task: str, prep: str | Path) -> Items:
    """The items of ``task`` in a prepared domain: what its :class:`~mmir.core.tasks.TaskSpec` ranks.

    Raises:
        KeyError: an unknown task.
    """
    return ranked_items(task_spec(task).ranks, prep, task)


def ranked_items(ranks: str, prep: str | Path, task: str = "") -> Items:
    """The ``documents``, decodable ``images`` or ``pairs`` of a prepared domain, as items (``task`` labels them).

    Raises:
        ValueError: another ``ranks``.
    """
    prep = Path(prep)
    if ranks == "documents":
        c = pd.read_parquet(prep / "corpus.parquet", columns=["doc_id"])
        ids = c["doc_id"].tolist()
        return Items(task, ids, ids, [""] * len(ids))
    if ranks == "images":
        im = pd.read_parquet(prep / "images.parquet", columns=["path", "ok"])
        paths = im.loc[im["ok"].astype(bool), "path"].tolist()
        return Items(task, paths, [""] * len(paths), paths)
    if ranks == "pairs":
        p = pd.read_parquet(prep / "pairs.parquet")  # pairs are built from decodable images only
        return Items(task, p["pair_id"].tolist(), p["doc_id"].tolist(), p["image_path"].fillna("").tolist())
    raise ValueError(f"unknown item kind {ranks!r}")


def task_queries(task: str, prep: str | Path, variants: str | Path | None = None) -> Queries:
    """The queries of ``task``; ``variants`` (a ``qid, query`` parquet) replaces each topic's text (Task 1 ablations).

    Raises:
        DataError: ``variants`` misses a topic (names the file and the first missing qid).
        KeyError: an unknown task.
    """
    return read_queries(task_spec(task).queries, prep, variants)


def read_queries(topics: str, prep: str | Path, variants: str | Path | None = None) -> Queries:
    """The queries of a prepared topics file (``topics.parquet``: text only; ``topics_mm.parquet``: with images);
    ``variants`` as :func:`task_queries`."""
    prep = Path(prep)
    if topics == "topics.parquet":
        t = pd.read_parquet(prep / topics, columns=["qid", "query"])
        texts = t["query"].tolist()
        if variants is not None:
            text = dict(pd.read_parquet(variants, columns=["qid", "query"]).itertuples(index=False))
            missing = [q for q in t["qid"] if q not in text]
            if missing:
                raise DataError(variants, f"{len(missing)} topics have no query, e.g. {missing[0]!r}", field="qid")
            texts = [text[q] for q in t["qid"]]
        return Queries(t["qid"].tolist(), texts, [[] for _ in texts])
    t = pd.read_parquet(prep / topics, columns=["qid", "query", "image_paths"])
    return Queries(t["qid"].tolist(), t["query"].tolist(), [list(p) for p in t["image_paths"]])


# ------------------------------------------------------------------------------------------- text route
@dataclass(frozen=True)
class ImageText:
    """Text standing for images: captioner text by path, plus corpus images' alt text when ``alt_text``."""

    captions: dict[str, str]
    alt: dict[str, str] = field(default_factory=dict)
    alt_text: bool = False

    def of(self, path: str) -> str:
        parts = [self.captions.get(path, "")] + ([self.alt.get(path, "")] if self.alt_text else [])
        return "\n".join(t for t in parts if t)

    @classmethod
    def load(cls, captions_file: str | Path, prep: str | Path, alt_text: bool) -> ImageText:
        """From a captions parquet (``path, text``) and the prepared domain's ``images.parquet`` alt text."""
        c = pd.read_parquet(captions_file, columns=["path", "text"])
        alt = {}
        if alt_text:
            im = pd.read_parquet(Path(prep) / "images.parquet", columns=["path", "alt"])
            alt = dict(zip(im["path"], im["alt"].fillna("")))
        return cls(dict(zip(c["path"], c["text"].fillna(""))), alt, alt_text)


@dataclass
class PairBudget:
    """How a pair's text shares a character budget: the image text gets up to ``image_share`` of ``chars``, the
    document the rest. ``None`` chars: no limit (BM25 indexes the full text). Counts what was cut."""

    chars: int | None = None
    image_share: float = 0.25
    cut_documents: int = 0
    cut_images: int = 0

    def join(self, doc: str, image: str) -> str:
        return self.join_at(doc, image)[0]

    def join_at(self, doc: str, image: str) -> tuple[str, int | None]:
        """``(text, start)``: the pair's text and where its image text starts in it (None: no image text)."""
        if not image:
            return doc, None
        if self.chars is not None:
            img_cap = max(1, int(self.chars * self.image_share))
            if len(image) > img_cap:
                image, self.cut_images = image[:img_cap], self.cut_images + 1
            doc_cap = max(0, self.chars - len(image) - 2)
            if len(doc) > doc_cap:
                doc, self.cut_documents = doc[:doc_cap], self.cut_documents + 1
        return joined(doc, image)


@dataclass
class TokenPairBudget:
    """How a pair's text shares the encoder's token limit (``limit``: its tokenizer, limit, character budget and
    template): the image text gets up to ``image_share`` of the tokens left for text after the template and
    special tokens, the document the rest. Both are cut on token boundaries of the encoder's own tokenizer, and the
    joined text is checked to fit, so the model's truncation never reaches the image text. ``cut_images`` counts
    the pairs whose image text was cut (longer than its share), ``cut_documents`` those whose document was."""

    limit: TextLimit
    image_share: float = 0.25
    cut_documents: int = 0
    cut_images: int = 0

    def _join(self, doc: str, image: str) -> tuple[str, int]:
        text = joined(doc, image)[0]
        return text, self.limit.length(text)

    def join(self, doc: str, image: str) -> str:
        return self.join_at(doc, image)[0]

    def join_at(self, doc: str, image: str) -> tuple[str, int | None]:
        """``(text, start)``: the pair's text and where its image text starts in it (None: no image text)."""
        if not image:
            return doc, None  # a text-only pair: the encoder's own cut applies (and is counted there)
        lim = self.limit
        room = lim.max_tokens - lim.length("")
        chars = lim.max_chars
        cut_image = False
        if chars is not None and len(image) > chars:  # never tokenise a huge text whole
            image, cut_image = image[:chars], True
        ends = lim.token_ends(image)
        cap = max(1, int(room * self.image_share))
        if len(ends) > cap:
            image, cut_image = image[: ends[cap - 1]], True
        d = doc if chars is None else doc[: max(0, chars - len(image) - 2)]  # the whole text within max_chars
        text, n = self._join(d, image)
        if n > lim.max_tokens:
            ends = lim.token_ends(d)
            k = len(ends)
            while n > lim.max_tokens and k > 0:  # drop the overflow from the document's end; re-check the join
                k = max(0, k - (n - lim.max_tokens))
                d = d[: ends[k - 1]] if k else ""
                text, n = self._join(d, image)
        if n > lim.max_tokens:  # the image text alone is over the limit (image_share near 1): the model cuts it
            cut_image = True
        self.cut_images += cut_image
        self.cut_documents += len(d) < len(doc)
        return joined(d, image)


def joined(doc: str, image: str) -> tuple[str, int | None]:
    """``(text, start)``: a document text and an image text as one text (a blank line between them), and where the
    image text starts (None when there is none). Image text always ends the text, so a cut at the end reaches it first."""
    if not image:
        return doc, None
    return (f"{doc}\n\n{image}", len(doc) + 2) if doc else (image, 0)


def item_texts(items: Items, prep: str | Path, image_text: ImageText | None,
               budget: PairBudget | TokenPairBudget | None = None) -> list[str]:
    """The text of every item for a text retriever: document text, image text, or both for a pair.

    Raises:
        ValueError: an image item without ``image_text``.
    """
    return item_texts_at(items, prep, image_text, budget)[0]


def item_texts_at(items: Items, prep: str | Path, image_text: ImageText | None,
                  budget: PairBudget | TokenPairBudget | None = None) -> tuple[list[str], list[int | None]]:
    """:func:`item_texts` and where each item's image text starts in its text (None: none)."""
    needs_images = any(items.image_paths)
    if needs_images and image_text is None:
        raise ValueError("a text system on a task with images needs image text (captions)")
    corpus = {}
    if any(items.doc_ids):
        c = pd.read_parquet(Path(prep) / "corpus.parquet")
        corpus = dict(zip(c["doc_id"], c["text"]))
    budget = budget or PairBudget()
    out = [budget.join_at(corpus[d] if d else "", image_text.of(p) if p else "") for d, p in zip(items.doc_ids, items.image_paths)]
    return [t for t, _ in out], [s for _, s in out]


def query_texts(queries: Queries, image_text: ImageText | None) -> list[str]:
    """Each query's text followed by its images' captioner text (never alt text: queries have none), in order."""
    return query_texts_at(queries, image_text)[0]


def query_texts_at(queries: Queries, image_text: ImageText | None) -> tuple[list[str], list[int | None]]:
    """:func:`query_texts` and where each query's image text starts in its text (None: none)."""
    if image_text is None:
        return list(queries.texts), [None] * len(queries)
    texts, starts = [], []
    for q, paths in zip(queries.texts, queries.image_paths):
        captions = [image_text.captions[p] for p in paths if image_text.captions.get(p)]
        texts.append("\n\n".join([q, *captions]))
        starts.append(len(q) + 2 if captions else None)
    return texts, starts
