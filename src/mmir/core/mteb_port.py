"""The MTEB port of MM-BRIGHT (embeddings-benchmark/mteb pull request #5168, ``mteb/tasks/retrieval/eng/
mm_bright_retrieval.py`` at the PR head 5849964e): its task names, split, subsets, languages and main score, which
mmir's MTEB result files carry (:mod:`mmir.reporting.mteb_export`) and mteb models are prompted for
(:mod:`mmir.encoders.mteb_text`). mteb 2.26.24 (the ``mmir[mteb]`` pin) predates the port, so these are copied here.
"""

from __future__ import annotations

#: mmir task -> the port's task name (the PR head has all four; its description says Task 4 was dropped in review)
TASK_NAMES = {"task1": "MMBrightT2TRetrieval", "task2": "MMBrightIT2TRetrieval", "task3": "MMBrightIT2IRetrieval",
              "task4": "MMBrightIT2ITRetrieval"}
#: the port's one evaluation split; its hf_subsets are the 29 domains (mmir.data.domains.MM_BRIGHT_DOMAINS)
SPLIT = "test"
#: every subset's eval_langs
LANGUAGES = ["eng-Latn"]
#: the port's main_score (nDCG@10 as a fraction)
MAIN_SCORE = "ndcg_at_10"
#: the hub dataset and revision the port loads
DATASET = "mm-bright/MM-BRIGHT"
DATASET_REVISION = "97702ca9ea81cd0a25288e74a9402439550d6bd4"
REFERENCE = "https://arxiv.org/abs/2601.09562"
#: the port's query instruction of Task 1 (its TaskMetadata.prompt), which mteb's instruction models read
T2T_QUERY_PROMPT = "Given a technical question, retrieve passages that provide the reasoning needed to answer it."


def task_metadata_fields(domains: list[str]) -> dict:
    """The keyword arguments of ``mteb.TaskMetadata`` for the port's Task 1 (``MMBrightT2TRetrieval``, type Retrieval,
    text to text) over ``domains`` (its hf_subsets), as the PR defines it."""
    return dict(name=TASK_NAMES["task1"], type="Retrieval", category="t2t", modalities=["text"],
                description="MM-BRIGHT text queries retrieving reasoning-intensive technical passages across 29 domains.",
                reference=REFERENCE, dataset={"path": DATASET, "revision": DATASET_REVISION}, eval_splits=[SPLIT],
                eval_langs={d: list(LANGUAGES) for d in domains}, main_score=MAIN_SCORE, date=("2025-01-01", "2026-01-15"),
                domains=["Academic", "Web", "Medical", "Legal", "Religious"], task_subtypes=["Reasoning as Retrieval"],
                license="cc-by-4.0", annotations_creators="expert-annotated", dialect=[], sample_creation="found",
                bibtex_citation="", prompt={"query": T2T_QUERY_PROMPT})


def task_of(task_name: str) -> str | None:
    """The mmir task of an MTEB task name: the port's own (``MMBrightT2TRetrieval``) or mmir's export of another
    dataset (``MMBrightT2TRetrieval-openstax``); None for any other task."""
    for task, name in TASK_NAMES.items():
        if task_name == name or task_name.startswith(name + "-"):
            return task
    return None
