"""MM-BRIGHT Tasks 2–4: image corpora, (document, image) pairs and the per-task qrels (paper §3.1, §4.1).

- Task 2: query text + image → text documents; qrels = the query's gold_ids (binary).
- Task 3: query text + image → corpus images (``document_images``); qrels = its ``positive_images`` (binary).
- Task 4: query → (document, image) pairs. Every document gives one text-only pair plus one pair per image of
  the same page (page base key = the 8-hex key in ``<domain>/<key>_<n>.txt`` and in
  ``<domain>/<domain>_<key>_<NNNN>/image_<k>.<ext>``). Graded relevance (``paper``): 2 for a gold passage
  paired with a positive image of its page, 1 for a gold passage with no image, 0 otherwise (including a
  gold passage with an image that is present but not annotated positive). Pairs whose image is annotated
  negative for the query are removed from its ranking; an image annotated both positive and negative counts as
  positive. ``official`` collapses the grades to binary (rel > 0 → 1), as the released scripts' labels.

Exclusions by ``negative_ids`` (``evaluation.protocol: official``) apply to Task 2 documents and to every Task 4
pair built from such a document; Task 3 has none (the released code passes document ids, which never match
an image). Bad images follow :mod:`mmir.data.images`: a corrupt corpus image is dropped (and counted), a
corrupt query image is replaced by the blank image at encoding time (and counted).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import pandas as pd

from mmir.core.errors import DataError
from mmir.data.images import CorruptImage, ImageTooLarge, decode_image, resolve_inside
from mmir.data.parquet import as_str_list

NO_IMAGE = "__NO_IMAGE__"
PAIR_SEP = "|||"
_DOC_KEY = re.compile(r"(?:^|/)([0-9a-f]{8})_\d+\.txt$")
_IMG_KEY = re.compile(r"(?:^|/)[^/]*_([0-9a-f]{8})_\d+/image_\d+\.[A-Za-z0-9]+$")


def doc_base_key(doc_id: str) -> str | None:
    """Page key of a passage id ``<domain>/<key>_<n>.txt``; None when the id has no such key."""
    m = _DOC_KEY.search(doc_id)
    return m.group(1) if m else None


def image_base_key(path: str) -> str | None:
    """Page key of an image path ``<domain>/<domain>_<key>_<NNNN>/image_<k>.<ext>``; None otherwise."""
    m = _IMG_KEY.search(path)
    return m.group(1) if m else None


def pair_id(doc_id: str, image_path: str | None) -> str:
    """Task 4 item id ``<doc_id>|||<image_path>`` (``__NO_IMAGE__`` for the text-only pair), as the released code."""
    return f"{doc_id}{PAIR_SEP}{image_path or NO_IMAGE}"


def _image_bytes(value):
    if isinstance(value, dict):  # hub Image feature: {"bytes": ..., "path": ...}
        value = value.get("bytes")
    return value


def check_images(frame: pd.DataFrame, role: str, max_pixels: int, counts: dict[str, int],
                 examples: dict[str, list[str]]) -> pd.DataFrame:
    """Validate an image table (``path``, ``bytes``, optional ``alt``, plus ``_file``/``_row``).

    Paths must be relative and stay inside the dataset (DataError naming file, row, field ``path``);
    duplicate paths are an error. Every image is decoded: a corrupt or too-large one is counted in
    ``counts`` (``<role>_images_corrupt``, up to 5 messages in ``examples``); corpus images that fail are dropped, query images kept with
    ``ok=False`` (blank at encoding time). Returns ``path, sha256, alt, bytes, width, height, ok``.
    """
    rows, seen = [], {}
    for rec in frame.to_dict("records"):
        f, r, path = rec["_file"], rec["_row"], rec["path"]
        if not isinstance(path, str) or not path:
            raise DataError(f, "empty image path", r, "path")
        try:
            resolve_inside("/dataset", path)
        except DataError as exc:
            raise DataError(f, f"unsafe image path {path!r}: {exc}", r, "path") from exc
        if path in seen:
            raise DataError(f, f"duplicate image path {path!r} (first at row {seen[path]})", r, "path")
        seen[path] = r
        data = _image_bytes(rec["bytes"])
        ok, size = True, (0, 0)
        try:
            if not isinstance(data, (bytes, bytearray)):
                raise CorruptImage(path, f"no image bytes ({type(data).__name__})")
            size = decode_image(bytes(data), source=path, max_pixels=max_pixels).size
        except (CorruptImage, ImageTooLarge) as exc:
            ok = False
            kind = f"{role}_images_corrupt"
            counts[kind] = counts.get(kind, 0) + 1
            if len(examples.setdefault(kind, [])) < 5:
                examples[kind].append(f"{f}, row {r}, field 'bytes': {exc}"[:300])
            if role == "corpus":
                continue
        data = bytes(data) if isinstance(data, (bytes, bytearray)) else b""
        alt = rec.get("alt")
        rows.append({"path": path, "sha256": hashlib.sha256(data).hexdigest(), "alt": alt if isinstance(alt, str) else "",
                     "bytes": data, "width": size[0], "height": size[1], "ok": ok})
    return pd.DataFrame(rows, columns=["path", "sha256", "alt", "bytes", "width", "height", "ok"])


@dataclass
class MultimodalPrepared:
    """Task 2–4 artifacts of one domain (see module docstring)."""

    topics: pd.DataFrame  # qid, query, image_paths, positive_images, negative_images
    images: pd.DataFrame  # corpus images (check_images columns)
    query_images: pd.DataFrame
    pairs: pd.DataFrame  # pair_id, doc_id, image_path ("" = text-only)
    qrels: dict[str, dict[str, dict[str, int]]]  # task -> qid -> item -> rel
    excluded: dict[str, dict[str, list[str]]]  # task -> qid -> items removed under protocol official
    always_excluded: dict[str, list[str]]  # task4 pairs with a negative image (removed under every protocol)
    report: dict = field(default_factory=dict)


def build_multimodal(corpus: pd.DataFrame, examples: pd.DataFrame, images: pd.DataFrame,
                     query_images: pd.DataFrame, counts: dict) -> MultimodalPrepared:
    """Topics, pairs, qrels and exclusions of Tasks 2–4 from checked tables (``examples`` with _file/_row)."""
    doc_ids = set(corpus["doc_id"])
    img_paths = set(images["path"])
    qimg_paths = set(query_images["path"])
    docs_by_key: dict[str, list[str]] = {}
    for d in corpus["doc_id"]:
        k = doc_base_key(d)
        if k:
            docs_by_key.setdefault(k, []).append(d)
    imgs_by_key: dict[str, list[str]] = {}
    for p in images["path"]:
        k = image_base_key(p)
        if k:
            imgs_by_key.setdefault(k, []).append(p)
    pairs = []
    for d in corpus["doc_id"]:
        pairs.append((pair_id(d, None), d, ""))
        for p in imgs_by_key.get(doc_base_key(d) or "", []):
            pairs.append((pair_id(d, p), d, p))
    pair_ids = {p for p, _, _ in pairs}

    topics, qrels = [], {"task2": {}, "task3": {}, "task4": {}}
    excluded = {"task2": {}, "task4": {}}
    always: dict[str, list[str]] = {}
    n = {"positive_images_missing": 0, "positive_images_without_gold_page": 0, "query_images_missing": 0,
         "images_positive_and_negative": 0}
    for rec in examples.to_dict("records"):
        f, r, qid = rec["_file"], rec["_row"], str(rec["id"])
        if not qid.strip():
            raise DataError(f, "empty or missing query id", r, "id")
        if not isinstance(rec["query"], str) or not rec["query"].strip():
            raise DataError(f, f"empty query text for query {qid!r}", r, "query")
        gold = [g for g in as_str_list(rec.get("gold_ids"), f, r, "gold_ids") if g in doc_ids]
        negatives = [d for d in as_str_list(rec.get("negative_ids"), f, r, "negative_ids") if d in doc_ids]
        q_images = as_str_list(rec.get("image_paths"), f, r, "image_paths")
        for p in q_images:
            try:
                resolve_inside("/dataset", p)
            except DataError as exc:
                raise DataError(f, f"unsafe image path {p!r}: {exc}", r, "image_paths") from exc
        n["query_images_missing"] += sum(p not in qimg_paths for p in q_images)
        pos_all = as_str_list(rec.get("positive_images"), f, r, "positive_images")
        neg_all = as_str_list(rec.get("negative_images"), f, r, "negative_images")
        pos = [p for p in dict.fromkeys(pos_all) if p in img_paths]
        n["positive_images_missing"] += len(set(pos_all)) - len(pos)
        n["images_positive_and_negative"] += len(set(pos_all) & set(neg_all))
        neg = [p for p in dict.fromkeys(neg_all) if p not in set(pos_all)]  # positive wins
        topics.append({"qid": qid, "query": rec["query"], "image_paths": q_images,
                       "positive_images": pos, "negative_images": neg})
        if gold:
            qrels["task2"][qid] = {g: 1 for g in gold}
        if pos:
            qrels["task3"][qid] = {p: 1 for p in pos}
        graded = {pair_id(g, None): 1 for g in gold}
        for p in pos:
            matched = [g for g in gold if doc_base_key(g) == image_base_key(p)]
            n["positive_images_without_gold_page"] += not matched
            for g in matched:
                graded[pair_id(g, p)] = 2
        if graded:
            qrels["task4"][qid] = graded
        if negatives:
            excluded["task2"][qid] = negatives
            neg_docs = set(negatives)
            excluded["task4"][qid] = [p for p, d, _ in pairs if d in neg_docs and p not in graded]
        neg_pairs = [pair_id(d, p) for p in neg for d in docs_by_key.get(image_base_key(p) or "", [])]
        neg_pairs = [x for x in neg_pairs if x in pair_ids and x not in graded]
        if neg_pairs:
            always[qid] = neg_pairs
    report = {"pairs": len(pairs), "mm_topics": len(topics), "corpus_images": len(images),
              "query_images": len(query_images), **n,
              "qrels_task2": sum(map(len, qrels["task2"].values())),
              "qrels_task3": sum(map(len, qrels["task3"].values())),
              "qrels_task4_rel2": sum(v == 2 for g in qrels["task4"].values() for v in g.values()),
              "qrels_task4_rel1": sum(v == 1 for g in qrels["task4"].values() for v in g.values())}
    counts.update({k: v for k, v in n.items() if v})
    return MultimodalPrepared(
        pd.DataFrame(topics, columns=["qid", "query", "image_paths", "positive_images", "negative_images"]),
        images, query_images, pd.DataFrame(pairs, columns=["pair_id", "doc_id", "image_path"]),
        qrels, excluded, always, report)
