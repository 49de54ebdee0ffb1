"""The encoding and OCR plans: which kinds each dense/multimodal system encodes on a domain, in how many shards, and
how many OCR jobs a domain's images take (:func:`n_ocr_shards`: corpus images cut the same way, by
``captioners.<name>.shard_size``).

``encoding.shard_size`` rows a shard (documents, pair texts and images; queries are one shard). The shard count
comes from the raw sizes (:func:`mmir.data.sizes.raw_sizes`), so it is known when the DAG is built, before any
data is prepared; shard ``s`` covers rows ``[s * size, (s + 1) * size)`` and the last shard everything after
``(S - 1) * size`` (a prepared domain smaller or larger than planned still has every row in exactly one shard).
Pair texts are cut along the documents' shards: pair shard ``s`` holds the pairs of document shard ``s``.
"""

from __future__ import annotations

import math

from mmir.config.models import Params
from mmir.data.sizes import raw_sizes
from mmir.retrieval.encoding import QUERY_KINDS, kinds_of
from mmir.workflow.units import ablation_systems, typed


def n_shards(config: dict | Params, dataset: str, domain: str, kind: str) -> int:
    """How many shards ``kind`` has on a domain (>= 1)."""
    if kind in QUERY_KINDS:
        return 1
    p = typed(config)
    docs, images = raw_sizes(p.datasets[dataset], domain)
    n = images if kind == "images" else docs
    return max(1, math.ceil(n / p.encoding.shard_size))


def shard_range(n_rows: int, shard: int, shards: int, size: int) -> tuple[int, int]:
    """``[start, stop)`` of shard ``shard`` of ``shards`` over ``n_rows`` rows (the last takes the rest).

    Raises:
        ValueError: ``shard`` outside ``[0, shards)``.
    """
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}")
    start = min(shard * size, n_rows)
    return start, (n_rows if shard == shards - 1 else min((shard + 1) * size, n_rows))


def encoded_kinds(config: dict | Params, system: str, task: str) -> list[str]:
    """The kinds the retrieve job of (system, task) reads (an ablation system reads its base system's)."""
    p = typed(config)
    derived = ablation_systems(p)
    base = derived[system]["base"] if system in derived else system
    return kinds_of(p.systems[base], task)


#: the OCR shard kinds and the role their images have in the caption file
OCR_KINDS = {"images": "corpus", "query_images": "query"}


def n_ocr_shards(config: dict | Params, dataset: str, domain: str, captioner: str, kind: str) -> int:
    """How many OCR jobs ``kind`` (``images``: ``captioners.<name>.shard_size`` corpus images a job, from the raw
    sizes like encoding; ``query_images``: one) has on a domain (>= 1)."""
    if kind not in OCR_KINDS:
        raise ValueError(f"OCR kind {kind!r}: one of {', '.join(OCR_KINDS)}")
    if kind == "query_images":
        return 1
    p = typed(config)
    _docs, images = raw_sizes(p.datasets[dataset], domain)
    return max(1, math.ceil(images / p.captioners[captioner].shard_size))
