"""Where every artifact lives. Paths encode the experiment; Snakemake rules, DVC stages and the CLI all
use these functions, so the layout is defined once.

    data/raw/<dataset>/                               fetched hub files (hf source)
    data/prepared/<dataset>/<domain>/                 corpus, topics, qrels, excluded ids, images, pairs, report
    results/captions/<dataset>/<domain>/<captioner>.parquet   image text (path, role, text)
    results/queries/<dataset>/<domain>/<cap-X|ref-Y>.parquet   ablation queries (+ .json generation stats)
    results/vectors/<dataset>/<domain>/<system>/<kind>/   vector store: shard-NNNNN.npy, ids, manifest.json
    results/runs/<task>/<dataset>/<system>/<domain>.trec   (a reranked system <system>+rr:<reranker> also .calls.jsonl)
    results/metrics/<task>/<dataset>/<system>/<domain>.json  (+ .perquery.tsv)
    results/tables/<task>.{md,csv,metrics.json,significance.json}, results/tables/<grid>_ablation.{md,csv}
    metrics/<task>.json, metrics/<task>_forest.csv    committed (git) summary of a task table for DVC experiments
    results/tables/reproduction.{md,csv}              published / regression values vs this run
    results/plots/<grid>_ablation.{png,csv}
    results/rag/<dataset>/<domain>/<setting>/    answers, judgments, summary.json (RAG QA)
    results/m2rag/<dataset>/<domain>/<source>/kb.{jsonl,json}            M2RAG knowledge bases (+ counts)
    results/m2rag/<dataset>/<domain>/<source>/<strategy>/  answers, evaluations, summary.json, pages/*.html
    results/mmdr/<dataset>/<domain>/{tasks,reports,run}/  MMDR tasks, baseline reports, the scored run
    results/tables/mmdr/                              MMDR leaderboard export (task scores, leaderboard, manifest)
    results/report/tables/<name>.tex                  LaTeX export of each markdown table
    results/report/{index.html,lineage.json,tables.tex}   the self-contained HTML report, its lineage, all tables in LaTeX
    results/report/queries/<task>/<dataset>/<domain>.html   its query pages (+ queries/thumbs/: image thumbnails)
    results/cache/thumbnails/                         the thumbnails, made once per image (sha256)
    results/tracking/<task>.json                      MLflow run ids of the last invocation
    results/essentiality/<dataset>/<domain>/labels.{parquet,json}   image essentiality and type labels (+ counts)
    results/tables/essentiality.{md,csv}, results/plots/essentiality.{png,csv}   scores by essentiality / image type
    results/audit/<dataset>/<domain>/{ratings.tsv,calls.jsonl,stats.json}   quality audit ratings per query (+ calls, counts)
    results/tables/audit.{md,csv}                     quality audit: per-domain means with intervals

Systems come before domains so that one system's outputs form one directory (a DVC output per system).
"""

from __future__ import annotations

import os
from pathlib import Path

RAW = "data/raw/{dataset}"
FETCHED = "data/raw/{dataset}/.fetched/{domain}.json"
PREPARED = "data/prepared/{dataset}/{domain}"
# the files prepare writes into PREPARED (mmir.data.prepare): text-only, then those of a domain with images
PREPARED_FILES = ("corpus.parquet", "topics.parquet", "qrels.task1.txt", "excluded.tsv", "prepare.json")
MM_FILES = ("topics_mm.parquet", "images.parquet", "query_images.parquet", "pairs.parquet", "qrels.task2.txt",
            "qrels.task3.txt", "qrels.task4.txt", "qrels.task4.official.txt", "excluded.task2.tsv",
            "excluded.task4.tsv", "excluded.task4.always.tsv")
ALL_FILES = PREPARED_FILES + MM_FILES
CAPTIONS = "results/captions/{dataset}/{domain}/{captioner}.parquet"
CAPTIONS_STATS = "results/captions/{dataset}/{domain}/{captioner}.stats.json"
# one OCR shard of a domain's images (kind: images = corpus images, query_images)
OCR_SHARD = "results/captions/{dataset}/{domain}/{captioner}.shards/{kind}/shard-{shard}.parquet"
OCR_SHARD_STATS = "results/captions/{dataset}/{domain}/{captioner}.shards/{kind}/shard-{shard}.stats.json"
QUERIES = "results/queries/{dataset}/{domain}/{variant}.parquet"
QUERIES_STATS = "results/queries/{dataset}/{domain}/{variant}.json"
ABLATION_MD = "results/tables/{grid}_ablation.md"
ABLATION_CSV = "results/tables/{grid}_ablation.csv"
ABLATION_PLOT = "results/plots/{grid}_ablation.png"
ABLATION_PLOT_DATA = "results/plots/{grid}_ablation.csv"
RAG = "results/rag/{dataset}/{domain}/{slug}"
RAG_TABLE_MD = "results/tables/rag.md"
RAG_TABLE_CSV = "results/tables/rag.csv"
M2RAG_KB = "results/m2rag/{dataset}/{domain}/{source}"
M2RAG = "results/m2rag/{dataset}/{domain}/{source}/{strategy}"
M2RAG_TABLE_MD = "results/tables/m2rag.md"
M2RAG_TABLE_CSV = "results/tables/m2rag.csv"
MMDR = "results/mmdr/{dataset}/{domain}"
MMDR_TASKS = "results/mmdr/{dataset}/{domain}/tasks"
MMDR_REPORTS = "results/mmdr/{dataset}/{domain}/reports"
MMDR_RUN = "results/mmdr/{dataset}/{domain}/run"
MMDR_EXPORT = "results/tables/mmdr"
MMDR_TABLE_MD = "results/tables/mmdr.md"
MMDR_TABLE_CSV = "results/tables/mmdr.csv"
VECTORS = "results/vectors/{dataset}/{domain}/{system}/{kind}"
VECTOR_SHARD = "results/vectors/{dataset}/{domain}/{system}/{kind}/shard-{shard}.sealed.json"
VECTOR_SHARD_STATS = "results/vectors/{dataset}/{domain}/{system}/{kind}/shard-{shard}.stats.json"
VECTOR_MANIFEST = "results/vectors/{dataset}/{domain}/{system}/{kind}/manifest.json"
RUN = "results/runs/{task}/{dataset}/{system}/{domain}.trec"
RUN_STATS = "results/runs/{task}/{dataset}/{system}/{domain}.stats.json"
RERANK_CALLS = "results/runs/{task}/{dataset}/{system}/{domain}.calls.jsonl"
METRICS = "results/metrics/{task}/{dataset}/{system}/{domain}.json"
PERQUERY = "results/metrics/{task}/{dataset}/{system}/{domain}.perquery.tsv"
TABLE_MD = "results/tables/{task}.md"
TABLE_CSV = "results/tables/{task}.csv"
TABLE_METRICS = "results/tables/{task}.metrics.json"
TABLE_SIGNIFICANCE = "results/tables/{task}.significance.json"
TABLE_FOREST = "results/plots/{task}_forest.svg"
# committed to git (outside the ignored results/): what `dvc exp show` / `dvc metrics diff` / `dvc plots diff` compare
EXPERIMENT_METRICS = "metrics/{task}.json"
EXPERIMENT_FOREST = "metrics/{task}_forest.csv"
REPRODUCTION_MD = "results/tables/reproduction.md"
REPRODUCTION_CSV = "results/tables/reproduction.csv"
TRACKING = "results/tracking/{task}.json"
ESSENTIALITY = "results/essentiality/{dataset}/{domain}"
ESSENTIALITY_LABELS = "results/essentiality/{dataset}/{domain}/labels.parquet"
ESSENTIALITY_STATS = "results/essentiality/{dataset}/{domain}/labels.json"
ESSENTIALITY_MD = "results/tables/essentiality.md"
ESSENTIALITY_CSV = "results/tables/essentiality.csv"
ESSENTIALITY_PLOT = "results/plots/essentiality.png"
ESSENTIALITY_PLOT_DATA = "results/plots/essentiality.csv"
AUDIT_RATINGS = "results/audit/{dataset}/{domain}/ratings.tsv"
AUDIT_CALLS = "results/audit/{dataset}/{domain}/calls.jsonl"
AUDIT_STATS = "results/audit/{dataset}/{domain}/stats.json"
AUDIT_MD = "results/tables/audit.md"
AUDIT_CSV = "results/tables/audit.csv"
# inside results/report (a DVC output, pushed and pulled): the files vary with the config, so DVC cannot list them
TABLE_TEX = "results/report/tables/{name}.tex"
REPORT_HTML = "results/report/index.html"
REPORT_LINEAGE = "results/report/lineage.json"
REPORT_LATEX = "results/report/tables.tex"
# MTEB result files: results/mteb is an MTEB cache (its results/<model>/<revision>/<task name>.json)
MTEB_RESULTS = "results/mteb/results"
MTEB_MANIFEST = "results/mteb/manifest.json"
REPORT_QUERIES = "results/report/queries"
THUMBNAIL_CACHE = "results/cache/thumbnails"


def prepared(dataset: str, domain: str, name: str) -> str:
    """A file of the prepared domain, e.g. ``prepared("openstax", "statistics", "corpus.parquet")``."""
    return f"{PREPARED.format(dataset=dataset, domain=domain)}/{name}"


def resolve_path(p: str, base: str | os.PathLike | None = None) -> Path:
    """Expand ``~`` and ``$VARS`` and make ``p`` absolute against ``base`` (default: the working directory)."""
    q = Path(os.path.expandvars(os.path.expanduser(p)))
    return q if q.is_absolute() else (Path(base) if base else Path.cwd()) / q


def project_path(p: str) -> Path:
    """``p`` with ``~`` and ``$VARS`` expanded, a relative path kept relative (to the project directory, Snakemake's
    working directory). Rule inputs and params use it: an absolute path recorded there would make a copy of the
    project, or a node that mounts it elsewhere, rerun every job ("Set of input files has changed")."""
    return Path(os.path.expandvars(os.path.expanduser(p)))


#: the workflow shipped in the package: Snakefile, rules/, scripts/, profiles/, schemas/, expected/, examples/
PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"


def project_file(p: str) -> str:
    """A path of the config (e.g. an ``expected`` file): as given when it exists (absolute, or relative to the working
    directory), else relative to the workflow shipped in the package (:data:`PIPELINE`: ``expected/mm-bright-paper.yaml``
    is the package's when the project has none), as a path relative to the working directory when the package lies
    inside it (this repository), so that rule inputs stay relative. Returned unchanged when found nowhere (the caller
    reports it)."""
    q = resolve_path(p)
    if q.exists():
        return p
    if not Path(p).is_absolute() and (PIPELINE / p).exists():
        shipped = PIPELINE / p
        return str(shipped.relative_to(Path.cwd().resolve()) if shipped.is_relative_to(Path.cwd().resolve()) else shipped)
    return p


def model_cache_dir() -> Path:
    """Where model files mmir assembles or builds are kept (the offline GGUF, untrained ColBERT builds):
    ``$MMIR_MODEL_CACHE`` if set, else ``~/.cache/mmir/models``."""
    env = os.environ.get("MMIR_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mmir" / "models"
