"""Items removed from each query's ranking before the top-k cut (MM-BRIGHT §4.1 and its released code).

``evaluation.protocol: official`` removes the query's ``negative_ids`` (Task 1 ``excluded.tsv``, Task 2
``excluded.task2.tsv``, Task 4 ``excluded.task4.tsv``: the pairs of those documents); ``strict`` removes nothing.
Task 4 under ``evaluation.task4_protocol: paper`` also removes, under every protocol, the pairs whose image is
annotated negative for the query (``excluded.task4.always.tsv``); under ``task4_protocol: official`` it removes
nothing, as the released ``task4_pair.py`` (it passes document ids as exclusions, which never match a pair id).
Task 3 has no exclusion (the released code passes document ids, which never match an image).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mmir.core.tasks import task as task_spec
from mmir.data.prepare import read_excluded


def exclusions(prep: str | Path, task: str, protocol: str, task4_protocol: str = "paper") -> dict[str, set[str]]:
    """``{qid: {item ids removed}}`` of ``task`` under ``protocol`` / ``task4_protocol`` (module docstring)."""
    prep = Path(prep)
    files = task_spec(task).excluded_files(protocol, task4_protocol)
    out: dict[str, set[str]] = {}
    for name in files:
        if (prep / name).exists():
            for q, ids in read_excluded(prep / name).items():
                out.setdefault(q, set()).update(ids)
    return out


def as_indices(qids: Sequence[str], item_ids: Sequence[str], excluded: dict[str, set[str]]) -> list[set[int]]:
    """The exclusions as item row numbers, one set per query (ids not among the items are ignored)."""
    pos = {d: i for i, d in enumerate(item_ids)}
    return [{pos[d] for d in excluded.get(q, ()) if d in pos} for q in qids]
