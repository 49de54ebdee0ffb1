"""Benchmark: the HTML report and its query pages at the size of the full MM-BRIGHT.

Synthesises, deterministically, the result set of 29 domains (the real per-domain query counts of
``../shared/data/mm-bright-stats/domains.tsv``: Task 1's 1,585 text queries and Task 2's 1,218 multimodal ones,
2,803 in all) and ``--systems`` systems (10): per domain a pooled corpus of ``--docs`` documents, topics with one to
three query images (small JPEGs, each different) for Task 2, qrels, a ``--depth``-deep run per system (1,000: the
config's ``top_k``) whose relevant documents sit higher the better the system, and per-query values scored from the
runs by pytrec_eval (:func:`mmir.evaluation.scoring.score_run`, as the score rule); then the task tables with
intervals and tests and their forest plots (the report rule's code, 1,000 resamples to save time).

It builds the report with :func:`mmir.workflow.report.report_step` (the report_html rule's step) twice, with a cold
and then a warm thumbnail cache, and prints: the first page's size, every query page's size together, the largest
query page, the build times, and the first page's load time in headless Chromium (``--dump-dom``, the median of
``--repeats`` loads, less the median load of an empty page: browser start-up). The baseline, in the same run: the
report as it was before the query pages (the same tables and figures on one page, no summary), and the page that
inlining every query page into it would make; the ratios compare the first page with them.

Usage: ``.venv/bin/python bench/bench_report.py [--work /tmp/mmir-bench-report] [--systems 10] [--depth 1000] [--clean]``
(~3 GB of scratch disk at depth 1000; a second call reuses the synthetic set).
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mmir.core.io import write_parquet, write_text
from mmir.evaluation.scoring import score_run

STATS = Path(__file__).resolve().parents[2] / "shared/data/mm-bright-stats/domains.tsv"
TASKS = {"task1": "t1_queries", "task2": "t2_queries"}
WORDS = np.array("the of a query image graph data value energy cell force model law market protein orbit signal "
                 "table mean ratio rate plot curve sample error pressure light wave field charge".split())


def domains() -> dict[str, dict[str, int]]:
    with open(STATS, encoding="utf-8") as f:
        return {r["domain"]: {t: int(r[c]) for t, c in TASKS.items()} for r in csv.DictReader(f, delimiter="\t")}


def _text(rng, n: int) -> str:
    return " ".join(rng.choice(WORDS, size=n))


def _jpeg(rng, w: int = 320, h: int = 240) -> bytes:
    from PIL import Image

    arr = np.full((h, w, 3), rng.integers(180, 255, size=3), dtype=np.uint8)
    for _ in range(6):
        x, y = rng.integers(0, w - 40), rng.integers(0, h - 40)
        arr[y:y + rng.integers(10, 40), x:x + rng.integers(10, 40)] = rng.integers(0, 255, size=3)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def synthesise(work: Path, n_systems: int, depth: int, n_docs: int, seed: int = 0) -> list:
    """Write the result set under ``work`` (results layout); returns the query pages' DomainFiles."""
    import hashlib

    from mmir.core import paths
    from mmir.reporting.query_data import DomainFiles

    systems = ["bm25", *[f"sys{i:02d}" for i in range(1, n_systems)]]
    pages, t0 = [], time.perf_counter()
    for di, (dom, counts) in enumerate(domains().items()):
        rng = np.random.default_rng([seed, di])
        prep = work / paths.PREPARED.format(dataset="mm-bright", domain=dom)
        docs = [f"{dom}/d{k:05d}.txt" for k in range(n_docs)]
        write_parquet(prep / "corpus.parquet", pd.DataFrame({"doc_id": docs, "text": [_text(rng, 150) for _ in docs]}))
        qimgs, img_rows = {}, []
        for task, nq in counts.items():
            mm = task != "task1"
            qids = [f"{dom}-{task[-1]}-{i:04d}" for i in range(nq)]
            for q in qids:
                qimgs[q] = [f"{dom}/query_{q}/image_{j}.jpg" for j in range(1, 1 + int(rng.integers(1, 4)))] if mm else []
                for p in qimgs[q]:
                    b = _jpeg(rng)
                    img_rows.append({"path": p, "sha256": hashlib.sha256(b).hexdigest(), "alt": f"figure of {q}", "bytes": b,
                                     "width": 320, "height": 240, "ok": True})
            topics = pd.DataFrame({"qid": qids, "query": [_text(rng, int(rng.integers(20, 120))) for _ in qids],
                                   "image_paths": [qimgs[q] for q in qids]})
            if mm:
                topics["positive_images"] = [[] for _ in qids]
                topics["negative_images"] = [[] for _ in qids]
            write_parquet(prep / ("topics_mm.parquet" if mm else "topics.parquet"), topics)
            gold = {q: list(rng.choice(n_docs, size=int(rng.integers(1, 5)), replace=False)) for q in qids}
            write_text(prep / f"qrels.{task}.txt", "".join(f"{q} 0 {docs[d]} 1\n" for q in qids for d in gold[q]))
            for si, s in enumerate(systems):
                run_path = work / paths.RUN.format(task=task, dataset="mm-bright", system=s, domain=dom)
                lines = []
                for q in qids:
                    order = rng.permutation(n_docs)[:depth]
                    for d in gold[q]:  # a better system (higher si) lifts the gold documents higher
                        if rng.random() < 0.3 + 0.05 * si:
                            at = int(rng.integers(0, max(1, 40 - 3 * si)))
                            order = np.concatenate([order[:at], [d], order[at:][order[at:] != d]])[:depth]
                    lines += [f"{q} Q0 {docs[d]} {r} {depth - r + 1} {s}\n" for r, d in enumerate(order, 1)]
                write_text(run_path, "".join(lines))
                meta = {"dataset": "mm-bright", "domain": dom, "system": s, "task": task}
                score_run(run_path, prep / f"qrels.{task}.txt", ["nDCG@10"],
                          work / paths.METRICS.format(task=task, dataset="mm-bright", system=s, domain=dom),
                          work / paths.PERQUERY.format(task=task, dataset="mm-bright", system=s, domain=dom), meta)
            where = {"task": task, "dataset": "mm-bright", "domain": dom}
            pages.append(DomainFiles(task, "mm-bright", dom, prep, f"qrels.{task}.txt",
                                     {s: str(work / paths.RUN.format(system=s, **where)) for s in systems},
                                     {s: str(work / paths.PERQUERY.format(system=s, **where)) for s in systems}))
        images = pd.DataFrame(img_rows, columns=["path", "sha256", "alt", "bytes", "width", "height", "ok"])
        write_parquet(prep / "query_images.parquet", images)
        write_parquet(prep / "images.parquet", images.iloc[:0])
        print(f"  {dom}: {sum(counts.values())} queries, {len(img_rows)} query images ({time.perf_counter() - t0:.0f}s)", flush=True)
    return pages


def tables(work: Path, pages: list) -> list[str]:
    """The task tables (md, csv, significance) and forest plots, as the report rule writes them; returns the files."""
    from mmir.core import paths
    from mmir.reporting.forest import write_forest
    from mmir.workflow import steps

    files = []
    for task in TASKS:
        mine = [p for p in pages if p.task == task]
        metrics = [str(work / paths.METRICS.format(task=task, dataset="mm-bright", system=s, domain=p.domain))
                   for s in mine[0].systems for p in mine]
        perquery = [m[: -len(".json")] + ".perquery.tsv" for m in metrics]
        out = {k: work / getattr(paths, f"TABLE_{k.upper()}").format(task=task) for k in ("md", "csv", "metrics", "significance")}
        steps.report(task, metrics, "nDCG@10", "official", steps.TableFiles(out["md"], out["csv"], out["metrics"], out["significance"]),
                     perquery_files=perquery, significance={"resamples": 1000, "seed": 0})
        forest = work / paths.TABLE_FOREST.format(task=task)
        write_forest(out["significance"], out["csv"], forest)
        files += [str(out["md"]), str(out["csv"]), str(out["significance"]), str(forest)]
    return files


def chromium() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def load_seconds(browser: str, url: str, repeats: int) -> float:
    """Median wall time of ``--dump-dom`` of ``url`` (a fresh profile each time)."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as prof:
            t0 = time.perf_counter()
            p = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                f"--user-data-dir={prof}", "--dump-dom", url], capture_output=True, text=True, timeout=300)
            times.append(time.perf_counter() - t0)
            if p.returncode != 0 or "</html>" not in p.stdout:
                raise RuntimeError(f"chromium failed on {url}: {p.stderr[-500:]}")
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mmir-bench-report"))
    ap.add_argument("--systems", type=int, default=10)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--docs", type=int, default=5000, help="documents per domain (a pooled corpus)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clean", action="store_true", help="remove the work folder afterwards")
    args = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore", category=pd.errors.PerformanceWarning)  # the table's CSV columns, added one by one

    from mmir.reporting.html import group_tables, render_report
    from mmir.reporting.lineage import lineage
    from mmir.workflow.report import report_step

    work = args.work.resolve()
    marker = work / f"synthetic-{args.systems}-{args.depth}-{args.docs}.done"
    t0 = time.perf_counter()
    if not marker.exists():
        shutil.rmtree(work, ignore_errors=True)
        print(f"synthesising 29 domains x {args.systems} systems, runs {args.depth} deep, into {work}", flush=True)
        pages = synthesise(work, args.systems, args.depth, args.docs)
        files = tables(work, pages)
        pd.to_pickle((pages, files), work / "pages.pkl")
        marker.touch()
    pages, files = pd.read_pickle(work / "pages.pkl")
    print(f"result set ready in {time.perf_counter() - t0:.0f}s: {len(pages)} query pages, "
          f"{sum(len(pd.read_parquet(p.prepared / p.spec.queries, columns=['qid'])) for p in pages)} queries")
    config = {"datasets": {"mm-bright": {"source": "hf", "repo_id": "mm-bright/MM-BRIGHT", "domains": "all"}},
              "systems": {"bm25": {"kind": "bm25"}}}
    report = work / "report"
    cache = work / "thumbnail-cache"
    shutil.rmtree(cache, ignore_errors=True)
    built = {}
    for state in ("cold", "warm"):
        shutil.rmtree(report, ignore_errors=True)
        t = time.perf_counter()
        before = len(list(cache.rglob("*.jpg")))
        counts = report_step(config, files, [], report / "index.html", report / "lineage.json", report / "tables.tex", {},
                             None, pages, report / "queries", cache)
        built[state] = (time.perf_counter() - t, counts, len(list(cache.rglob("*.jpg"))) - before)
    first = (report / "index.html").stat().st_size
    query_files = sorted((report / "queries").rglob("*.html"))
    qbytes = sum(f.stat().st_size for f in query_files)
    thumbs = sorted((report / "queries" / "thumbs").glob("*.jpg"))
    biggest = max(query_files, key=lambda f: f.stat().st_size)
    old = render_report(group_tables(files), lineage(config, []), "mmir results").encode("utf-8")
    old_path = work / "before.html"
    old_path.write_bytes(old)
    mb = 1 << 20
    print(f"\nfirst page (index.html): {first / mb:.2f} MiB; before the query pages (same tables, one page): "
          f"{len(old) / mb:.2f} MiB: ratio {first / len(old):.2f}")
    print(f"query pages: {len(query_files)} files, {qbytes / mb:.1f} MiB together (largest {biggest.relative_to(report)}: "
          f"{biggest.stat().st_size / mb:.2f} MiB); thumbnails: {len(thumbs)} files, "
          f"{sum(f.stat().st_size for f in thumbs) / mb:.1f} MiB")
    print(f"first page / (first page + every query page inlined): {first / (first + qbytes):.3f}")
    for state, (sec, c, made) in built.items():
        print(f"build ({state} thumbnail cache): {sec:.1f}s; {c['query_pages']} pages, {c['query_page_queries']} queries, "
              f"{c['thumbnails']} thumbnails ({made} made, {c['thumbnails'] - made} from the cache)")
    browser = chromium()
    if browser is None:
        print("no Chromium: load times skipped (Debian: apt-get install chromium)")
    else:
        blank = work / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        base = load_seconds(browser, blank.as_uri(), args.repeats)
        times = {n: load_seconds(browser, p.as_uri(), args.repeats) - base
                 for n, p in (("first page", report / "index.html"), ("before", old_path), ("largest query page", biggest))}
        print(f"Chromium load (--dump-dom, median of {args.repeats}, less {base:.2f}s start-up): first page "
              f"{times['first page']:.2f}s; before {times['before']:.2f}s (ratio {times['first page'] / max(times['before'], 1e-3):.2f}); "
              f"largest query page {times['largest query page']:.2f}s")
    if args.clean:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
