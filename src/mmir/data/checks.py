"""The integrity policies of one prepare (``datasets.<name>.integrity``) and what they counted.

:class:`Checks` raises a problem whose policy is ``error`` and counts it otherwise; it also keeps two ledgers, of the
judgements (qrels rows, or ``gold_ids`` entries) and of the queries, so that every row read is either written or
dropped for a named reason: ``read == written + sum(dropped)`` in ``prepare.json`` (``qrels_rows``, ``topic_rows``).
"""

from __future__ import annotations

from mmir.config.models import IntegrityConfig
from mmir.core.errors import DataError

#: Defaults of datasets.<name>.integrity, from its model.
DEFAULT_POLICY = IntegrityConfig().model_dump()
SAMPLE = 3  # references named in an aggregated message


class NearMiss:
    """Names the id of a set that differs from a missing one only by surrounding whitespace (ids are compared
    exactly; a near miss is what the user most likely has to fix)."""

    def __init__(self, ids):
        self._ids, self._index = ids, None

    def __call__(self, ref: str, where: str) -> str:
        """``"; <where> has 'x': the ids differ by surrounding whitespace ..."`` or ``""``."""
        if self._index is None:
            self._index = {}
            for i in self._ids:
                self._index.setdefault(_bare(i), i)
        hit = self._index.get(_bare(ref))
        if hit is None or hit == ref:
            return ""
        return f"; {where} has {hit!r}: the ids differ by surrounding whitespace (ids are compared exactly)"


def _bare(ref: str) -> str:
    return ref.strip().strip("\ufeff").strip()


class Checks:
    """Policies (``policy``: an ``integrity`` dump, defaults filled in) and their counts for one prepare;
    ``windows_ids``: the source's document ids follow MM-BRIGHT's path convention (backslash = ``/``)."""

    def __init__(self, policy: dict | None, root: str = "the dataset", windows_ids: bool = False):
        self.policy = DEFAULT_POLICY | (policy or {})
        self.root = root
        #: MM-BRIGHT's layout (``hf``, ``local``) alone reads a backslash in a document id as ``/``, as in its image
        #: paths (:func:`mmir.data.parquet.norm_ref`); every other source keeps ids as written
        self.windows_ids = windows_ids
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}
        self.rows: dict[str, dict] = {"qrels": {"read": 0, "dropped": {}}, "topics": {"read": 0, "dropped": {}}}
        self.dropped_ids: dict[str, list[str]] = {}
        self.stripped = {"documents": 0, "queries": 0}
        self.qrels_files: list[str] = []  # the qrels files a reader's judgements came from (prepare.json sources)
        self.query_files: list[str] = []  # the queries files a reader joined them to (named even when empty)

    def merged(self, prior: Checks | None) -> Checks:
        """This object with the counts of ``prior`` (a source reader's checks) added first; returns self."""
        if prior is not None:
            for k, n in prior.counts.items():
                self.counts[k] = self.counts.get(k, 0) + n
            for k, ex in prior.examples.items():
                self.examples.setdefault(k, []).extend(ex[: 5 - len(self.examples.get(k, []))])
            for table, ledger in prior.rows.items():
                self.rows[table]["read"] += ledger["read"]
                for reason, n in ledger["dropped"].items():
                    self.drop(table, reason, n)
            self.qrels_files += [f for f in prior.qrels_files if f not in self.qrels_files]
            self.query_files += [f for f in prior.query_files if f not in self.query_files]
            for k, ids in prior.dropped_ids.items():
                self.dropped_ids.setdefault(k, []).extend(ids)
        return self

    def problem(self, kind: str, err: DataError, prefix: str = "", n: int = 1) -> None:
        """Raise ``err`` when the policy for ``kind`` is error; count ``n`` (under ``prefix + kind``) and
        remember the message otherwise."""
        if self.policy[kind] == "error":
            raise err
        self.note(prefix + kind, str(err), n)

    def note(self, key: str, message: str, n: int = 1) -> None:
        """Count ``n`` occurrences of ``key`` and keep up to 5 messages."""
        self.counts[key] = self.counts.get(key, 0) + n
        ex = self.examples.setdefault(key, [])
        if len(ex) < 5:
            ex.append(message)

    def blank_lines(self, file, lines: list[int]) -> None:
        """Count the blank ``lines`` skipped in a line-based ``file`` (``blank_lines``, the first lines named): no row
        is lost, but a file with holes is named."""
        if lines:
            first = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
            self.note("blank_lines", f"{file}: {len(lines)} blank line{'s' if len(lines) != 1 else ''} skipped (line "
                      f"{first})", len(lines))

    def read(self, table: str, n: int = 1) -> None:
        """``n`` rows of ``table`` (``qrels`` or ``topics``) read from the source."""
        self.rows[table]["read"] += n

    def drop(self, table: str, reason: str, n: int = 1, ident: str | None = None) -> None:
        """``n`` rows of ``table`` not written, for ``reason``; ``ident`` (a query id) is kept among the first few."""
        dropped = self.rows[table]["dropped"]
        dropped[reason] = dropped.get(reason, 0) + n
        if ident is not None:
            ids = self.dropped_ids.setdefault(f"{table}.{reason}", [])
            if len(ids) < 5 and ident not in ids:
                ids.append(ident)

    def unresolved(self, kind: str, refs: list[tuple], total: int, what: str, table: str, prefix: str = "") -> None:
        """References that name nothing (``refs``: (file, row, field, qid, ref) of ``total`` references).

        Stops with a DataError when more than ``max_missing_share`` of them are unresolved (a wrong root or
        a path convention that differs between the tables cannot pass as warnings); otherwise applies the
        ``kind`` policy to all of them at once, naming the first few query ids and references.
        """
        if not refs:
            return
        f, r, fld = refs[0][:3]
        sample = "; ".join(f"query {q!r}: {ref!r}" for *_, q, ref in refs[:SAMPLE])
        more = f" and {len(refs) - SAMPLE} more" if len(refs) > SAMPLE else ""
        msg = f"{len(refs)} of {total} {what} are not in {table} ({sample}{more})"
        share, limit = len(refs) / total, float(self.policy["max_missing_share"])
        if share > limit:
            raise DataError(f, f"{msg}: {share:.0%} of the domain's {what} do not resolve, more than "
                               f"integrity.max_missing_share = {limit:g}; check the dataset root "
                               f"({self.root}) and that both tables spell paths the same way", r, fld)
        self.problem(kind, DataError(f, msg, r, fld), prefix, n=len(refs))

    def ledger(self, table: str, written: int) -> dict:
        """``{"read", "written", "dropped": {reason: n}, "dropped_ids": {reason: [first ids]}}`` of ``table``."""
        led = self.rows[table]
        ids = {k.split(".", 1)[1]: v for k, v in self.dropped_ids.items() if k.startswith(f"{table}.")}
        return {"read": led["read"], "written": written, "dropped": dict(led["dropped"]), "dropped_ids": ids}
