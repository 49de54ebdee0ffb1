"""A prepared domain as a look-up of evidence: documents, images (bytes), image text, gold documents and
positive images, so a run item (document, image or ``doc|||image`` pair) becomes what a generator reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mmir.data.multimodal import PAIR_SEP


@dataclass
class DomainItem:
    """One retrievable item of a domain as evidence: ``id``, ``text`` (document text or image caption) and ``image`` bytes or None."""

    id: str
    text: str
    image: bytes | None = None


class DomainIndex:
    """Documents, images and image text of a prepared domain, for building evidence."""

    def __init__(self, prepared_dir: str | Path, captions: dict[str, str]):
        prep = Path(prepared_dir)
        self.docs = dict(pd.read_parquet(prep / "corpus.parquet").itertuples(index=False))
        imgs = pd.read_parquet(prep / "images.parquet")
        qimgs = pd.read_parquet(prep / "query_images.parquet")
        self.image_bytes = {p: b for p, b, ok in zip(imgs["path"], imgs["bytes"], imgs["ok"]) if ok}
        self.image_bytes |= {p: b for p, b, ok in zip(qimgs["path"], qimgs["bytes"], qimgs["ok"]) if ok}
        alt = dict(zip(imgs["path"], imgs["alt"]))
        self.image_text = {p: "\n".join(t for t in (captions.get(p, ""), alt.get(p, "")) if t)
                           for p in set(self.image_bytes) | set(captions)}
        from mmir.data.trec import read_qrels

        self.gold = {q: [d for d, r in v.items() if r > 0] for q, v in read_qrels(prep / "qrels.task1.txt").items()}
        mm = prep / "topics_mm.parquet"
        self.positive_images = {}
        if mm.exists():
            t = pd.read_parquet(mm)
            self.positive_images = {q: list(p) for q, p in zip(t["qid"], t["positive_images"])}

    def item(self, item_id: str) -> list[DomainItem]:
        """Evidence of one run item: a document, an image, or a ``doc|||image`` pair (both)."""
        if PAIR_SEP in item_id:
            doc, img = item_id.split(PAIR_SEP, 1)
            return self.item(doc) + ([] if img == "__NO_IMAGE__" else self.item(img))
        if item_id in self.docs:
            return [DomainItem(item_id, self.docs[item_id])]
        if item_id in self.image_bytes:
            return [DomainItem(item_id, self.image_text.get(item_id, ""), self.image_bytes[item_id])]
        raise KeyError(f"run item {item_id!r} is neither a document nor an image of this domain")
