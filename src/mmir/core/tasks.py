"""The retrieval tasks (MM-BRIGHT §3.1, §4.1), one :class:`TaskSpec` each: the one place a task is defined.

Rules, retrieval, scoring and reporting read :data:`TASKS` at call time, so a task added here (or by a test,
through ``monkeypatch.setitem(TASKS, ...)``) is planned, retrieved, scored and reported with no other edit.

``ablation`` is the path segment of the Task 1 query-ablation runs (caption-augmented and reformulated queries,
§5): Task 1's items, qrels and exclusions under their own ``results/runs/ablation`` paths; it has no table of its
own (``table=False``): its runs are read by the ablation grids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Ranked = Literal["documents", "images", "pairs"]


@dataclass(frozen=True)
class TaskSpec:
    """One task.

    Attributes:
        name: the task's id (config ``tasks``, the ``{task}`` wildcard, path segments).
        label: the table title, e.g. ``"Task 4: text + image query → (document, image) pairs"``.
        short: the short label (``"Task 4"``).
        ranks: what a run ranks: corpus ``documents``, decodable corpus ``images`` or (document, image) ``pairs``.
        queries: the prepared topics file (``topics.parquet`` text only, ``topics_mm.parquet`` with images).
        multimodal: runs only on domains with multimodal data; text systems see images as image text.
        graded: its qrels hold graded labels (Task 4 paper: 2 = pair relevant, 1 = document only).
        qrels: the prepared qrels file it is scored against.
        qrels_official: under ``evaluation.task4_protocol: official``, the released scripts' labels (binary)
            instead of :attr:`qrels`; ``None``: the task has no label protocol.
        excluded: items removed under ``evaluation.protocol: official`` (the query's ``negative_ids``).
        excluded_always: items removed under every protocol (Task 4 paper: pairs with a negative image).
        dense_kinds: the encoded kinds a dense system's retrieve job reads (items first, then queries).
        mm_kinds: the item kinds a multimodal system reads (plus its query kinds); ``None``: multimodal systems do
            not run this task (Task 1, text only: the paper's Table 3).
        table: has its own table, MLflow record and DVC stage (``ablation`` does not).
        excluded_note, excluded_always_note: what :attr:`excluded` and :attr:`excluded_always` remove, as a table's
            caption says it; ``kept_note``: why nothing is removed under ``official`` where nothing is.
    """

    name: str
    label: str
    short: str
    ranks: Ranked
    queries: str
    multimodal: bool
    graded: bool
    qrels: str
    qrels_official: str | None
    excluded: str | None
    excluded_always: str | None
    dense_kinds: tuple[str, ...]
    mm_kinds: tuple[str, ...] | None
    table: bool = True
    excluded_note: str = "its negative_ids, if its dataset has any, as the MM-BRIGHT code does"
    excluded_always_note: str = ""
    kept_note: str = ""

    def qrels_file(self, task4_protocol: str = "paper") -> str:
        """The qrels file under the label protocol (``evaluation.task4_protocol``)."""
        return self.qrels_official if self.qrels_official and task4_protocol == "official" else self.qrels

    def excluded_files(self, protocol: str, task4_protocol: str = "paper") -> list[str]:
        """The exclusion files under ``protocol`` and the label protocol. The released ``task4_pair.py`` passes
        document ids as exclusions, which never match a pair id: its labels (``official``) come with none."""
        if self.qrels_official and task4_protocol == "official":
            return []
        return ([self.excluded] if protocol == "official" and self.excluded else []) + \
            ([self.excluded_always] if self.excluded_always else [])

    def exclusion_note(self, protocol: str, task4_protocol: str = "paper") -> str:
        """What each query's ranking loses under ``protocol`` and the label protocol (:meth:`excluded_files`), in words:
        a task table's caption."""
        files = self.excluded_files(protocol, task4_protocol)
        removed = [n for f, n in ((self.excluded, self.excluded_note), (self.excluded_always, self.excluded_always_note))
                   if f and f in files]
        labels_official = bool(self.qrels_official) and task4_protocol == "official"
        kept = ("negative_ids kept, so hard negatives compete" if protocol != "official" and self.excluded and not labels_official
                else "" if removed else self.kept_note)
        return "; ".join([*(["removed from each query's ranking: " + "; ".join(removed)] if removed else ["nothing removed"]),
                          *([kept] if kept else [])])

    @property
    def retrieve_files(self) -> list[str]:
        """The prepared files its retrieve job reads: items, queries, exclusions."""
        return [*(["corpus.parquet"] if self.ranks != "images" else []), self.queries,
                *(["images.parquet"] if self.ranks != "documents" else []),
                *(["pairs.parquet"] if self.ranks == "pairs" else []),
                *([self.excluded] if self.excluded else []), *([self.excluded_always] if self.excluded_always else [])]


TASK1 = TaskSpec("task1", "Task 1: text query → documents", "Task 1", "documents", "topics.parquet", False, False,
                 "qrels.task1.txt", None, "excluded.tsv", None, ("documents", "queries"), None)
TASK2 = TaskSpec("task2", "Task 2: text + image query → documents", "Task 2", "documents", "topics_mm.parquet", True,
                 False, "qrels.task2.txt", None, "excluded.task2.tsv", None, ("documents", "mm_queries"), ("documents",))
TASK3 = TaskSpec("task3", "Task 3: text + image query → images", "Task 3", "images", "topics_mm.parquet", True, False,
                 "qrels.task3.txt", None, None, None, ("images", "mm_queries"), ("images",),
                 kept_note="under either protocol: the released code's exclusions are the query's negative_ids, document ids, "
                 "which never match an image")
TASK4 = TaskSpec("task4", "Task 4: text + image query → (document, image) pairs", "Task 4", "pairs", "topics_mm.parquet",
                 True, True, "qrels.task4.txt", "qrels.task4.official.txt", "excluded.task4.tsv",
                 "excluded.task4.always.tsv", ("pairs", "mm_queries"), ("documents", "images"),
                 excluded_note="every pair of its negative_ids documents, if its dataset has any, as the MM-BRIGHT code does",
                 excluded_always_note="pairs whose image is annotated negative for it (under both protocols)",
                 kept_note="the released task4_pair.py (task4 labels official) passes document ids as exclusions, which "
                 "never match a pair id")
#: Task 1 with query variants (encoded inline by the retrieve job: no stored query kind)
ABLATION = TaskSpec("ablation", "Task 1 query ablation", "Ablation", "documents", "topics.parquet", False, False,
                    "qrels.task1.txt", None, "excluded.tsv", None, ("documents",), None, table=False)

#: every task by name, in table order
TASKS: dict[str, TaskSpec] = {t.name: t for t in (TASK1, TASK2, TASK3, TASK4, ABLATION)}
ABLATION_TASK = ABLATION.name
#: the task whose runs the ablation grids compare against (their base systems' runs)
ABLATION_BASE = TASK1.name


def task(name: str) -> TaskSpec:
    """The spec of ``name``. Raises: KeyError naming the known tasks."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}") from None


def table_tasks() -> list[str]:
    """The tasks with a table of their own (config ``tasks`` chooses among these), in table order."""
    return [t.name for t in TASKS.values() if t.table]
