"""A deterministic sample of a domain for fast runs (config ``datasets.<name>.sample``).

``queries``: the first N topics of each domain (topic order). ``corpus``: ``all`` keeps the whole corpus;
``judged`` keeps the documents and images those topics judge (gold and hard negatives, positive and negative
images) plus ``distractors`` others of each, drawn with ``seed`` -- a pooled corpus, so scores are higher than on
the full corpus and are labelled as a sample in every table (:func:`Sample.describe`).

The sample is cut from the raw tables, then the domain is loaded and checked again from the cut tables, so every
prepared artifact (qrels of all tasks, exclusions, pairs, images) follows from one definition.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mmir.config.models import SampleConfig
from mmir.data.parquet import as_id, norm_ref

#: ``datasets.<name>.sample`` (:class:`mmir.config.models.SampleConfig`), under its old name
Sample = SampleConfig


def kept_items(topics: pd.DataFrame, qrels: Mapping, excluded: Mapping, mm, s: Sample,
               corpus_ids: list[str], image_paths: list[str]) -> tuple[set[str], set[str] | None, set[str] | None]:
    """``(qids, doc ids, image paths)`` the sample keeps; ``None`` = keep all. ``topics``/``qrels``/``excluded``
    and ``mm`` (:class:`~mmir.data.multimodal.MultimodalPrepared` or None) are a fully loaded domain's."""
    qids = list(topics["qid"])[: s.queries] if s.queries else list(topics["qid"])
    if s.corpus == "all":
        return set(qids), None, None
    rng = np.random.default_rng(s.seed)
    docs = {d for q in qids for d in [*qrels.get(q, {}), *excluded.get(q, [])]}
    images: set[str] = set()
    if mm is not None:
        t = mm.topics.set_index("qid")
        for q in qids:
            if q in t.index:
                docs |= {*mm.qrels["task2"].get(q, {}), *mm.excluded["task2"].get(q, [])}
                images |= set(t.at[q, "positive_images"]) | set(t.at[q, "negative_images"])
    kept_docs = _with_distractors(docs, corpus_ids, s.distractors, rng)  # documents drawn first, then images
    kept_images = _with_distractors(images, image_paths, s.distractors, rng) if mm is not None else None
    return set(qids), kept_docs, kept_images


def _with_distractors(judged: set[str], universe: list[str], n: int, rng: np.random.Generator) -> set[str]:
    rest = [x for x in universe if x not in judged]
    pick = rng.choice(len(rest), size=min(n, len(rest)), replace=False) if rest and n else []
    return judged | {rest[i] for i in pick}


def cut(frame: pd.DataFrame | None, column: str, keep: set[str] | None, *, ref: bool) -> pd.DataFrame | None:
    """The rows of a raw table whose ``column`` (an id, normalised like the loader does when ``ref``) is in
    ``keep``; the table itself when ``keep`` is None."""
    if frame is None or keep is None:
        return frame
    ids = [as_id(v, str(f), int(r), column) for v, f, r in zip(frame[column], frame["_file"], frame["_row"])]
    mask = [i is not None and (norm_ref(i) if ref else i) in keep for i in ids]
    return frame[mask]
