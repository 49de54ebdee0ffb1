"""MM-BRIGHT Tasks 2–4: image corpora, (document, image) pairs and the per-task qrels (paper §3.1, §4.1).

- Task 2: query text + image → text documents; qrels = the query's gold_ids (binary).
- Task 3: query text + image → corpus images (``document_images``); qrels = its ``positive_images`` (binary).
- Task 4: query → (document, image) pairs: per document one text-only pair plus one per decodable image of
  its page, as the released code builds them. ``qrels.task4.txt`` (``task4_protocol: paper``, §4.1): 2 for a
  gold passage with a positive image of its page, 1 for a gold passage with no image, 0 otherwise; pairs with
  a negative image are excluded (``excluded.task4.always.tsv``). ``qrels.task4.official.txt`` (the released
  ``task4_pair.py``): every pair of a gold passage is 1, and nothing is excluded.

Undecodable corpus images stay in ``images.parquet`` with ``ok=False`` (never ranked, still judged: a miss);
unusable query images are left out of ``image_paths``. README: "Tasks 2–4 (multimodal)".
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import pandas as pd

from mmir.core.errors import DataError
from mmir.data.images import CorruptImage, ImageTooLarge, check_relative, decode_image
from mmir.data.parquet import as_text, norm_ref

NO_IMAGE = "__NO_IMAGE__"
PAIR_SEP = "|||"
# the released code's keys (src/utils.py): any hex run; a passage "<...>/<key>_<n>.txt", an image folder
# "<domain>_<key>_<NNNN>"
_DOC_KEY = re.compile(r"(?:^|/)([0-9a-f]+)_\d+\.txt$")
_IMG_KEY = re.compile(r"(?:^|/)[^/]*_([0-9a-f]+)_\d+/image_\d+\.[A-Za-z0-9]+$")
IMAGE_COLUMNS = ["path", "sha256", "alt", "bytes", "width", "height", "ok"]


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


def _note(counts: dict, examples: dict, kind: str, message: str) -> None:
    counts[kind] = counts.get(kind, 0) + 1
    if len(examples.setdefault(kind, [])) < 5:
        examples[kind].append(message[:300])


def check_images(frame: pd.DataFrame, role: str, max_pixels: int, counts: dict[str, int],
                 examples: dict[str, list[str]], root: str = "the dataset") -> pd.DataFrame:
    """Validate an image table (``path``, ``bytes``, optional ``alt``, ``_file``/``_row``); returns :data:`IMAGE_COLUMNS`.

    Paths must be relative and inside the dataset; a path repeated with identical bytes is kept once, with
    different bytes an error; a corrupt or too-large image is counted and kept with ``ok=False``.
    """
    rows, seen = [], {}
    for rec in frame.to_dict("records"):
        f, r, raw = rec["_file"], rec["_row"], rec["path"]
        path = as_text(raw, f, r, "path", "an image path")
        if not path:
            raise DataError(f, "empty image path", r, "path")
        path = norm_ref(path)
        if path != raw:
            counts["backslash_refs"] = counts.get("backslash_refs", 0) + 1
        try:
            check_relative(path, root)
        except DataError as exc:
            raise DataError(f, f"unsafe image path: {exc}", r, "path") from exc
        data = _image_bytes(rec["bytes"])
        if path in seen:
            first_row, first_data = seen[path]
            if first_data == data:
                _note(counts, examples, "duplicate_images_identical",
                      f"{f}, row {r}, field 'path': {path!r} repeats row {first_row} with identical bytes (kept once)")
                continue
            raise DataError(f, f"duplicate image path {path!r} with different bytes than row {first_row}", r, "bytes")
        seen[path] = (r, data)
        ok, size = True, (0, 0)
        try:
            if not isinstance(data, (bytes, bytearray)):
                raise CorruptImage(path, f"no image bytes ({type(data).__name__})")
            size = decode_image(bytes(data), source=path, max_pixels=max_pixels).size
        except (CorruptImage, ImageTooLarge) as exc:
            ok = False
            _note(counts, examples, f"{role}_images_corrupt", f"{f}, row {r}, field 'bytes': {exc}")
        data = bytes(data) if isinstance(data, (bytes, bytearray)) else b""
        alt = rec.get("alt")
        rows.append({"path": path, "sha256": hashlib.sha256(data).hexdigest(), "alt": alt if isinstance(alt, str) else "",
                     "bytes": data, "width": size[0], "height": size[1], "ok": ok})
    return pd.DataFrame(rows, columns=IMAGE_COLUMNS)


@dataclass
class MultimodalPrepared:
    """Task 2–4 artifacts of one domain (see module docstring)."""

    topics: pd.DataFrame  # qid, query, image_paths, positive_images, negative_images
    images: pd.DataFrame  # corpus images (check_images columns; ok=False rows are never retrievable)
    query_images: pd.DataFrame
    pairs: pd.DataFrame  # pair_id, doc_id, image_path ("" = text-only); decodable images only
    qrels: dict[str, dict[str, dict[str, int]]]  # task2, task3, task4 (paper), task4_official -> qid -> item -> rel
    excluded: dict[str, dict[str, list[str]]]  # task -> qid -> items removed under protocol official
    always_excluded: dict[str, list[str]]  # task4 pairs with a negative image (removed under every paper protocol)
    report: dict = field(default_factory=dict)


def build_multimodal(corpus: pd.DataFrame, queries: list[dict], images: pd.DataFrame,
                     query_images: pd.DataFrame, counts: dict) -> MultimodalPrepared:
    """Topics, pairs, qrels and exclusions of Tasks 2–4 from checked ``examples_multimodal`` records and tables."""
    pair_ok = {p for p, ok in zip(images["path"], images["ok"]) if ok}
    docs_by_key: dict[str, list[str]] = {}
    for d in corpus["doc_id"]:
        k = doc_base_key(d)
        if k:
            docs_by_key.setdefault(k, []).append(d)
    imgs_by_key: dict[str, list[str]] = {}
    for p in images["path"]:
        k = image_base_key(p)
        if k and p in pair_ok:
            imgs_by_key.setdefault(k, []).append(p)
    pairs: list[tuple[str, str, str]] = []
    pairs_of: dict[str, list[str]] = {}
    for d in corpus["doc_id"]:
        mine = [(pair_id(d, None), d, "")] + [(pair_id(d, p), d, p) for p in imgs_by_key.get(doc_base_key(d) or "", [])]
        pairs += mine
        pairs_of[d] = [p for p, _, _ in mine]
    pair_ids = {p for p, _, _ in pairs}
    retrievable_images = set(pair_ok)

    topics = []
    qrels: dict[str, dict] = {"task2": {}, "task3": {}, "task4": {}, "task4_official": {}}
    excluded = {"task2": {}, "task4": {}}
    always: dict[str, list[str]] = {}
    n = {"positive_images_without_gold_page": 0, "images_positive_and_negative": 0}
    for q in queries:
        qid, gold, pos_all, neg_all = q["qid"], q["gold"], q["positive_images"], q["negative_images"]
        pos = list(dict.fromkeys(pos_all))
        n["images_positive_and_negative"] += len(set(pos) & set(neg_all))
        neg = [p for p in dict.fromkeys(neg_all) if p not in set(pos)]  # positive wins
        topics.append({"qid": qid, "query": q["query"], "image_paths": q["image_paths"],
                       "positive_images": pos, "negative_images": neg})
        if gold:
            qrels["task2"][qid] = {g: 1 for g in gold}
            qrels["task4_official"][qid] = {p: 1 for g in gold for p in pairs_of[g]}
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
        if q["negatives"]:
            excluded["task2"][qid] = q["negatives"]
            neg_docs = set(q["negatives"])
            excluded["task4"][qid] = [p for p, d, _ in pairs if d in neg_docs and p not in graded]
        neg_pairs = [pair_id(d, p) for p in neg for d in docs_by_key.get(image_base_key(p) or "", [])]
        neg_pairs = [x for x in neg_pairs if x in pair_ids and x not in graded]
        if neg_pairs:
            always[qid] = neg_pairs
    unretrievable = {
        "task2": 0,
        "task3": sum(p not in retrievable_images for g in qrels["task3"].values() for p in g),
        "task4": sum(p not in pair_ids for g in qrels["task4"].values() for p in g),
        "task4_official": sum(p not in pair_ids for g in qrels["task4_official"].values() for p in g),
    }
    report = {"pairs": len(pairs), "mm_topics": len(topics), "corpus_images": len(images),
              "corpus_images_retrievable": len(retrievable_images), "query_images": len(query_images), **n,
              "qrels_task2": sum(map(len, qrels["task2"].values())),
              "qrels_task3": sum(map(len, qrels["task3"].values())),
              "qrels_task4_rel2": sum(v == 2 for g in qrels["task4"].values() for v in g.values()),
              "qrels_task4_rel1": sum(v == 1 for g in qrels["task4"].values() for v in g.values()),
              "qrels_task4_official": sum(map(len, qrels["task4_official"].values())),
              "unretrievable": unretrievable}
    counts.update({k: v for k, v in n.items() if v})
    return MultimodalPrepared(
        pd.DataFrame(topics, columns=["qid", "query", "image_paths", "positive_images", "negative_images"]),
        images, query_images, pd.DataFrame(pairs, columns=["pair_id", "doc_id", "image_path"]),
        qrels, excluded, always, report)
