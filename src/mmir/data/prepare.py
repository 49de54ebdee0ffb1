"""Normalise one (dataset, domain) into typed on-disk artifacts and check its integrity.

Outputs, in ``data/prepared/<dataset>/<domain>/``:

- ``corpus.parquet``   doc_id (str), text (str)
- ``topics.parquet``   qid (str), query (str), image_paths (list[str]), gold_answers (list[str])
- ``qrels.task1.txt``  TREC qrels of Task 1 (binary: gold_ids -> 1)
- ``excluded.tsv``     qid, doc_id: the query's negative_ids found in the corpus (the MM-BRIGHT code
                       removes them from the ranking; ``protocol: official``)
- ``prepare.json``     counts, warnings, judged items that cannot be retrieved, and the source files read

and for Tasks 2–4 (:mod:`mmir.data.multimodal`; empty when the dataset has no ``examples_multimodal``):

- ``topics_mm.parquet``      qid, query, image_paths, positive_images, negative_images
- ``images.parquet``         the corpus images (path, sha256, alt, bytes, width, height, ok; ``ok`` False =
                             undecodable: kept so its judgments count, never retrieved)
- ``query_images.parquet``   the query images (same columns)
- ``pairs.parquet``          Task 4 items: pair_id, doc_id, image_path ("" for the text-only pair)
- ``qrels.task2.txt``, ``qrels.task3.txt``, ``qrels.task4.txt`` (graded 2/1, ``task4_protocol: paper``),
  ``qrels.task4.official.txt`` (binary, every pair of a gold passage: ``task4_protocol: official``)
- ``excluded.task2.tsv``     the multimodal queries' negative_ids (removed under ``protocol: official``)
- ``excluded.task4.tsv``     pairs of negative_ids documents (paper protocol, removed under ``protocol: official``)
- ``excluded.task4.always.tsv``  pairs with an image annotated negative (paper protocol, every ``protocol``)

Both query configs (``examples`` and ``examples_multimodal``) get the same checks and policies; the counts
of the second are prefixed ``mm_``. Integrity rules (each names file, 0-based row and field):

| problem                              | default | why |
|--------------------------------------|---------|-----|
| empty or missing document id         | error   | |
| duplicate document id                | error   | `integrity.duplicate_doc_ids: warn` keeps the first |
| text that is not valid UTF-8         | error   | names the id and the byte offset |
| empty/missing or duplicate query id  | error   | |
| empty query text                     | error   | a blank query cannot be ranked |
| null where a list is required        | error   | `integrity.null_lists: warn` reads it as [] (counted, with ids) |
| gold id absent from the corpus       | error   | `integrity.missing_gold: warn` drops it from the qrels |
| excluded id that is also gold        | warn    | BRIGHT's data has such overlaps; the id stays excluded under `official`    |
|                                      |         | (as the released code does)                                                |
| query without any gold id            | warn    | it cannot be scored and is left out of the qrels |
| query image not in examples_images   | warn    | `missing_query_images`; dropped from the query's images |
| positive image not in document_images| warn    | `missing_positive_images`; dropped from the Task 3/4 qrels |
| more than `max_missing_share` of a domain's query or positive image references unresolved | error | a wrong root or path convention |
| duplicate image path, identical bytes| count   | kept once (`duplicate_images_identical`); different bytes are an error |
| optional column absent               | warn    | `column_missing` (e.g. no `positive_images`: no Task 3 qrels) |

Nothing is written unless every check passes, and every file is written atomically.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.config.models import Dataset, EvaluationConfig, IntegrityConfig, TrecDataset, default_of, parse_dataset
from mmir.core.errors import DataError
from mmir.core.io import write_json, write_parquet, write_text
from mmir.core.paths import resolve_path
from mmir.core.tasks import task as task_spec
from mmir.data.images import check_relative
from mmir.data.multimodal import IMAGE_COLUMNS, MultimodalPrepared
from mmir.data.parquet import (
    as_answers,
    as_id,
    as_ref_list,
    as_text,
    norm_ref,
    read_config,
)
from mmir.data.sample import Sample, cut, kept_items

log = logging.getLogger(__name__)

PREPARED_FILES = ("corpus.parquet", "topics.parquet", "qrels.task1.txt", "excluded.tsv", "prepare.json")
MM_FILES = ("topics_mm.parquet", "images.parquet", "query_images.parquet", "pairs.parquet", "qrels.task2.txt",
            "qrels.task3.txt", "qrels.task4.txt", "qrels.task4.official.txt", "excluded.task2.tsv",
            "excluded.task4.tsv", "excluded.task4.always.tsv")
ALL_FILES = PREPARED_FILES + MM_FILES


def qrels_file(task: str, task4_protocol: str = default_of(EvaluationConfig, "task4_protocol")) -> str:
    """The prepared qrels file a task is scored against: ``qrels.<task>.txt``, and for Task 4 under
    ``evaluation.task4_protocol: official`` the released scripts' labels ``qrels.task4.official.txt``
    (``ablation`` runs are Task 1 runs): :meth:`mmir.core.tasks.TaskSpec.qrels_file`."""
    return task_spec(task).qrels_file(task4_protocol)


@dataclass
class Prepared:
    """One domain, normalised. ``qrels``: {qid: {doc_id: rel}}; ``excluded``: {qid: [doc_id]}."""

    corpus: pd.DataFrame
    topics: pd.DataFrame
    qrels: dict[str, dict[str, int]]
    excluded: dict[str, list[str]]
    report: dict = field(default_factory=dict)
    mm: MultimodalPrepared | None = None


#: the reader module of each source read into the MM-BRIGHT tables (a ``read_frames(ds, domain, raw_root)`` ->
#: :class:`mmir.data.frames.SourceFrames`)
SOURCE_READERS = {"beir": "mmir.data.beir", "ir_datasets": "mmir.data.irds", "bright": "mmir.data.bright"}

# Defaults of datasets.<name>.integrity, from its model.
DEFAULT_POLICY = IntegrityConfig().model_dump()
_SAMPLE = 3  # references named in an aggregated message


class _Checks:
    def __init__(self, policy: dict, root: str = "the dataset"):
        self.policy = DEFAULT_POLICY | (policy or {})
        self.root = root
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[str]] = {}

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

    def unresolved(self, kind: str, refs: list[tuple], total: int, what: str, table: str, prefix: str = "") -> None:
        """References that name nothing (``refs``: (file, row, field, qid, ref) of ``total`` references).

        Stops with a DataError when more than ``max_missing_share`` of them are unresolved (a wrong root or
        a path convention that differs between the tables cannot pass as warnings); otherwise applies the
        ``kind`` policy to all of them at once, naming the first few query ids and references.
        """
        if not refs:
            return
        f, r, fld = refs[0][:3]
        sample = "; ".join(f"query {q!r}: {ref!r}" for *_, q, ref in refs[:_SAMPLE])
        more = f" and {len(refs) - _SAMPLE} more" if len(refs) > _SAMPLE else ""
        msg = f"{len(refs)} of {total} {what} are not in {table} ({sample}{more})"
        share, limit = len(refs) / total, float(self.policy["max_missing_share"])
        if share > limit:
            raise DataError(f, f"{msg}: {share:.0%} of the domain's {what} do not resolve, more than "
                               f"integrity.max_missing_share = {limit:g}; check the dataset root "
                               f"({self.root}) and that both tables spell paths the same way", r, fld)
        self.problem(kind, DataError(f, msg, r, fld), prefix, n=len(refs))


def _check_corpus(docs: pd.DataFrame, checks: _Checks) -> pd.DataFrame:
    seen: dict[str, int] = {}
    ids, texts = [], []
    for did, text, f, r in zip(docs["id"], docs["content"], docs["_file"], docs["_row"]):
        raw = as_id(did, f, r, "id")
        if raw is None:
            raise DataError(f, "empty or missing document id", r, "id")
        did = norm_ref(raw)
        if did != raw:
            checks.counts["backslash_refs"] = checks.counts.get("backslash_refs", 0) + 1
        text = as_text(text, f, r, "content", f"the content of document {did!r}")
        if text is None:
            raise DataError(f, f"missing content for document {did!r}", r, "content")
        if did in seen:
            checks.problem(
                "duplicate_doc_ids",
                DataError(f, f"duplicate document id {did!r} (first at row {seen[did]})", r, "id"),
            )
            continue
        seen[did] = r
        ids.append(did)
        texts.append(text)
    return pd.DataFrame({"doc_id": ids, "text": texts})


_LISTS = ("gold_ids", "negative_ids", "image_paths", "positive_images", "negative_images")


def read_queries(ex: pd.DataFrame, config: str, doc_ids: set[str], checks: _Checks,
                 query_images: pd.DataFrame | None = None, images: pd.DataFrame | None = None) -> list[dict]:
    """Check one query config (``examples`` or ``examples_multimodal``, with ``_file``/``_row``) and return
    one record per query: ``qid, query, gold`` (ids in the corpus), ``negatives`` (in the corpus),
    ``gold_answers``, ``image_paths`` and, for the multimodal config, ``positive_images`` and
    ``negative_images``.

    ``query_images`` (checked ``examples_images``) resolves ``image_paths``: an absent or undecodable image
    is left out of the query's images. ``images`` (checked ``document_images``) resolves
    ``positive_images``. Both are None when the domain has no such table (the references are kept as they are).

    Raises:
        DataError: naming file, row and field (see the module docstring for every rule and policy).
    """
    prefix = "mm_" if config == "examples_multimodal" else ""
    wanted = _LISTS if prefix else _LISTS[:3]
    if len(ex):
        f0 = ex["_file"].iloc[0]
        for col in wanted:
            if col not in ex.columns:
                checks.note(f"{prefix}column_missing", f"{f0}, field '{col}': column absent; read as [] for every query"
                            + (" (no Task 3 qrels)" if col == "positive_images" else ""))
    qimg_ok = None if query_images is None else dict(zip(query_images["path"], query_images["ok"]))
    img_paths = None if images is None else set(images["path"])
    out, seen = [], {}
    missing_q, missing_p, n_qrefs, n_prefs = [], [], 0, 0
    for rec in ex.to_dict("records"):
        f, r = rec["_file"], rec["_row"]
        qid = as_id(rec["id"], f, r, "id")
        if qid is None:
            raise DataError(f, "empty or missing query id", r, "id")
        if qid in seen:
            raise DataError(f, f"duplicate query id {qid!r} (first at row {seen[qid]})", r, "id")
        seen[qid] = r
        query = as_text(rec["query"], f, r, "query", f"the text of query {qid!r}")
        if query is None or not query.strip():
            raise DataError(f, f"empty query text for query {qid!r}", r, "query")
        lists = {}
        for col in wanted:
            if col not in rec:
                lists[col] = []
                continue
            value = as_ref_list(rec[col], f, r, col, checks.counts)
            if value is None:
                checks.problem("null_lists", DataError(
                    f, f"null {col} for query {qid!r}: a list is required (integrity.null_lists: warn reads it as [])",
                    r, col), prefix)
                value = []
            lists[col] = value
        gold_ok = []
        for g in dict.fromkeys(lists["gold_ids"]):
            if g in doc_ids:
                gold_ok.append(g)
            else:
                checks.problem("missing_gold", DataError(f, f"gold id {g!r} of query {qid!r} is not in the corpus",
                                                         r, "gold_ids"), prefix)
        negatives = lists["negative_ids"]
        overlap = [n for n in negatives if n in set(gold_ok)]
        if overlap:
            checks.problem("excluded_overlaps_gold", DataError(
                f, f"query {qid!r}: {len(overlap)} excluded id(s) are also gold, e.g. {overlap[0]!r}", r, "negative_ids"), prefix)
        excl = [n for n in dict.fromkeys(negatives) if n in doc_ids]
        key = f"{prefix}excluded_not_in_corpus"
        checks.counts[key] = checks.counts.get(key, 0) + len(set(negatives)) - len(excl)
        if not gold_ok:
            checks.problem("no_gold", DataError(f, f"query {qid!r} has no gold id in the corpus; it is not scored",
                                                r, "gold_ids"), prefix)
        paths = []
        for p in lists["image_paths"]:
            try:
                check_relative(p, checks.root)
            except DataError as exc:
                raise DataError(f, f"unsafe image path: {exc}", r, "image_paths") from exc
            if qimg_ok is None:
                paths.append(p)
                continue
            n_qrefs += 1
            if p not in qimg_ok:
                missing_q.append((f, r, "image_paths", qid, p))
            elif qimg_ok[p]:
                paths.append(p)  # an undecodable query image (counted as query_images_corrupt) is left out
        q = {"qid": qid, "query": query, "gold": gold_ok, "negatives": excl, "image_paths": paths,
             "gold_answers": as_answers(rec.get("gold_answers"), f, r) if "gold_answers" in rec else []}
        if prefix:
            pos = list(dict.fromkeys(lists["positive_images"]))
            if img_paths is not None:
                n_prefs += len(pos)
                missing_p += [(f, r, "positive_images", qid, p) for p in pos if p not in img_paths]
                pos = [p for p in pos if p in img_paths]
            q |= {"positive_images": pos, "negative_images": lists["negative_images"]}
        out.append(q)
    checks.unresolved("missing_query_images", missing_q, n_qrefs, "query image references",
                      "examples_images", prefix)
    checks.unresolved("missing_positive_images", missing_p, n_prefs, "positive image references",
                      "document_images", prefix)
    return out


def _task1(queries: list[dict]):
    topics = pd.DataFrame([{k: q[k] for k in ("qid", "query", "image_paths", "gold_answers")} for q in queries],
                          columns=["qid", "query", "image_paths", "gold_answers"])
    qrels = {q["qid"]: {g: 1 for g in q["gold"]} for q in queries if q["gold"]}
    excluded = {q["qid"]: q["negatives"] for q in queries if q["negatives"]}
    return topics, qrels, excluded


def load_mmbright_domain(root: str | Path, domain: str, policy: dict, max_pixels: int = 89_478_485,
                         sample: Sample | None = None) -> Prepared:
    """Read one domain in the MM-BRIGHT layout and check it: ``documents`` and ``examples`` (Task 1), and
    when present ``examples_multimodal``, ``document_images``, ``examples_images`` (Tasks 2–4). ``sample``
    (:mod:`mmir.data.sample`) cuts the raw tables to a sample, then loads and checks the cut tables."""
    frames = {"docs": read_config(root, "documents", domain, ["id", "content"]),
              "ex": read_config(root, "examples", domain, ["id", "query", "gold_ids"]),
              "exm": read_config(root, "examples_multimodal", domain, ["id", "query", "gold_ids", "image_paths"],
                                 required=False)}
    if frames["exm"] is not None:
        frames["dimg"] = read_config(root, "document_images", domain, ["path", "bytes"])
        frames["qimg"] = read_config(root, "examples_images", domain, ["path", "bytes"], required=False)
    return load_frames(frames, root, policy, max_pixels, sample)


def load_frames(frames: dict, root: str | Path, policy: dict, max_pixels: int = 89_478_485, sample: Sample | None = None,
                graded: dict[str, dict[str, int]] | None = None) -> Prepared:
    """Check tables in the MM-BRIGHT layout, whatever source they were read from: ``docs`` (id, content), ``ex``
    (id, query, gold_ids, optional negative_ids, image_paths, gold_answers), ``exm`` (None, or examples_multimodal
    with ``dimg``/``qimg`` image tables), each with ``_file``/``_row`` naming the source file and row.

    ``graded``: the source's graded qrels ``{qid: {doc_id: rel}}``; the Task 1 qrels keep their grades (the gold
    ids are the entries with rel > 0). ``sample`` cuts the tables to a sample, then loads and checks the cut tables.

    Raises:
        DataError: naming file, row and field (module docstring).
    """
    p = _graded(_load_mmbright(frames, root, policy, max_pixels), graded)
    if sample is None:
        return p
    qids, docs, images = kept_items(p.topics, p.qrels, p.excluded, p.mm, sample, list(p.corpus["doc_id"]),
                                    list(p.mm.images["path"]) if p.mm is not None else [])
    qpaths = {x for t in ([p.topics] + ([p.mm.topics] if p.mm is not None else []))
              for q, paths_ in zip(t["qid"], t["image_paths"]) if q in qids for x in paths_}
    cutf = {"docs": cut(frames["docs"], "id", docs, ref=True), "ex": cut(frames["ex"], "id", qids, ref=False),
            "exm": cut(frames["exm"], "id", qids, ref=False)}
    if frames["exm"] is not None:
        cutf |= {"dimg": cut(frames["dimg"], "path", images, ref=True),
                 "qimg": cut(frames["qimg"], "path", qpaths, ref=True)}
    return _with_sample_report(_graded(_load_mmbright(cutf, root, policy, max_pixels), graded), p, sample)


def _graded(p: Prepared, graded: dict[str, dict[str, int]] | None) -> Prepared:
    if graded is not None:
        p.qrels = {q: {d: graded[q][d] for d in docs} for q, docs in p.qrels.items()}
    return p


def _with_sample_report(sampled: Prepared, full: Prepared, s: Sample) -> Prepared:
    sampled.report["sample"] = {
        "description": s.describe(), "queries": len(sampled.topics), "queries_full": len(full.topics),
        "documents": len(sampled.corpus), "documents_full": len(full.corpus),
        "images": len(sampled.mm.images) if sampled.mm is not None else 0,
        "images_full": len(full.mm.images) if full.mm is not None else 0}
    return sampled


def _load_mmbright(frames: dict, root: str | Path, policy: dict, max_pixels: int) -> Prepared:
    from mmir.data.multimodal import build_multimodal, check_images

    checks = _Checks(policy, str(root))
    docs, ex, exm = frames["docs"], frames["ex"], frames["exm"]
    corpus = _check_corpus(docs, checks)
    doc_ids = set(corpus["doc_id"])
    sources = set(docs["_file"]) | set(ex["_file"])
    images = qimages = None
    if exm is not None:
        dimg, qimg = frames["dimg"], frames["qimg"]
        images = check_images(dimg, "corpus", max_pixels, checks.counts, checks.examples, str(root))
        qimages = check_images(dimg.iloc[:0] if qimg is None else qimg, "query", max_pixels, checks.counts,
                               checks.examples, str(root))
        sources |= set(exm["_file"]) | set(dimg["_file"]) | (set(qimg["_file"]) if qimg is not None else set())
    topics, qrels, excluded = _task1(read_queries(ex, "examples", doc_ids, checks, qimages))
    mm = None
    if exm is not None:
        mm_queries = read_queries(exm, "examples_multimodal", doc_ids, checks, qimages, images)
        mm = build_multimodal(corpus, mm_queries, images, qimages, checks.counts)
    # not a problem: how many ids and paths had Windows separators (rewritten on both sides of each reference)
    normalised = checks.counts.pop("backslash_refs", 0)
    return Prepared(corpus, topics, qrels, excluded,
                    {"sources": sorted(sources), "problems": checks.counts, "examples": checks.examples,
                     "backslash_refs": normalised}, mm)


def load_trec_domain(ds: TrecDataset, policy: dict, sample: Sample | None = None) -> Prepared:
    """Read a TREC collection (documents, topics, qrels) and check it like an MM-BRIGHT domain; ``sample`` as
    :func:`load_mmbright_domain`."""
    from mmir.data.trec import read_qrels, read_trec_documents, read_trec_topics

    root = resolve_path(ds.root)
    corpus_path, topics_path, qrels_path = root / ds.corpus, root / ds.topics, root / ds.qrels
    docs = [(d, t, str(corpus_path), i) for i, (d, t) in enumerate(read_trec_documents(corpus_path))]
    docs_df = pd.DataFrame(docs, columns=["id", "content", "_file", "_row"])
    raw_qrels = {q: {norm_ref(d): r for d, r in v.items()} for q, v in read_qrels(qrels_path).items()}
    rows = []
    for i, (qid, text) in enumerate(read_trec_topics(topics_path, ds.topic_field)):
        rel = raw_qrels.get(qid, {})
        rows.append({"id": qid, "query": text, "gold_ids": [d for d, r in rel.items() if r > 0], "negative_ids": [],
                     "image_paths": [], "_file": str(topics_path), "_row": i})
    ex = pd.DataFrame(rows, columns=["id", "query", "gold_ids", "negative_ids", "image_paths", "_file", "_row"])
    # graded judgments (rel > 0) kept exactly as in the source qrels
    p = load_frames({"docs": docs_df, "ex": ex, "exm": None}, root, policy, sample=sample, graded=raw_qrels)
    p.report["sources"] = [str(corpus_path), str(topics_path), str(qrels_path)]
    return p


def prepare_domain(dataset: str, ds: Dataset | Mapping, domain: str, raw_root: str | Path | None = None) -> Prepared:
    """Load and check one domain of a validated dataset entry. ``raw_root`` overrides its ``root``
    (the fetched copy of an ``hf`` dataset); its ``sample`` cuts it to a sample (:mod:`mmir.data.sample`)."""
    ds = parse_dataset(ds, f"datasets.{dataset}")
    policy, sample = ds.integrity.model_dump(), ds.sample
    if ds.source == "trec":
        return load_trec_domain(ds, policy, sample)
    if ds.source in SOURCE_READERS:
        import importlib

        reader = importlib.import_module(SOURCE_READERS[ds.source])
        src = reader.read_frames(ds, domain, raw_root)
        p = load_frames(src.frames, src.root, policy, sample=sample, graded=src.graded)
        p.report |= src.report
        return p
    root = Path(raw_root) if raw_root is not None else resolve_path(ds.root)
    return load_mmbright_domain(root, domain, policy, sample=sample)


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
        write_qrels(stage / task_spec("task1").qrels, p.qrels)
        _write_excluded(stage / task_spec("task1").excluded, p.excluded)
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
        empty = pd.DataFrame(columns=IMAGE_COLUMNS)
        mm = MultimodalPrepared(
            pd.DataFrame(columns=["qid", "query", "image_paths", "positive_images", "negative_images"]), empty, empty,
            pd.DataFrame(columns=["pair_id", "doc_id", "image_path"]),
            {"task2": {}, "task3": {}, "task4": {}, "task4_official": {}}, {"task2": {}, "task4": {}}, {},
            {"unretrievable": {"task2": 0, "task3": 0, "task4": 0, "task4_official": 0}})
    report["multimodal"] = bool(len(mm.topics))
    report.update(mm.report)
    write_parquet(stage / "topics_mm.parquet", mm.topics)
    write_parquet(stage / "images.parquet", mm.images)
    write_parquet(stage / "query_images.parquet", mm.query_images)
    write_parquet(stage / "pairs.parquet", mm.pairs)
    # the labels the multimodal data carries (mmir.data.multimodal), under the file names of their tasks
    for name in ("task2", "task3", "task4"):
        spec = task_spec(name)
        write_qrels(stage / spec.qrels, mm.qrels[name])
        if spec.qrels_official:
            write_qrels(stage / spec.qrels_official, mm.qrels[f"{name}_official"])
        if spec.excluded:
            _write_excluded(stage / spec.excluded, mm.excluded[name])
        if spec.excluded_always:
            _write_excluded(stage / spec.excluded_always, mm.always_excluded)


def read_excluded(path: str | Path) -> dict[str, set[str]]:
    """``excluded.tsv`` as ``{qid: {doc_id}}``."""
    out: dict[str, set[str]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines()[1:]:
        if line:
            q, d = line.split("\t")
            out.setdefault(q, set()).add(d)
    return out
