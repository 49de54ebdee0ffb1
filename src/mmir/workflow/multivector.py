"""The retrieval stage's steps for ``kind: multivector`` systems: encode one shard of one kind into a multi-vector
store (:mod:`mmir.encoders.token_store`, through the token cache), and the MaxSim search of a retrieve job
(:mod:`mmir.retrieval.maxsim`: exact; or over Voyager candidates, :mod:`mmir.retrieval.voyager_index`).
Called by :mod:`mmir.workflow.retrieval_steps`, which owns the job records."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from mmir.config.models import EncodingConfig, MultiVectorSystemBase

log = logging.getLogger("mmir.workflow.retrieval")


def _content(payload) -> bytes | str:
    """A payload as cache content: a pair (text, image bytes) is both, joined by a NUL byte."""
    if isinstance(payload, tuple):
        text, data = payload
        return text.encode("utf-8") + b"\0" + data
    return payload


def encode_shard(rows, start: int, stop: int, shard: int, enc, store: Path, cache_root, encoding: EncodingConfig) -> dict:
    """Encode items ``start..stop-1`` of ``rows`` (:class:`mmir.retrieval.encoding.KindRows`) with ``enc``
    (:class:`mmir.retrieval.encoding.KindEncoder`) into token shard ``shard`` of ``store``; returns its stats."""
    from mmir.encoders.cache import content_key
    from mmir.encoders.store import ShardFormat, ShardMismatchError, shard_name
    from mmir.encoders.token_cache import TokenCache
    from mmir.encoders.token_store import write_token_shard

    ckind, fn = enc.cache_kind(rows), enc.fn(rows)
    ids, payloads = rows.ids[start:stop], rows.payloads[start:stop]
    keys = [content_key(enc.key, ckind, _content(p)) for p in payloads]
    totals = {"hits": 0, "misses": 0, "model_calls": 0}
    batch = enc.system.batch_size
    with TokenCache(cache_root, enc.spec) as cache:
        first: dict[tuple[int, int], list[np.ndarray]] = {}

        def compute(a: int, b: int) -> list[np.ndarray]:
            if (a, b) in first:  # the batch that gave the dimension: encoded and counted once
                return first.pop((a, b))
            mats, st = cache.encode(payloads[a:b], keys[a:b], fn, batch_size=batch)
            for k in totals:
                totals[k] += st[k]
            return mats

        dim = cache.tokens.dim
        if dim is None and payloads:  # a new cache: the first batch gives the dimension, and is handed to the writer
            n0 = min(len(payloads), encoding.batch_rows)
            first[(0, n0)] = compute(0, n0)
            dim = int(first[(0, n0)][0].shape[1])
        elif dim is None:  # an empty shard on a new cache still records the encoder's dimension (a probe, not counted)
            probe = rows.payloads[-1:]
            pkeys = [content_key(enc.key, ckind, _content(p)) for p in probe]
            dim = int(cache.encode(probe, pkeys, fn, batch_size=1)[0][0].shape[1]) if probe else 1
        fmt = ShardFormat(dim=dim, encoder_key=enc.store_key(rows.kind), dtype=encoding.dtype)
        kw = dict(batch_size=encoding.batch_rows)  # items a resumable batch
        try:
            ws = write_token_shard(store, shard, ids, compute, fmt, **kw)
        except ShardMismatchError as e:  # a shard of another plan or encoder under this name: start it again
            log.warning("%s; rewriting shard %d", e, shard)
            for f in store.glob(f"{shard_name(shard)}.*"):
                f.unlink()
            ws = write_token_shard(store, shard, ids, compute, fmt, **kw)
    return {"dim": dim, "rows": len(ids), "tokens": ws["tokens"], "batches_total": ws["batches_total"],
            "batches_skipped": ws["batches_skipped"], "batches_computed": ws["batches_computed"], "sha256": ws["sha256"],
            "sealed": True, **{f"cache_{k}": v for k, v in totals.items()}}


def finalize(store_dir: str | Path, key: str, shards: int) -> dict:
    """The manifest of a multi-vector store over its sealed shards (:func:`mmir.encoders.token_store.finalize_token_store`)."""
    from mmir.encoders.token_store import finalize_token_store

    m = finalize_token_store(store_dir, key, shards)
    return {**m, "total_rows": m["total_items"]}


def is_token_shard(sealed: dict) -> bool:
    from mmir.encoders.token_store import FORMAT

    return sealed.get("format") == FORMAT


def search(typed: MultiVectorSystemBase, task: str, stores: dict[str, str], items, qs, k: int, exclude, encoder=None,
           variants: bool = False, domain: str | None = None, cache_root=None, name: str | None = None,
           prep=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """MaxSim top-``k`` of a multi-vector system over its item store for a task's queries (read from the query
    store, or encoded here for ablation query variants): exact, or with ``index: voyager`` exact MaxSim over Voyager's
    candidates (an index cached under ``cache_root``; stats say ``approximate``). ``name`` and ``prep``: the system's key
    and prepared domain, for a plug-in encoding query variants (:class:`~mmir.retrieval.encoding.KindEncoder`). Returns
    ``(scores, indices, stats)``.

    Raises:
        DataError: a store whose ids are not the task's items or queries in order (stale: rerun its encode jobs).
    """
    from mmir.core.errors import DataError
    from mmir.core.tasks import task as task_spec
    from mmir.encoders.token_store import open_token_store
    from mmir.retrieval.encoding import KindEncoder, kinds_of
    from mmir.retrieval.maxsim import plan, topk_maxsim

    kinds = kinds_of(typed, task)
    opened = {kind: open_token_store(stores[kind], _key(stores[kind]), verify="size") for kind in kinds}
    item_kind = task_spec(task).ranks
    store = opened[item_kind]
    if store.ids != list(items.ids):
        raise DataError(stores[item_kind], f"the store's {len(store.ids)} items are not the task's {len(items)} items in "
                        "order (stale store: rerun its encode jobs)")
    if variants:
        queries = KindEncoder(typed, encoder, domain=domain, name=name, prep=prep).encoder.encode_queries(qs.texts)
    else:
        qstore = opened[next(kd for kd in kinds if kd != item_kind)]
        if qstore.ids != list(qs.qids):
            raise DataError(qstore.path, f"the store's {len(qstore.ids)} queries are not the task's {len(qs)} in order "
                            "(stale store: rerun its encode jobs)")
        queries = [qstore.item(i).astype(np.float32) for i in range(len(qstore))]
    t0 = time.perf_counter()
    stats = {"item_tokens": int(store.lengths.sum()), "query_tokens_total": int(sum(map(len, queries)))}
    if typed.index == "voyager":  # approximate candidates (never the default), re-scored by exact MaxSim
        from mmir.retrieval.voyager_index import VoyagerIndex, VoyagerParams

        if cache_root is None:
            raise ValueError("index: voyager needs a cache folder for its index (paths.embedding_cache)")
        index = VoyagerIndex(store, cache_root, VoyagerParams(**typed.voyager.model_dump()))
        scores, idx, used = index.search(queries, k, exclude, chunk_tokens=typed.chunk_tokens, query_tokens=typed.query_tokens)
        stats |= used | {"voyager_seconds": round(time.perf_counter() - t0, 3)}
    else:
        scores, idx = topk_maxsim(queries, store.tokens, store.lengths, k, chunk_tokens=typed.chunk_tokens,
                                  query_tokens=typed.query_tokens, exclude=exclude)
        p = plan(store.lengths, [len(x) for x in queries], typed.chunk_tokens, typed.query_tokens)
        stats |= {"search": "exact (MaxSim)", "approximate": False, "maxsim_largest_temporary": list(p.largest_sim),
                  "maxsim_seconds": round(time.perf_counter() - t0, 3)}
    for s in opened.values():
        s.close()
    return scores, idx, stats


def _key(store_dir: str | Path) -> str:
    return json.loads((Path(store_dir) / "manifest.json").read_text(encoding="utf-8"))["encoder_key"]
