"""Normalise one (dataset, domain) into typed on-disk artifacts and check its integrity.

Outputs, in ``data/prepared/<dataset>/<domain>/``:

- ``corpus.parquet``   doc_id (str), text (str)
- ``topics.parquet``   qid (str), query (str), image_paths (list[str]), gold_answers (list[str])
- ``qrels.task1.txt``  TREC qrels of Task 1 (binary: gold_ids -> 1)
- ``excluded.tsv``     qid, doc_id: the query's negative_ids found in the corpus (the MM-BRIGHT code
                       removes them from the ranking; ``protocol: official``)
- ``prepare.json``     counts, warnings and the source files read

and for Tasks 2–4 (:mod:`mmir.data.multimodal`; empty when the dataset has no ``examples_multimodal``):

- ``topics_mm.parquet``      qid, query, image_paths, positive_images, negative_images
- ``images.parquet``         the corpus images (path, sha256, alt, bytes, width, height, ok)
- ``query_images.parquet``   the query images (same columns; ``ok`` False = corrupt, blank at encoding)
- ``pairs.parquet``          Task 4 items: pair_id, doc_id, image_path ("" for the text-only pair)
- ``qrels.task2.txt``, ``qrels.task3.txt``, ``qrels.task4.txt`` (graded 2/1)
- ``excluded.task2.tsv``     the multimodal queries' negative_ids (removed under ``protocol: official``)
- ``excluded.task4.tsv``     pairs of negative_ids documents (removed under ``protocol: official``)
- ``excluded.task4.always.tsv``  pairs with an image annotated negative (removed under every protocol)

Integrity rules (each names file, row and field):

| problem                          | default | why |
|----------------------------------|---------|-----|
| empty or missing document id     | error   | |
| duplicate document id            | error   | `integrity.duplicate_doc_ids: warn` keeps the first |
| duplicate query id               | error   | |
| empty query text                 | error   | a blank query cannot be ranked |
| gold id absent from the corpus   | error   | `integrity.missing_gold: warn` drops it from the qrels |
| excluded id that is also gold    | warn    | BRIGHT's data has such overlaps; the id stays excluded under `official` (as the released code does) |
| query without any gold id        | warn    | it cannot be scored and is left out of the qrels |

Nothing is written unless every check passes, and every file is written atomically.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.core.errors import DataError
from mmir.core.io import write_json, write_parquet, write_text
from mmir.core.paths import resolve_path
from mmir.data.multimodal import MultimodalPrepared
from mmir.data.parquet import as_str_list, read_config

log = logging.getLogger(__name__)

PREPARED_FILES = ("corpus.parquet", "topics.parquet", "qrels.task1.txt", "excluded.tsv", "prepare.json")
MM_FILES = ("topics_mm.parquet", "images.parquet", "query_images.parquet", "pairs.parquet", "qrels.task2.txt",
            "qrels.task3.txt", "qrels.task4.txt", "excluded.task2.tsv", "excluded.task4.tsv",
            "excluded.task4.always.tsv")
ALL_FILES = PREPARED_FILES + MM_FILES


@dataclass
class Prepared:
    """One domain, normalised. ``qrels``: {qid: {doc_id: rel}}; ``excluded``: {qid: [doc_id]}."""

    corpus: pd.DataFrame
    topics: pd.DataFrame
    qrels: dict[str, dict[str, int]]
    excluded: dict[str, list[str]]
    report: dict = field(default_factory=dict)
    mm: MultimodalPrepared | None = None


# Defaults of datasets.<name>.integrity (the schema states the same; a test keeps them equal).
DEFAULT_POLICY = {"missing_gold": "error", "duplicate_doc_ids": "error", "excluded_overlaps_gold": "warn", "no_gold": "warn"}


class _Checks:
    def __init__(self, policy: dict):
        self.policy = DEFAULT_POLICY | (policy or {})
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}

    def problem(self, kind: str, err: DataError) -> None:
        """Raise ``err`` when the policy for ``kind`` is error; count and remember it otherwise."""
        if self.policy[kind] == "error":
            raise err
        self.counts[kind] = self.counts.get(kind, 0) + 1
        ex = self.examples.setdefault(kind, [])
        if len(ex) < 5:
            ex.append(str(err))


def _check_corpus(docs: pd.DataFrame, checks: _Checks) -> pd.DataFrame:
    seen: dict[str, int] = {}
    keep = []
    for i, (did, text, f, r) in enumerate(zip(docs["id"], docs["content"], docs["_file"], docs["_row"])):
        if not isinstance(did, str) or not did.strip():
            raise DataError(f, "empty or missing document id", r, "id")
        if text is None or (isinstance(text, float) and pd.isna(text)):
            raise DataError(f, f"missing content for document {did!r}", r, "content")
        if did in seen:
            checks.problem(
                "duplicate_doc_ids",
                DataError(f, f"duplicate document id {did!r} (first at row {seen[did]})", r, "id"),
            )
            continue
        seen[did] = r
        keep.append(i)
    out = docs.iloc[keep]
    return pd.DataFrame({"doc_id": out["id"].astype(str).to_list(), "text": out["content"].astype(str).to_list()})


def _check_topics(ex: pd.DataFrame, doc_ids: set[str], checks: _Checks):
    topics, qrels, excluded = [], {}, {}
    seen: dict[str, int] = {}
    for rec in ex.to_dict("records"):
        f, r = rec["_file"], rec["_row"]
        qid = rec["id"]
        if not isinstance(qid, str):
            qid = None if qid is None or (isinstance(qid, float) and pd.isna(qid)) else str(qid)
        if not qid or not qid.strip():
            raise DataError(f, "empty or missing query id", r, "id")
        if qid in seen:
            raise DataError(f, f"duplicate query id {qid!r} (first at row {seen[qid]})", r, "id")
        seen[qid] = r
        query = rec["query"]
        if not isinstance(query, str) or not query.strip():
            raise DataError(f, f"empty query text for query {qid!r}", r, "query")
        gold = as_str_list(rec.get("gold_ids"), f, r, "gold_ids")
        negatives = as_str_list(rec.get("negative_ids"), f, r, "negative_ids")
        gold_ok = []
        for g in dict.fromkeys(gold):
            if g in doc_ids:
                gold_ok.append(g)
            else:
                checks.problem("missing_gold", DataError(f, f"gold id {g!r} of query {qid!r} is not in the corpus", r, "gold_ids"))
        gold_set = set(gold_ok)
        overlap = [n for n in negatives if n in gold_set]
        if overlap:
            checks.problem(
                "excluded_overlaps_gold",
                DataError(f, f"query {qid!r}: {len(overlap)} excluded id(s) are also gold, e.g. {overlap[0]!r}", r, "negative_ids"),
            )
        excl = [n for n in dict.fromkeys(negatives) if n in doc_ids]
        checks.counts["excluded_not_in_corpus"] = checks.counts.get("excluded_not_in_corpus", 0) + len(set(negatives)) - len(excl)
        if not gold_ok:
            checks.problem("no_gold", DataError(f, f"query {qid!r} has no gold id in the corpus; it is not scored", r, "gold_ids"))
        else:
            qrels[qid] = {g: 1 for g in gold_ok}
        if excl:
            excluded[qid] = excl
        topics.append(
            {
                "qid": qid,
                "query": query,
                "image_paths": as_str_list(rec.get("image_paths"), f, r, "image_paths"),
                "gold_answers": as_str_list(rec.get("gold_answers"), f, r, "gold_answers"),
            }
        )
    return pd.DataFrame(topics, columns=["qid", "query", "image_paths", "gold_answers"]), qrels, excluded


def load_mmbright_domain(root: str | Path, domain: str, policy: dict, max_pixels: int = 89_478_485) -> Prepared:
    """Read one domain in the MM-BRIGHT layout and check it: ``documents`` and ``examples`` (Task 1), and
    when present ``examples_multimodal``, ``document_images``, ``examples_images`` (Tasks 2–4)."""
    from mmir.data.multimodal import build_multimodal, check_images

    checks = _Checks(policy)
    docs = read_config(root, "documents", domain, ["id", "content"])
    ex = read_config(root, "examples", domain, ["id", "query", "gold_ids"])
    corpus = _check_corpus(docs, checks)
    topics, qrels, excluded = _check_topics(ex, set(corpus["doc_id"]), checks)
    sources = set(docs["_file"]) | set(ex["_file"])
    mm = None
    exm = read_config(root, "examples_multimodal", domain, ["id", "query", "gold_ids", "image_paths"], required=False)
    if exm is not None:
        dimg = read_config(root, "document_images", domain, ["path", "bytes"])
        qimg = read_config(root, "examples_images", domain, ["path", "bytes"], required=False)
        images = check_images(dimg, "corpus", max_pixels, checks.counts, checks.examples)
        qimages = check_images(dimg.iloc[:0] if qimg is None else qimg, "query", max_pixels, checks.counts, checks.examples)
        mm = build_multimodal(corpus, exm, images, qimages, checks.counts)
        sources |= set(exm["_file"]) | set(dimg["_file"]) | (set(qimg["_file"]) if qimg is not None else set())
    return Prepared(corpus, topics, qrels, excluded,
                    {"sources": sorted(sources), "problems": checks.counts, "examples": checks.examples}, mm)


def load_trec_domain(ds: dict, policy: dict) -> Prepared:
    """Read a TREC collection (documents, topics, qrels) and check it like an MM-BRIGHT domain."""
    from mmir.data.trec import read_qrels, read_trec_documents, read_trec_topics

    root = resolve_path(ds["root"])
    checks = _Checks(policy)
    corpus_path, topics_path, qrels_path = root / ds["corpus"], root / ds["topics"], root / ds["qrels"]
    docs = [(d, t, str(corpus_path), i) for i, (d, t) in enumerate(read_trec_documents(corpus_path))]
    docs_df = pd.DataFrame(docs, columns=["id", "content", "_file", "_row"])
    corpus = _check_corpus(docs_df, checks)
    raw_qrels = read_qrels(qrels_path)
    rows = []
    for i, (qid, text) in enumerate(read_trec_topics(topics_path, ds["topic_field"])):
        rel = raw_qrels.get(qid, {})
        rows.append({"id": qid, "query": text, "gold_ids": [d for d, r in rel.items() if r > 0], "_file": str(topics_path), "_row": i})
    ex = pd.DataFrame(rows, columns=["id", "query", "gold_ids", "_file", "_row"])
    topics, qrels, excluded = _check_topics(ex, set(corpus["doc_id"]), checks)
    # keep graded judgments (rel > 0) exactly as in the source qrels
    qrels = {q: {d: raw_qrels[q][d] for d in docs_} for q, docs_ in qrels.items()}
    return Prepared(corpus, topics, qrels, excluded, {"sources": [str(corpus_path), str(topics_path), str(qrels_path)], "problems": checks.counts, "examples": checks.examples})


def prepare_domain(dataset: str, ds: dict, domain: str, raw_root: str | Path | None = None) -> Prepared:
    """Load and check one domain of a validated dataset entry. ``raw_root`` overrides ``ds['root']``
    (the fetched copy of an ``hf`` dataset)."""
    policy = ds.get("integrity", {})
    if ds["source"] == "trec":
        return load_trec_domain(ds, policy)
    root = Path(raw_root) if raw_root is not None else resolve_path(ds["root"])
    return load_mmbright_domain(root, domain, policy)


def write_prepared(p: Prepared, out_dir: str | Path, meta: dict | None = None) -> dict:
    """Write the artifacts of :data:`PREPARED_FILES` atomically; returns the report written to prepare.json."""
    from mmir.data.trec import write_qrels

    out = Path(out_dir)
    n_qrels = sum(len(v) for v in p.qrels.values())
    report = {
        **(meta or {}),
        **p.report,
        "documents": len(p.corpus),
        "topics": len(p.topics),
        "topics_with_qrels": len(p.qrels),
        "qrels_task1": n_qrels,
        "excluded_pairs": sum(len(v) for v in p.excluded.values()),
    }
    # Stage every file in a sibling temp dir, then move them in: a failure while writing leaves the
    # previous artifacts (or nothing) in place, never a mix.
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        stage = Path(tmp)
        write_parquet(stage / "corpus.parquet", p.corpus)
        write_parquet(stage / "topics.parquet", p.topics)
        write_qrels(stage / "qrels.task1.txt", p.qrels)
        _write_excluded(stage / "excluded.tsv", p.excluded)
        _write_mm(p.mm, stage, report)
        write_json(stage / "prepare.json", report)
        out.mkdir(exist_ok=True)
        for name in ALL_FILES:
            os.replace(stage / name, out / name)
    return report


def _write_excluded(path: Path, excluded: dict[str, list[str]]) -> None:
    lines = [f"{q}\t{d}\n" for q in sorted(excluded) for d in excluded[q]]
    write_text(path, "qid\tdoc_id\n" + "".join(lines))


def _write_mm(mm, stage: Path, report: dict) -> None:
    """Task 2–4 artifacts (empty tables and qrels when the dataset has none, so every domain has the same files)."""
    from mmir.data.multimodal import MultimodalPrepared
    from mmir.data.trec import write_qrels

    if mm is None:
        empty = pd.DataFrame(columns=["path", "sha256", "alt", "bytes", "width", "height", "ok"])
        mm = MultimodalPrepared(
            pd.DataFrame(columns=["qid", "query", "image_paths", "positive_images", "negative_images"]), empty, empty,
            pd.DataFrame(columns=["pair_id", "doc_id", "image_path"]), {"task2": {}, "task3": {}, "task4": {}},
            {"task2": {}, "task4": {}}, {})
    report["multimodal"] = bool(len(mm.topics))
    report.update(mm.report)
    write_parquet(stage / "topics_mm.parquet", mm.topics)
    write_parquet(stage / "images.parquet", mm.images)
    write_parquet(stage / "query_images.parquet", mm.query_images)
    write_parquet(stage / "pairs.parquet", mm.pairs)
    for task in ("task2", "task3", "task4"):
        write_qrels(stage / f"qrels.{task}.txt", mm.qrels[task])
    _write_excluded(stage / "excluded.task2.tsv", mm.excluded["task2"])
    _write_excluded(stage / "excluded.task4.tsv", mm.excluded["task4"])
    _write_excluded(stage / "excluded.task4.always.tsv", mm.always_excluded)


def read_excluded(path: str | Path) -> dict[str, set[str]]:
    """``excluded.tsv`` as ``{qid: {doc_id}}``."""
    out: dict[str, set[str]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines()[1:]:
        if line:
            q, d = line.split("\t")
            out.setdefault(q, set()).add(d)
    return out
