"""A small result set as the workflow writes it, for the report tests: two datasets (``os``, ``vx``) of two domains
(``stat_1``: 30 queries, ``calc&x``: 20) and three systems (bm25, dense and a system whose name is HTML), each with
its prepared domain (corpus, topics with real and undecodable query images, Task 1 qrels), TREC runs and the per-query
values pytrec_eval scores from them (:func:`mmir.evaluation.scoring.score_run`, as the score rule)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from mmir.core.io import write_parquet, write_text
from mmir.evaluation.scoring import score_run
from mmir.reporting.query_data import DomainFiles
from mmir.retrieval.runs import write_run

NASTY = "<script>alert('x')</script>_&%#"  # a system name that must be escaped everywhere
DATASETS = ("os", "vx")
DOMAINS = {"stat_1": 30, "calc&x": 20}
SYSTEMS = ("bm25", "dense", NASTY)
N_DOCS = 40
#: the colour of each decodable query image (q0: one image, q1: one image and one undecodable)
COLORS = {"q0/image_1.png": (200, 30, 30), "q1/image_1.png": (30, 160, 60)}
IMAGE_COLUMNS = ["path", "sha256", "alt", "bytes", "width", "height", "ok"]


def png(color, size=(300, 200)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def prepared_domain(prep: Path, dataset: str, domain: str, n: int, rng) -> dict[str, dict[str, int]]:
    """Write corpus, topics, query images and Task 1 qrels of one domain; returns the qrels."""
    docs = [f"{domain}/doc{k:03d}.txt" for k in range(N_DOCS)]
    text = [f"Document {k} of {domain}: " + " ".join(rng.choice(["mean", "plot", "rate", "bin", "area"], size=80)) for k in range(N_DOCS)]
    text[0] = "<b>bold</b> & <script>alert(1)</script> " + text[0]
    write_parquet(prep / "corpus.parquet", pd.DataFrame({"doc_id": docs, "text": text}))
    images = {q: [f"{domain}/query_{q}/image_1.png"] for q in ("q0",)}
    images["q1"] = [f"{domain}/query_q1/image_1.png", f"{domain}/query_q1/image_2.png"]
    qids = [f"q{i}" for i in range(n)]
    write_parquet(prep / "topics.parquet", pd.DataFrame({
        "qid": qids, "query": [f"Question {i} of {dataset}/{domain}: <i>why</i> & how?" for i in range(n)],
        "image_paths": [images.get(q, []) for q in qids], "gold_answers": [[] for _ in qids]}))
    rows = []
    for q, paths in images.items():
        for p in paths:
            key = f"{q}/{Path(p).name}"
            data = png(COLORS[key]) if key in COLORS else b"not an image"
            rows.append({"path": p, "sha256": hashlib.sha256(data).hexdigest(), "alt": f"a figure of {q}",
                         "bytes": data, "width": 300, "height": 200, "ok": key in COLORS})
    write_parquet(prep / "query_images.parquet", pd.DataFrame(rows, columns=IMAGE_COLUMNS))
    write_parquet(prep / "images.parquet", pd.DataFrame(columns=IMAGE_COLUMNS))
    qrels = {q: {docs[d]: 1 for d in rng.choice(N_DOCS, size=2, replace=False)} for q in qids}
    write_text(prep / "qrels.task1.txt", "".join(f"{q} 0 {d} {r}\n" for q, v in qrels.items() for d, r in v.items()))
    return qrels


def system_runs(qrels: dict[str, dict[str, int]], domain: str, rng) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """bm25: a random order; dense: its relevant documents first (clearly better); NASTY: bm25's order with the first
    two documents swapped on every third query (about the same as bm25)."""
    docs = [f"{domain}/doc{k:03d}.txt" for k in range(N_DOCS)]
    out = {s: {} for s in SYSTEMS}
    for i, (q, rel) in enumerate(qrels.items()):
        order = [docs[k] for k in rng.permutation(N_DOCS)]
        nasty = [order[1], order[0], *order[2:]] if i % 3 == 0 else list(order)
        dense = [d for d in order if d in rel] + [d for d in order if d not in rel]
        for s, o in zip(SYSTEMS, (order, dense, nasty)):
            out[s][q] = [(d, float(N_DOCS - r)) for r, d in enumerate(o)]
    return out


def build(tmp: Path) -> tuple[list[tuple[str, str]], list[DomainFiles]]:
    """Write the result set under ``tmp``; returns ``(units, pages)``: ``(metrics JSON, per-query TSV)`` per (dataset,
    system, domain) in table order, and the query pages' :class:`DomainFiles` (one per dataset and domain)."""
    rng = np.random.default_rng(0)
    files: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    pages = []
    for ds in DATASETS:
        for dom, n in DOMAINS.items():
            prep = tmp / "prepared" / ds / dom
            qrels = prepared_domain(prep, ds, dom, n, rng)
            runs = system_runs(qrels, dom, rng)
            for k, s in enumerate(SYSTEMS):
                base = tmp / "runs" / ds / dom / f"system{k}"
                write_run(f"{base}.trec", runs[s], tag=f"system{k}")
                score_run(f"{base}.trec", prep / "qrels.task1.txt", ["nDCG@10", "MAP"], f"{base}.json", f"{base}.perquery.tsv",
                          {"dataset": ds, "domain": dom, "system": s, "task": "task1"})
                files[ds, s, dom] = (f"{base}.trec", f"{base}.json", f"{base}.perquery.tsv")
            pages.append(DomainFiles("task1", ds, dom, prep, "qrels.task1.txt", {s: files[ds, s, dom][0] for s in SYSTEMS},
                                     {s: files[ds, s, dom][2] for s in SYSTEMS}, "nDCG@10", "bm25"))
    units = [(files[ds, s, d][1], files[ds, s, d][2]) for ds in DATASETS for s in SYSTEMS for d in DOMAINS]
    return units, pages
