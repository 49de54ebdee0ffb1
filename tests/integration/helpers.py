"""What the workflow integration tests share: the venv's tools on PATH, a Snakemake call on a work folder, and a
small MM-BRIGHT-layout slice of a real ../shared/data domain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
from conftest import PROJECT

BIN = Path(sys.executable).parent


def env() -> dict[str, str]:
    """The environment for subprocesses: the venv's tools first, no hub, the project's own MLflow store."""
    out = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", HF_HUB_OFFLINE="1")
    out.pop("MLFLOW_TRACKING_URI", None)
    return out


def snakemake(workdir: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``snakemake --cores 2 ARGS`` with the project's Snakefile in ``workdir`` (its params.yaml)."""
    return subprocess.run([str(BIN / "snakemake"), "-s", str(PROJECT / "Snakefile"), "--directory", str(workdir),
                           "--cores", "2", *args], capture_output=True, text=True, env=env(), timeout=timeout)


def openstax_slice(data_root: Path, dest: Path, n_queries: int, n_doc_images: int) -> Path:
    """A small MM-BRIGHT-layout slice of a real domain: all documents, the first queries, their images."""
    dom = "statistics"
    for sub in ("documents", "examples", "examples_multimodal", "examples_images", "document_images"):
        (dest / sub).mkdir(parents=True)
    shutil.copy(data_root / "documents" / f"{dom}.parquet", dest / "documents")
    ex = pd.read_parquet(data_root / "examples" / f"{dom}.parquet").head(n_queries)
    ex.to_parquet(dest / "examples" / f"{dom}.parquet")
    doc_images = pd.read_parquet(data_root / "document_images" / f"{dom}.parquet").head(n_doc_images)
    doc_images.to_parquet(dest / "document_images" / f"{dom}.parquet")
    # a consistent slice: positive images only among the kept document images (prepare stops when most
    # references do not resolve, integrity.max_missing_share)
    exm = pd.read_parquet(data_root / "examples_multimodal" / f"{dom}.parquet").head(n_queries)
    kept = set(doc_images["path"])
    exm["positive_images"] = [[p for p in pos if p["image_path"] in kept] for pos in exm["positive_images"]]
    exm.to_parquet(dest / "examples_multimodal" / f"{dom}.parquet")
    wanted = {p for paths in ex["image_paths"] for p in paths}
    qi = pd.read_parquet(data_root / "examples_images" / f"{dom}.parquet")
    qi[qi["path"].isin(wanted)].to_parquet(dest / "examples_images" / f"{dom}.parquet")
    return dest


def beir_text(root: Path, qrels: str) -> Path:
    """A text-only BEIR folder of two documents and one query (``q1``): corpus.jsonl, queries.jsonl and
    qrels/test.tsv with the ``qrels`` rows given (``"q1\td1\t1\n"``)."""
    (root / "qrels").mkdir(parents=True)
    rows = {"corpus.jsonl": [{"_id": "d1", "title": "Mean", "text": "the mean of a sample"},
                             {"_id": "d2", "title": "", "text": "a histogram"}],
            "queries.jsonl": [{"_id": "q1", "text": "sample mean"}]}
    for name, rs in rows.items():
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rs), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return root


def vaswani_beir(trec: Path, dest: Path, n_topics: int = 20, others: int = 1000) -> Path:
    """Vaswani in BEIR form, cut small: its first ``n_topics`` topics, the documents they judge and ``others`` more."""
    from mmir.data.trec import read_qrels, read_trec_documents, read_trec_topics

    topics = read_trec_topics(trec / "query-text.trec")[:n_topics]
    qrels = read_qrels(trec / "qrels")
    judged = {d for q, _ in topics for d in qrels.get(q, {})}
    docs = read_trec_documents(trec / "corpus" / "doc-text.trec")
    kept = [(d, t) for d, t in docs if d in judged] + [(d, t) for d, t in docs if d not in judged][:others]
    (dest / "qrels").mkdir(parents=True)
    (dest / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in kept))
    (dest / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in topics))
    rows = [f"{q}\t{d}\t{r}" for q, _ in topics for d, r in qrels.get(q, {}).items()]
    (dest / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return dest
