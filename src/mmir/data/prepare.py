"""Normalise one (dataset, domain) into typed on-disk artifacts and check its integrity.

Outputs, in ``data/prepared/<dataset>/<domain>/`` (the item tables in trec_eval's tie order of their ids,
:func:`canonical_order`, not in the source's order):

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
of the second are prefixed ``mm_``. Integrity rules (each names the file, the 1-based line of a text file or the
0-based row of a table, and the field; the qrels rows' own rules: :mod:`mmir.data.judgements`):

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
| query without any judgement          | drop    | `integrity.unjudged_queries` (drop / keep / error): BEIR's loader |
|                                      |         | drops them; counted, first ids named                              |
| judged query without any gold id     | warn    | it cannot be scored and is left out of the qrels |
| no scorable query at all             | error   | `integrity.no_scorable_queries: warn` writes `scorable_queries: 0` and the reason |
| surrounding whitespace of a text     | strip   | `integrity.text_whitespace` (MTEB's `(title + " " + text).strip()`); counted |
| query image not in examples_images   | warn    | `missing_query_images`; dropped from the query's images |
| positive image not in document_images| warn    | `missing_positive_images`; dropped from the Task 3/4 qrels |
| more than `max_missing_share` of a domain's query or positive image references unresolved | error | a wrong root or path convention |
| duplicate image path, identical bytes| count   | kept once (`duplicate_images_identical`); different bytes are an error |
| optional column absent               | warn    | `column_missing` (e.g. no `positive_images`: no Task 3 qrels) |

Nothing is written unless every check passes, and every file is written atomically. ``prepare.json`` accounts for
every judgement and query read: ``qrels_rows`` / ``topic_rows`` = ``{read, written, dropped: {reason: n}}``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.config.models import Dataset, EvaluationConfig, default_of, parse_dataset
from mmir.core.errors import DataError
from mmir.core.io import write_json, write_parquet, write_text
from mmir.core.paths import ALL_FILES as ALL_FILES  # the file lists, re-exported
from mmir.core.paths import MM_FILES as MM_FILES
from mmir.core.paths import PREPARED_FILES as PREPARED_FILES
from mmir.core.paths import resolve_path
from mmir.core.tasks import task as task_spec
from mmir.data.checks import DEFAULT_POLICY as DEFAULT_POLICY  # the integrity defaults, re-exported
from mmir.data.checks import Checks
from mmir.data.multimodal import IMAGE_COLUMNS, MultimodalPrepared
from mmir.data.parquet import read_config
from mmir.data.rows import check_corpus, read_queries
from mmir.data.sample import Sample, cut, kept_items

log = logging.getLogger(__name__)


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
SOURCE_READERS = {"beir": "mmir.data.beir", "ir_datasets": "mmir.data.irds", "bright": "mmir.data.bright",
                  "trec": "mmir.data.trec"}


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
    return load_frames(frames, root, policy, max_pixels, sample, windows_ids=True)


def load_frames(frames: dict, root: str | Path, policy: dict, max_pixels: int = 89_478_485, sample: Sample | None = None,
                graded: dict[str, dict[str, int]] | None = None, prior: Checks | None = None,
                windows_ids: bool = False) -> Prepared:
    """Check tables in the MM-BRIGHT layout, whatever source they were read from: ``docs`` (id, content), ``ex``
    (id, query, gold_ids, optional negative_ids, image_paths, gold_answers), ``exm`` (None, or examples_multimodal
    with ``dimg``/``qimg`` image tables), each with ``_file``/``_row`` (and ``_line``) naming the source file and place.

    ``graded``: the source's graded qrels ``{qid: {doc_id: rel}}``; the Task 1 qrels keep their grades (the gold
    ids are the entries with rel > 0). ``prior``: what the source reader's own checks counted (its qrels rows).
    ``windows_ids``: a backslash in a document id is read as ``/`` (MM-BRIGHT's layout: :class:`Checks`); other
    sources keep ids as written.
    ``sample`` cuts the tables to a sample, then loads and checks the cut tables.

    Raises:
        DataError: naming file, line or row, and field (module docstring); no scorable query under
            ``integrity.no_scorable_queries: error``.
    """
    p = _graded(_load_mmbright(frames, root, policy, max_pixels, prior, windows_ids), graded)
    if sample is None:
        return _scorable(p, policy)
    qids, docs, images = kept_items(p.topics, p.qrels, p.excluded, p.mm, sample, list(p.corpus["doc_id"]),
                                    list(p.mm.images["path"]) if p.mm is not None else [])
    qpaths = {x for t in ([p.topics] + ([p.mm.topics] if p.mm is not None else []))
              for q, paths_ in zip(t["qid"], t["image_paths"]) if q in qids for x in paths_}
    cutf = {"docs": cut(frames["docs"], "id", docs, ref=windows_ids), "ex": cut(frames["ex"], "id", qids, ref=False),
            "exm": cut(frames["exm"], "id", qids, ref=False)}
    if frames["exm"] is not None:
        cutf |= {"dimg": cut(frames["dimg"], "path", images, ref=True),
                 "qimg": cut(frames["qimg"], "path", qpaths, ref=True)}
    sampled = _graded(_load_mmbright(cutf, root, policy, max_pixels, prior, windows_ids), graded)
    return _scorable(_with_sample_report(sampled, _scorable(p, policy), sample), policy)


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
    # the ledgers describe the source as read; the rows the sample leaves out are one more reason
    for key in ("qrels_rows", "topic_rows"):
        led = {**full.report[key], "dropped": dict(full.report[key]["dropped"])}
        written = sampled.report[key]["written"]
        if led["written"] > written:
            led["dropped"]["outside_sample"] = led["written"] - written
        sampled.report[key] = led | {"written": written}
    return sampled


def _scorable(p: Prepared, policy: dict) -> Prepared:
    """``scorable_queries`` (the topics with a relevant document in the Task 1 qrels) and, when 0, why; stops under
    ``integrity.no_scorable_queries: error`` (a table must never show a number for a domain nothing was scored on)."""
    n = len(p.qrels)
    p.report["scorable_queries"], p.report["scorable_reason"] = n, None
    if n:
        return p
    q, t = p.report["qrels_rows"], p.report["topic_rows"]
    where = p.report.get("qrels_files") or p.report["sources"]
    dropped = ", ".join(f"{k} {v}" for k, v in q["dropped"].items()) or "none"
    if "sample" in p.report:
        why = f"none of the sample's {len(p.topics)} queries has a relevant document in the corpus"
    elif t["read"] == 0:
        why, where = "the queries file holds no query", p.report["query_files"]
    elif q["read"] == 0:
        why = "the qrels hold no judgement"
    elif t["written"] == 0:
        why = f"none of the {t['read']} queries is judged (qrels rows: {q['read']} read, dropped: {dropped})"
    else:
        why = (f"none of the {t['written']} judged queries has a relevant document in the corpus (qrels rows: "
               f"{q['read']} read, dropped: {dropped})")
    p.report["scorable_reason"] = why
    err = DataError(where[0] if where else "the dataset", f"no scorable query: {why} (integrity.no_scorable_queries: warn "
                    "writes empty qrels, and prepare.json says scorable_queries: 0 and why)")
    if policy.get("no_scorable_queries", DEFAULT_POLICY["no_scorable_queries"]) == "error":
        raise err
    p.report["problems"]["no_scorable_queries"] = 1
    p.report["examples"]["no_scorable_queries"] = [str(err)]
    return p


def _load_mmbright(frames: dict, root: str | Path, policy: dict, max_pixels: int, prior: Checks | None = None,
                   windows_ids: bool = False) -> Prepared:
    from mmir.data.multimodal import build_multimodal, check_images

    checks = Checks(policy, str(root), windows_ids).merged(prior)
    docs, ex, exm = frames["docs"], frames["ex"], frames["exm"]
    corpus = check_corpus(docs, checks)
    doc_ids = set(corpus["doc_id"])
    sources = set(docs["_file"]) | set(ex["_file"]) | set(checks.qrels_files)
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
    query_files = checks.query_files or sorted(set(ex["_file"])) or [str(root)]
    return Prepared(corpus, topics, qrels, excluded,
                    {"sources": sorted(sources), "query_files": query_files, "qrels_files": checks.qrels_files or query_files,
                     "problems": checks.counts,
                     "examples": checks.examples, "backslash_refs": normalised,
                     "qrels_rows": checks.ledger("qrels", sum(len(v) for v in qrels.values())),
                     "topic_rows": checks.ledger("topics", len(topics)), "texts_stripped": checks.stripped}, mm)


def prepare_domain(dataset: str, ds: Dataset | Mapping, domain: str, raw_root: str | Path | None = None) -> Prepared:
    """Load and check one domain of a validated dataset entry. ``raw_root`` overrides its ``root``
    (the fetched copy of an ``hf`` dataset); its ``sample`` cuts it to a sample (:mod:`mmir.data.sample`)."""
    ds = parse_dataset(ds, f"datasets.{dataset}")
    policy, sample = ds.integrity.model_dump(), ds.sample
    try:
        if ds.source in SOURCE_READERS:
            import importlib

            reader = importlib.import_module(SOURCE_READERS[ds.source])
            src = reader.read_frames(ds, domain, raw_root)
            p = load_frames(src.frames, src.root, policy, sample=sample, graded=src.graded, prior=src.checks)
            p.report |= src.report
            return p
        root = Path(raw_root) if raw_root is not None else resolve_path(ds.root)
        return load_mmbright_domain(root, domain, policy, sample=sample)
    except DataError as e:
        # the readers name a policy as `integrity.<key>`; the user sets it under this dataset's entry
        if "(integrity." not in e.message:
            raise
        raise DataError(e.file, e.message.replace("(integrity.", f"(datasets.{dataset}.integrity."), e.row, e.field,
                        e.line) from e


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
        write_parquet(stage / "corpus.parquet", canonical_order(p.corpus, "doc_id"))
        write_parquet(stage / "topics.parquet", p.topics)
        write_qrels(stage / task_spec("task1").qrels, p.qrels)
        _write_excluded(stage / task_spec("task1").excluded, p.excluded)
        _write_mm(p.mm, stage, report)
        write_json(stage / "prepare.json", report)
        out.mkdir(exist_ok=True)
        for name in ALL_FILES:
            os.replace(stage / name, out / name)
    return report


def canonical_order(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """The rows of an item table (corpus, images, pairs) in trec_eval's tie order of their ids: ``columns`` descending
    by code point, which is ``strcmp`` of the UTF-8 bytes (trec_eval ``comp_sim_docno``; the default
    ``evaluation.tie_order: pytrec_eval``). Every retriever ranks equal scores by lower row, so a run lists ties, and
    picks the items that enter its top-k at a tie, as trec_eval orders them, whatever the order of the source file.
    Pairs sort by document first, so the pairs of a document shard stay one block (the encode stage's pair shards)."""
    return frame.sort_values(list(columns), ascending=False, kind="stable").reset_index(drop=True)


def log_report(report: dict, out_dir: str | Path, logger: logging.Logger = log) -> None:
    """The prepare rule's log of a ``prepare.json`` report: what was read and written, the account of the judgements
    and queries (:func:`accounting_lines`), each problem a policy let pass, the judged items that cannot be retrieved."""
    logger.info("read %s", ", ".join(report["sources"]))
    logger.info("wrote %s: %d documents, %d topics (%d with qrels), %d qrels, %d excluded pairs", out_dir, report["documents"],
                report["topics"], report["topics_with_qrels"], report["qrels_task1"], report["excluded_pairs"])
    for line in accounting_lines(report):
        logger.info("%s", line)
    for kind, n in report["problems"].items():
        if n:
            ex = report["examples"].get(kind)
            logger.warning("%s: %d (kept going, per integrity policy)%s", kind, n, f"; e.g. {ex[0]}" if ex else "")
    if any(report.get("unretrievable", {}).values()):
        logger.warning("judged items that cannot be retrieved (undecodable images; they count as misses): %s",
                       ", ".join(f"{t} {n}" for t, n in report["unretrievable"].items() if n))


def accounting_lines(report: dict) -> list[str]:
    """The prepare log's account of a ``prepare.json`` report: the judgements and queries read, written and dropped by
    reason (with the first query ids), the texts stripped, and the scorable queries (and why none)."""
    out = []
    for key, what in (("qrels_rows", "qrels rows"), ("topic_rows", "queries")):
        led = report.get(key)
        if not led:
            continue
        ids = led.get("dropped_ids", {})
        why = "; ".join(f"{r} {n}" + (f" (e.g. {', '.join(ids[r])})" if ids.get(r) else "") for r, n in led["dropped"].items())
        out.append(f"{what}: read {led['read']}, written {led['written']}, dropped {sum(led['dropped'].values())}"
                   + (f": {why}" if why else ""))
    stripped = {k: v for k, v in report.get("texts_stripped", {}).items() if v}
    if stripped:
        out.append("texts stripped of surrounding whitespace (integrity.text_whitespace): "
                   + ", ".join(f"{k} {v}" for k, v in stripped.items()))
    if "scorable_queries" in report:
        reason = report.get("scorable_reason")
        out.append(f"scorable queries: {report['scorable_queries']}" + (f" ({reason})" if reason else ""))
    return out


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
    write_parquet(stage / "images.parquet", canonical_order(mm.images, "path"))
    write_parquet(stage / "query_images.parquet", mm.query_images)
    write_parquet(stage / "pairs.parquet", canonical_order(mm.pairs, "doc_id", "pair_id"))
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
    """``excluded.tsv`` as ``{qid: {doc_id}}`` (lines: :mod:`mmir.data.lines`, ids kept exactly). Raises DataError
    naming the line of a row without two fields."""
    from mmir.data.lines import numbered, read_text

    out: dict[str, set[str]] = {}
    for n, line in list(numbered(read_text(path), path))[1:]:
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataError(path, f"expected 'qid<TAB>doc_id', got {len(parts)} field(s)", line=n)
        out.setdefault(parts[0], set()).add(parts[1])
    return out
