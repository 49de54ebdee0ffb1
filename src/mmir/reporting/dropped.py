"""What a task table says about the judgements prepare dropped under a ``warn`` policy (``datasets.<name>.integrity``):
from each domain's ``prepare.json`` ledger of qrels rows (``qrels_rows``, :class:`mmir.data.checks.Checks`), one
sentence per dataset that dropped any, so a score computed on fewer judgements than the source holds says so."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

#: ledger reasons that a warn policy drops (the others, grade 0 and repeated rows, drop nothing the source judged
#: relevant), with the policy's key
POLICY_DROPS = {"missing_gold": "missing_gold", "unknown_query": "qrels_unknown_query"}


def qrels_drop_notes(prepare_files: Iterable[str | Path]) -> list[str]:
    """One caption line per dataset whose prepare dropped qrels rows under a warn policy, e.g. ```x`: prepare dropped
    3 of its 120 qrels rows under warn policies (integrity.missing_gold: 3 in statistics)```; none otherwise."""
    by_dataset: dict[str, dict] = {}
    for f in prepare_files:
        rep = json.loads(Path(f).read_text(encoding="utf-8"))
        ledger = rep.get("qrels_rows") or {}
        d = by_dataset.setdefault(rep.get("dataset", "?"), {"read": 0, "dropped": {}})
        d["read"] += int(ledger.get("read", 0))
        for reason, key in POLICY_DROPS.items():
            n = int((ledger.get("dropped") or {}).get(reason, 0))
            if n:
                d["dropped"].setdefault(key, []).append(f"{n} in {rep.get('domain', '?')}")
    notes = []
    for dataset, d in by_dataset.items():
        total = sum(int(part.split()[0]) for parts in d["dropped"].values() for part in parts)
        if total:
            detail = "; ".join(f"integrity.{key}: {', '.join(parts)}" for key, parts in d["dropped"].items())
            notes.append(f"`{dataset}`: prepare dropped {total} of its {d['read']} qrels rows under warn policies "
                         f"({detail}); the scores use the rest.")
    return notes
