"""MM-BRIGHT Tasks 2–4 retrieval: multimodal encoders, and text systems through image text (OCR route).

Items per task (see :mod:`mmir.data.multimodal`): Task 2 = documents, Task 3 = corpus images, Task 4 =
(document, image) pairs. Queries are the ``examples_multimodal`` topics.

- ``kind: mm`` systems (paper §4.1): query vector = :func:`~mmir.encoders.multimodal.build_query_vectors`
  (default: the FIRST query image only, a blank 224×224 white image when there is none, fused with the text
  vector by an L2-normalised mean); documents as text vectors; images as image vectors; a pair as the
  normalised mean of its text and image vectors (the text vector alone for a text-only pair).
- ``kind: bm25`` / ``dense`` systems see images as text (``image text`` = OCR output, plus the dataset's alt text
  for corpus images): query = its text + the OCR of its images in order; an image item = its image text;
  a pair = the document text + the image text.

Scores are cosine × 100 for vector systems, exact top-k (chunked, bounded memory,
:func:`~mmir.retrieval.topk.topk_inner_product`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from mmir.data.images import blank_image
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.retrieval.runs import Run
from mmir.retrieval.search import rank_scores
from mmir.retrieval.topk import topk_inner_product

log = logging.getLogger(__name__)

MM_TASKS = ("task2", "task3", "task4")


def read_exclusions(prepared_dir: Path, task: str, protocol: str) -> dict[str, set[str]]:
    """Items removed from each query's ranking: ``excluded.<task>.tsv`` under ``official`` plus, for Task 4,
    ``excluded.task4.always.tsv`` (pairs with a negative image) under every protocol."""
    from mmir.data.prepare import read_excluded

    out: dict[str, set[str]] = {}
    files = []
    if protocol == "official" and (prepared_dir / f"excluded.{task}.tsv").exists():
        files.append(prepared_dir / f"excluded.{task}.tsv")
    if task == "task4":
        files.append(prepared_dir / "excluded.task4.always.tsv")
    for f in files:
        for q, ids in read_excluded(f).items():
            out.setdefault(q, set()).update(ids)
    return out


def _items(task: str, prep: Path) -> pd.DataFrame:
    """``item_id, doc_id, image_path`` of the task's corpus (doc_id/image_path empty where absent)."""
    if task == "task2":
        c = pd.read_parquet(prep / "corpus.parquet", columns=["doc_id"])
        return pd.DataFrame({"item_id": c["doc_id"], "doc_id": c["doc_id"], "image_path": ""})
    if task == "task3":
        im = pd.read_parquet(prep / "images.parquet", columns=["path"])
        return pd.DataFrame({"item_id": im["path"], "doc_id": "", "image_path": im["path"]})
    p = pd.read_parquet(prep / "pairs.parquet")
    return p.rename(columns={"pair_id": "item_id"})


# ---------------------------------------------------------------------------------------------------------
# text route (bm25 / dense over image text)
# ---------------------------------------------------------------------------------------------------------

def text_route(task: str, prep: Path, captions: dict[str, str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(qids, query_texts, item_ids, item_texts)`` for a text system on a multimodal task.

    ``captions`` maps an image path (query or corpus) to its image text (OCR; corpus images also get their
    alt text appended here).
    """
    topics = pd.read_parquet(prep / "topics_mm.parquet")
    corpus = pd.read_parquet(prep / "corpus.parquet").set_index("doc_id")["text"]
    images = pd.read_parquet(prep / "images.parquet", columns=["path", "alt"]).set_index("path")["alt"]

    def image_text(p: str) -> str:
        return "\n".join(t for t in (captions.get(p, ""), images.get(p, "")) if t)

    queries = ["\n\n".join([q, *(captions[p] for p in paths if captions.get(p))])
               for q, paths in zip(topics["query"], topics["image_paths"])]
    items = _items(task, prep)
    texts = []
    for d, p in zip(items["doc_id"], items["image_path"]):
        parts = ([corpus[d]] if d else []) + ([image_text(p)] if p else [])
        texts.append("\n\n".join(x for x in parts if x))
    return topics["qid"].tolist(), queries, items["item_id"].tolist(), texts


def text_system_run(task: str, prep: Path, system: dict, excluded: dict, k: int, cache_root, captions) -> tuple[Run, dict]:
    """Rank a task's items for a bm25/dense system through the OCR route."""
    from mmir.encoders.text import make_text_encoder
    from mmir.retrieval.bm25 import BM25
    from mmir.retrieval.search import cache_batch_size, encode_cached, encoder_usage

    qids, queries, item_ids, texts = text_route(task, prep, captions)
    stats = {"items": len(item_ids), "topics": len(qids)}
    if system["kind"] == "bm25":
        index = BM25(texts, backend=system["backend"], method=system["method"], k1=system["k1"], b=system["b"],
                     stopwords=system["stopwords"], stemmer=system["stemmer"])
        scores = index.iter_scores(queries)
        return rank_scores(lambda i: next(scores), qids, item_ids, excluded, k, "bm25"), stats
    enc = make_text_encoder(system)
    bs = cache_batch_size(enc, system)
    d, ds = encode_cached(enc, texts, "document", cache_root, bs)
    q, qs = encode_cached(enc, queries, "query", cache_root, bs)
    stats |= {f"doc_{a}": b for a, b in ds.items()} | {f"query_{a}": b for a, b in qs.items()} | encoder_usage(enc)
    return _vector_rank(q, d, qids, item_ids, excluded, k), stats


def _vector_rank(q: np.ndarray, items: np.ndarray, qids, item_ids, excluded, k) -> Run:
    pos = {d: i for i, d in enumerate(item_ids)}
    excl = [{pos[d] for d in excluded.get(qid, ()) if d in pos} for qid in qids]
    scores, idx = topk_inner_product(q, items, k, exclude=excl)
    run: Run = {}
    for qid, srow, irow in zip(qids, scores, idx):
        run[qid] = [(item_ids[j], float(s) * 100.0) for s, j in zip(srow, irow) if j >= 0]
    return run


# ---------------------------------------------------------------------------------------------------------
# multimodal encoders
# ---------------------------------------------------------------------------------------------------------

def make_mm_encoder(system: dict):
    """Build the encoder of a validated ``kind: mm`` system. ``random_init`` builds the real architecture
    with seeded random weights (offline runs; tables label the row untrained)."""
    import torch

    from mmir.encoders.multimodal import build_mm_encoder

    name = system["encoder"]
    kw = {"device": system.get("device"), "batch_size": system["batch_size"]}
    if system.get("random_init"):
        torch.manual_seed(system["seed"])
        if not name.startswith("open_clip:"):
            raise ValueError(f"random_init is supported for open_clip:<arch> encoders, not {name!r}")
        enc = build_mm_encoder(name.split("@")[0], **kw)
        enc.revision = f"random-init:seed={system['seed']}"
        return enc
    if system.get("model"):
        kw["model_id"] = system["model"]
    if system.get("revision") and not name.startswith("open_clip:"):
        kw["revision"] = system["revision"]
    return build_mm_encoder(name, **kw)


class TextTower:
    """A multimodal encoder seen as a text encoder (Task 1), with the interface of
    :class:`mmir.encoders.text.TextEncoder`."""

    def __init__(self, enc):
        self.enc = enc
        self.calls = 0

    def cache_spec(self) -> dict:
        return self.enc.cache_spec

    def encode_queries(self, texts):
        self.calls += 1
        return self.enc.encode_text(list(texts), role="query")

    def encode_documents(self, texts):
        self.calls += 1
        return self.enc.encode_text(list(texts), role="document")


def _cached(enc, kind: str, items: list, contents: list, fn, cache_root, batch_size: int) -> np.ndarray:
    spec = enc.cache_spec
    with EmbeddingCache(cache_root, spec) as cache:
        keys = [content_key(encoder_key(spec), kind, c) for c in contents]
        m, st = cache.encode(items, keys, fn, batch_size=batch_size, progress=f"encode {kind}")
    log.info("%s: %s", kind, st)
    return m


def mm_system_run(task: str, prep: Path, system: dict, excluded: dict, k: int, cache_root, encoder=None,
                  tally=None, domain: str = "") -> tuple[Run, dict]:
    """Rank a task's items with a multimodal encoder (see module docstring)."""
    from mmir.encoders.multimodal import build_query_vectors, pair_vectors

    enc = encoder or make_mm_encoder(system)
    bs = system["batch_size"]
    topics = pd.read_parquet(prep / "topics_mm.parquet")
    qimgs = pd.read_parquet(prep / "query_images.parquet").set_index("path")
    images = pd.read_parquet(prep / "images.parquet").set_index("path")

    def text_vecs(texts: list[str], role: str) -> np.ndarray:
        return _cached(enc, enc.cache_kind("text", role), texts, texts, lambda b: enc.encode_text(b, role=role), cache_root, bs)

    def image_vecs(datas: list[bytes], role: str) -> np.ndarray:
        return _cached(enc, enc.cache_kind("image", role), datas, datas,
                       lambda b: enc.encode_image_bytes(b, batch_size=bs, num_workers=system["num_workers"],
                                                        role=role, on_error="blank"), cache_root, bs)

    import io

    buf = io.BytesIO()
    blank_image().save(buf, format="PNG")
    blank = image_vecs([buf.getvalue()], "query")[0]
    # every query image we may need, decoded once; a missing or corrupt one stands as the blank image
    needed = [p for paths in topics["image_paths"] for p in (paths[:1] if system["image_mode"] == "first" else paths)]
    needed = list(dict.fromkeys(p for p in needed if p in qimgs.index and qimgs.at[p, "ok"]))
    n_bad = sum(1 for paths in topics["image_paths"] for p in paths if p not in qimgs.index or not qimgs.at[p, "ok"])
    vec_of = dict(zip(needed, image_vecs([qimgs.at[p, "bytes"] for p in needed], "query"))) if needed else {}
    per_query = []
    for paths in topics["image_paths"]:
        use = list(paths[:1]) if system["image_mode"] == "first" else list(paths)
        per_query.append(np.stack([vec_of.get(p, blank) for p in use]) if use else None)
    qv = build_query_vectors(text_vecs(topics["query"].tolist(), "query"), per_query,
                             image_mode=system["image_mode"], fusion=system["fusion"], blank_vec=blank)

    items = _items(task, prep)
    if task == "task2":
        corpus = pd.read_parquet(prep / "corpus.parquet")
        iv = text_vecs(corpus["text"].tolist(), "document")
    elif task == "task3":
        iv = image_vecs([images.at[p, "bytes"] for p in items["image_path"]], "document")
    else:
        corpus = pd.read_parquet(prep / "corpus.parquet").set_index("doc_id")["text"]
        docs = list(dict.fromkeys(items["doc_id"]))
        tv = dict(zip(docs, text_vecs([corpus[d] for d in docs], "document")))
        paths = [p for p in dict.fromkeys(items["image_path"]) if p]
        imv = dict(zip(paths, image_vecs([images.at[p, "bytes"] for p in paths], "document"))) if paths else {}
        iv = pair_vectors(np.stack([tv[d] for d in items["doc_id"]]), [imv.get(p) if p else None for p in items["image_path"]])
    run = _vector_rank(qv, iv, topics["qid"].tolist(), items["item_id"].tolist(), excluded, k)
    return run, {"items": len(items), "topics": len(topics), "query_images_blank": n_bad}


def retrieve_mm(task: str, prepared_dir: str | Path, system: dict, evaluation: dict, cache_root: str | Path,
                captions: dict[str, str] | None = None) -> tuple[Run, dict]:
    """One system on one prepared domain for Task 2, 3 or 4. Returns ``(run, stats)``.

    Raises ValueError for a text system without ``captions`` (its image text) or an unknown kind.
    """
    prep = Path(prepared_dir)
    excluded = read_exclusions(prep, task, evaluation["protocol"])
    k = evaluation["top_k"]
    if system["kind"] == "mm":
        run, stats = mm_system_run(task, prep, system, excluded, k, cache_root)
    elif system["kind"] in ("bm25", "dense"):
        if captions is None:
            raise ValueError("a text system on a multimodal task needs image text (captions)")
        run, stats = text_system_run(task, prep, system, excluded, k, cache_root, captions)
    else:
        raise ValueError(f"unknown system kind {system['kind']!r}")
    stats |= {"excluded_queries": len(excluded), "run_lines": sum(map(len, run.values()))}
    return run, stats
