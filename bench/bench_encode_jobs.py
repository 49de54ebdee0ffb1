"""Benchmark: the first run's MiniLM ``encode`` jobs, each in a fresh process as Snakemake starts it, on torch
(sentence-transformers) against the default ``runtime: auto`` (ONNX route, ``mmir.encoders.onnx_text``), in one run
(issue 41 item 4).

Each job is ``python -m mmir run encode dataset=... system=minilm kind=... shard=00000`` with an overlay that points the
embedding cache at an empty folder (a cold encode) and sets ``systems.minilm.runtime``; the two settings alternate job
by job, best of ``--rounds``. Printed per job: wall seconds and CPU seconds (user + system of the process tree: on a
shared machine the CPU time is the steadier figure), and the ratio torch / auto. Needs the prepared data of the first
run (``data/prepared``: ``snakemake --cores 2 --until prepare``). Kinds that need OCR captions (``mm_queries``,
``images``, ``pairs``) are timed when the captions exist.

Usage: ``.venv/bin/python bench/bench_encode_jobs.py [--rounds 1]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

JOBS = (("vaswani", "vaswani", "queries"), ("vaswani", "vaswani", "documents"), ("openstax", "statistics", "queries"),
        ("openstax", "statistics", "documents"), ("openstax", "statistics", "mm_queries"),
        ("openstax", "statistics", "images"), ("openstax", "statistics", "pairs"))


ROOT = Path(__file__).resolve().parents[1]


def run_job(dataset: str, domain: str, kind: str, runtime: str, tmp: Path) -> tuple[float, float]:
    """``(wall s, CPU s)`` of one encode job in a fresh process, in a scratch project under ``tmp`` (the prepared data
    and the OCR captions linked from this one, its vectors and embedding cache new: a cold encode)."""
    work = Path(tempfile.mkdtemp(dir=tmp))
    (work / "results").mkdir()
    os.symlink(ROOT / "data", work / "data")
    if (ROOT / "results/captions").exists():
        os.symlink(ROOT / "results/captions", work / "results/captions")
    overlay = work / "overlay.yaml"
    roots = {d: {"root": str((ROOT / r).resolve())} for d, r in (("openstax", "../shared/data/openstax"),
                                                                 ("vaswani", "../shared/data/vaswani/trec"))}
    overlay.write_text(yaml.safe_dump({"datasets": roots, "systems": {"minilm": {"runtime": runtime}}}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mmir", "--params", str(ROOT / "params.yaml"), "--configfile", str(overlay), "run",
                    "encode", f"dataset={dataset}", f"domain={domain}", "system=minilm", f"kind={kind}", "shard=00000"],
                   check=True, capture_output=True, cwd=work, env=os.environ | {"OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    jobs = [j for j in JOBS if j[2] in ("queries", "documents") or (ROOT / "results/captions" / j[0] / j[1] / "ocr.parquet").exists()]
    best = {}
    with tempfile.TemporaryDirectory(prefix="mmir-bench-encode-") as tmp:
        for _ in range(args.rounds):
            for job in jobs:
                for runtime in ("torch", "auto"):
                    wall, cpu = run_job(*job, runtime, Path(tmp))
                    w0, c0 = best.get((job, runtime), (float("inf"), float("inf")))
                    best[(job, runtime)] = (min(w0, wall), min(c0, cpu))
    print(f"first-run MiniLM encode jobs, one fresh process each, OMP_NUM_THREADS=1, best of {args.rounds}; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'job':36s} {'torch wall':>10s} {'auto wall':>10s} {'torch CPU':>10s} {'auto CPU':>9s} {'CPU ratio':>10s}")
    tot = [0.0, 0.0, 0.0, 0.0]
    for job in jobs:
        (tw, tc), (aw, ac) = best[(job, "torch")], best[(job, "auto")]
        tot = [tot[0] + tw, tot[1] + aw, tot[2] + tc, tot[3] + ac]
        print(f"{'/'.join(job):36s} {tw:10.1f} {aw:10.1f} {tc:10.1f} {ac:9.1f} {tc / ac:10.2f}")
    print(f"{'all':36s} {tot[0]:10.1f} {tot[1]:10.1f} {tot[2]:10.1f} {tot[3]:9.1f} {tot[2] / tot[3]:10.2f}")


if __name__ == "__main__":
    main()
