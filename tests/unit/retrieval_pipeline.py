"""The retrieval stage run in-process, as the workflow runs it: every kind a (system, task) reads encoded into
its store shard by shard (encode), sealed (encode_store), then retrieve. For tests of the stage's logic."""

from __future__ import annotations

from pathlib import Path

from mmir.config.models import parse_system
from mmir.retrieval.encoding import QUERY_KINDS, kinds_of
from mmir.workflow import retrieval_steps

ENCODING = {"shard_size": 20000, "dtype": "float32", "batch_rows": 64}


def encode_kinds(task: str, prep: Path, system: dict, work: Path, *, encoder=None, captions=None,
                 encoding: dict | None = None, shards: int = 1) -> dict[str, str]:
    """Encode every kind of (system, task) under ``work/vectors``; returns ``{kind: store dir}``."""
    encoding = encoding or ENCODING
    stores = {}
    for kind in kinds_of(parse_system(system), task):
        store = work / "vectors" / kind
        n = 1 if kind in QUERY_KINDS else shards
        for s in range(n):
            seal, st = store / f"shard-{s:05d}.sealed.json", store / f"shard-{s:05d}.stats.json"
            retrieval_steps.encode(retrieval_steps.EncodeJob(prep, "sys", system, kind, s, n, encoding, work.parent / "cache",
                                                             store, seal, st, captions, False), encoder)
        stores[kind] = str(store)
    return stores


def run_system(task: str, prep: Path, system: dict, work: Path, *, k: int = 1000, protocol: str = "official",
               encoder=None, captions=None, queries=None, alt_text: bool = False, **kw):
    """``(run, stats)`` of one system on one task after encoding its kinds (none for BM25)."""
    import json

    from mmir.retrieval.runs import read_run

    stores = {} if system["kind"] == "bm25" else encode_kinds(task, prep, system, work, encoder=encoder,
                                                              captions=captions, **kw)
    out = work / f"{task}.trec"
    retrieval_steps.retrieve(retrieval_steps.RetrieveJob(
        task, prep, "sys", system, {"protocol": protocol, "top_k": k, "alt_text": alt_text}, out, work / f"{task}.stats.json",
        stores, captions, queries, work.parent / "cache"), encoder)
    return read_run(out), json.loads((work / f"{task}.stats.json").read_text())
