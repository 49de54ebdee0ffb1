"""The one audit of model calls: a thread-safe list of :class:`~mmir.llm.records.CallRecord` with the counts every
stage reports (per label, and the ``llm_calls`` / ``llm_failures`` pair of a stage's summary)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from mmir.llm.records import CallRecord

#: Per-label counters of :meth:`CallAudit.counts`.
COUNTERS = ("calls", "cached", "skipped", "generation_failures", "parse_failures", "partial", "fallbacks")


class CallAudit:
    """Thread-safe list of :class:`CallRecord` s.

    Args:
        records: initial records (e.g. read back from an ``audit.jsonl``).
    """

    def __init__(self, records: Iterable[CallRecord] = ()):
        self.records: list[CallRecord] = list(records)
        self._lock = threading.Lock()

    def add(self, record: CallRecord) -> CallRecord:
        """Append ``record`` and return it (callers may keep updating the same object)."""
        with self._lock:
            self.records.append(record)
        return record

    def __len__(self) -> int:
        return len(self.records)

    def mark(self) -> int:
        """Position now; :meth:`since` returns the records added after it."""
        with self._lock:
            return len(self.records)

    def since(self, mark: int) -> list[CallRecord]:
        """The records added after :meth:`mark` returned ``mark`` (concurrent callers' records included)."""
        with self._lock:
            return list(self.records[mark:])

    def for_context(self, **match) -> list[CallRecord]:
        """Records whose context holds every ``key=value`` of ``match``."""
        with self._lock:
            return [r for r in self.records if all(r.context.get(k) == v for k, v in match.items())]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per label: ``calls``, ``cached``, ``skipped`` (no call, a fallback value used), ``generation_failures``
        (no usable text), ``parse_failures`` (rejected replies), ``partial`` (parsed, fields missing/invalid)
        and ``fallbacks``."""
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            for r in self.records:
                c = out.setdefault(r.label, dict.fromkeys(COUNTERS, 0))
                c["calls"] += 1
                c["cached"] += int(r.cached)
                c["skipped"] += int(r.status == "skipped")
                c["generation_failures"] += int(r.status == "failed")
                c["parse_failures"] += int(r.status == "rejected")
                c["partial"] += int(r.parse_ok and bool(r.missing_fields or r.invalid_fields))
                c["fallbacks"] += int(r.fallback_used)
        return out

    def fallback_counts(self) -> dict[str, int]:
        """``{label: calls answered by the fixed fallback}`` (every label that made calls)."""
        return {m: c["fallbacks"] for m, c in self.counts().items()}

    def summary(self) -> dict[str, int]:
        """``{"llm_calls": model calls requested (cache hits included; skipped ones not), "llm_failures": calls
        that failed or whose reply was rejected}`` -- the two keys every stage writes into its summary JSON."""
        with self._lock:
            made = [r for r in self.records if r.status != "skipped"]
            return {"llm_calls": len(made), "llm_failures": sum(r.failed for r in made)}

    def to_jsonl(self) -> str:
        """All records as JSON lines."""
        with self._lock:
            return "".join(json.dumps(r.to_dict(), ensure_ascii=False, default=str) + "\n" for r in self.records)

    def write_jsonl(self, path: str | Path) -> None:
        """Write :meth:`to_jsonl` to ``path`` atomically."""
        from mmir.core.io import write_text

        write_text(path, self.to_jsonl())

    @classmethod
    def read_jsonl(cls, *paths: str | Path) -> CallAudit:
        """The records of one or more ``audit.jsonl`` files, in order (missing files are skipped)."""
        records = []
        for p in paths:
            f = Path(p)
            if f.exists():
                records += [CallRecord.from_dict(json.loads(x)) for x in f.read_text(encoding="utf-8").split("\n") if x.strip()]
        return cls(records)


def summed(*summaries: dict) -> dict[str, int]:
    """The ``llm_calls`` / ``llm_failures`` of several :meth:`CallAudit.summary` dicts added up."""
    return {k: sum(int(s.get(k, 0)) for s in summaries) for k in ("llm_calls", "llm_failures")}
