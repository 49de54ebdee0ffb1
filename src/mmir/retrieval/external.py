"""External runs (``systems.<name>.kind: run``): a TREC run file made outside mmir, read and checked against its task
before it is scored (docs: "Your own system").

A line is ``qid Q0 docid rank score tag``, whitespace-separated (trec_eval's run format; ``Q0`` and ``tag`` are not
read). :func:`read_checked_run` refuses, with a :class:`RunFileError` naming the file, the 1-based line and the field:

- a line of other than six columns (field: the first missing column, or ``tag`` for extra ones);
- a ``rank`` that is not an integer, a ``score`` that is not a finite number;
- a ``qid`` that is not one of the task's topics;
- a ``docid`` that is not an item of the task: a corpus document id (Tasks 1-2), a decodable corpus image path (Task 3),
  a pair id ``<doc_id>|||<image_path>`` of ``pairs.parquet`` (Task 4);
- an item ranked twice for one query;
- ranks that contradict scores: TREC ranks the higher score first, so a larger rank with a strictly larger score than
  a smaller rank of the same query is an error;
- an empty file (no line at all); a line that is not UTF-8 text.

Ties are allowed: equal scores at different ranks keep their rank order, and lines sharing a rank are ordered by score,
then by item id descending (trec_eval's tie order), never by their order in the file. :func:`apply_protocol` then
removes the excluded items of the evaluation protocol (:mod:`mmir.retrieval.exclusions`, as for mmir's own systems)
and cuts each ranking to ``top_k``, counting both.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections.abc import Collection, Mapping
from pathlib import Path

from mmir.core.errors import DataError
from mmir.data.lines import fields
from mmir.retrieval.runs import Run

#: the columns of a TREC run line
FIELDS = ("qid", "Q0", "docid", "rank", "score", "tag")

#: how an error names the items of each kind of task (:attr:`mmir.core.tasks.TaskSpec.ranks`)
ITEM_WORDS = {"documents": "a document id of the prepared corpus (corpus.parquet)",
              "images": "a decodable image path of the prepared corpus images (images.parquet, ok = true)",
              "pairs": "a (document, image) pair id '<doc_id>|||<image_path>' of pairs.parquet"}


class RunFileError(DataError):
    """A bad line of an external run: ``file``, the 1-based ``line`` (None: the whole file) and the ``field``; ``more``:
    how many other lines have a problem (the message names the first)."""

    def __init__(self, file: str | Path, line: int | None, field: str | None, message: str, more: int = 0):
        super().__init__(str(file), message, None if line is None else line - 1, field)
        self.line, self.more = line, more
        where = [str(file)] + ([f"line {line}"] if line is not None else []) + ([f"field '{field}'"] if field else [])
        tail = f" ({more} more line{'s' if more != 1 else ''} with a problem)" if more else ""
        self.args = (f"{', '.join(where)}: {message}{tail}",)

    def __str__(self) -> str:
        return self.args[0]


def run_path(template: str, task: str, dataset: str, domain: str) -> str:
    """The run file of one unit: ``template`` (``{task}``, ``{dataset}``, ``{domain}``) filled, ``~`` and ``$VARS``
    expanded; a relative path stays relative (to the project directory, the working directory of every job)."""
    return os.path.expandvars(os.path.expanduser(template.format(task=task, dataset=dataset, domain=domain)))


@functools.lru_cache(maxsize=4096)
def _sha256(path: str, inode: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes; computed once per (path, inode, size, mtime, ctime) in a process (the DAG asks
    for it per job; a write changes the ctime even when the mtime is set back).

    Raises:
        OSError: the file cannot be read.
    """
    st = os.stat(path)
    return _sha256(os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Problems:
    """The first problem (by line) of a file and how many lines have one."""

    def __init__(self) -> None:
        self.first: tuple[int, str, str] | None = None
        self.count = 0

    def add(self, line: int, field: str, message: str) -> None:
        self.count += 1
        if self.first is None or line < self.first[0]:
            self.first = (line, field, message)


def read_checked_run(path: str | Path, qids: Collection[str], items: Collection[str], ranks: str = "documents",
                     task: str = "the task") -> Run:
    """Read an external TREC run and check it against its task (module docstring).

    Args:
        path: the run file.
        qids: the task's topic ids.
        items: the task's item ids (:func:`mmir.retrieval.items.task_items`).
        ranks: what the task ranks (``documents``, ``images``, ``pairs``), for the messages.
        task: the task's name, for the messages.

    Returns:
        ``{qid: [(item_id, score), ...]}`` in rank order (rank, then score descending, then item id descending); only the
        queries the file ranks.

    Raises:
        RunFileError: the first problem of the file by line (and how many lines have one).
        OSError: the file cannot be read.
    """
    known_q, known_i = set(qids), set(items)
    problems = _Problems()
    rows: dict[str, list[tuple[int, float, int, str]]] = {}
    seen: dict[tuple[str, str], int] = {}
    n_lines = 0
    with open(path, "rb") as fh:
        for i, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8-sig" if i == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise RunFileError(path, i, None, f"not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)") from exc
            parts = fields(line) if line.strip(" \t\r\n") else []
            if not parts:
                continue
            n_lines += 1
            if len(parts) != 6:
                field = FIELDS[len(parts)] if len(parts) < 6 else "tag"
                problems.add(i, field, f"{len(parts)} columns, expected 6: qid Q0 docid rank score tag"
                             + (" (a space inside an id?)" if len(parts) > 6 else f" ('{field}' is missing)"))
                continue
            qid, _, item, rank_s, score_s, _ = parts
            try:
                rank = int(rank_s)
            except ValueError:
                problems.add(i, "rank", f"{rank_s!r} is not an integer rank")
                continue
            try:
                score = float(score_s)
            except ValueError:
                problems.add(i, "score", f"{score_s!r} is not a number")
                continue
            if not math.isfinite(score):
                problems.add(i, "score", f"{score_s!r} is not a finite number")
                continue
            if qid not in known_q:
                problems.add(i, "qid", f"{qid!r} is not a topic of {task} (a run of another task, domain or sample?)")
                continue
            if item not in known_i:
                hint = " (Task 4 ranks pairs, not documents)" if ranks == "pairs" and "|||" not in item else ""
                problems.add(i, "docid", f"{item!r} is not an item of {task}: expected {ITEM_WORDS[ranks]}{hint}")
                continue
            first = seen.setdefault((qid, item), i)
            if first != i:
                problems.add(i, "docid", f"{item!r} is ranked twice for query {qid!r} (lines {first} and {i})")
                continue
            rows.setdefault(qid, []).append((rank, score, i, item))
    if n_lines == 0:
        raise RunFileError(path, None, None, "the run is empty: no line 'qid Q0 docid rank score tag'")
    run: Run = {}
    for qid, entries in rows.items():
        # rank, then score; lines of one rank and score in trec_eval's tie order (id descending), not the file's
        entries.sort(key=lambda e: e[3], reverse=True)
        entries.sort(key=lambda e: (e[0], -e[1]))
        _check_order(qid, entries, problems)
        run[qid] = [(item, score) for _, score, _, item in entries]
    if problems.first is not None:
        line, field, message = problems.first
        raise RunFileError(path, line, field, message, problems.count - 1)
    return run


def _check_order(qid: str, entries: list[tuple[int, float, int, str]], problems: _Problems) -> None:
    """Add a problem for each line whose score is higher than the lowest score of a smaller rank (``entries`` sorted by
    rank, then score descending)."""
    low: tuple[float, int, int] | None = None  # (score, rank, line) of the lowest score among the smaller ranks
    group_low: tuple[float, int, int] | None = None
    current = None
    for rank, score, line, _ in entries:
        if rank != current:  # a new rank: the previous ones' lowest score is the bound
            if group_low is not None and (low is None or group_low[0] < low[0]):
                low = group_low
            current, group_low = rank, None
        if low is not None and score > low[0]:
            problems.add(line, "rank", f"query {qid!r}: rank {rank} has score {score!r}, higher than the score {low[0]!r} "
                         f"of rank {low[1]} (line {low[2]}): a TREC run ranks higher scores first")
        if group_low is None or score < group_low[0]:
            group_low = (score, rank, line)


def apply_protocol(run: Run, excluded: Mapping[str, Collection[str]], top_k: int) -> tuple[Run, dict[str, int]]:
    """The run with each query's excluded items removed (:func:`mmir.retrieval.exclusions.exclusions` of the protocol),
    then cut to its first ``top_k``; a query left with no item is dropped (it scores 0, as one the file lacks).

    Returns:
        ``(run, counts)``: ``excluded_removed`` (items), ``queries_with_excluded_removed``, ``queries_emptied``,
        ``queries_cut_to_top_k``, ``items_cut_by_top_k``.
    """
    out: Run = {}
    counts = dict.fromkeys(("excluded_removed", "queries_with_excluded_removed", "queries_emptied", "queries_cut_to_top_k",
                            "items_cut_by_top_k"), 0)
    for qid, ranking in run.items():
        ex = excluded.get(qid) or ()
        kept = [(d, s) for d, s in ranking if d not in ex] if ex else list(ranking)
        if len(kept) < len(ranking):
            counts["excluded_removed"] += len(ranking) - len(kept)
            counts["queries_with_excluded_removed"] += 1
        if len(kept) > top_k:
            counts["queries_cut_to_top_k"] += 1
            counts["items_cut_by_top_k"] += len(kept) - top_k
            kept = kept[:top_k]
        if kept:
            out[qid] = kept
        else:
            counts["queries_emptied"] += 1
    return out, counts


def tie_counts(run: Run, depth: int = 10) -> dict[str, int]:
    """Items in each ranking's top ``depth`` whose score equals another's (in the top ``depth`` or the next one), summed,
    and the queries with any (as :func:`mmir.workflow.retrieval_steps.tie_stats` counts mmir's own runs): their order
    is the file's rank order (``tie_order: run``) or the item id (``tie_order: pytrec_eval``)."""
    tied, queries = 0, 0
    for ranking in run.values():
        scores = [s for _, s in ranking[:depth + 1]]
        n = sum(scores.count(v) > 1 for v in scores[:depth])
        tied += n
        queries += n > 0
    return {f"tied_top{depth}_items": tied, f"queries_with_ties_top{depth}": queries}
