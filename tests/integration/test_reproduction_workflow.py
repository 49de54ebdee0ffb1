"""The reproduction check on real values: Task 1 BM25 (params.yaml's settings) on openstax statistics, computed
here by the workflow, against expected/offline-regression.yaml; then k1 = 3.0 turns the BM25 rows FAIL."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import snakemake as _snakemake
from mmir.core.paths import PIPELINE

pytestmark = pytest.mark.integration


def _rows(wd):
    frame = pd.read_csv(wd / "results/tables/reproduction.csv")
    return frame[(frame.benchmark == "mmir-offline-regression") & (frame.task == "task1") & (frame.system == "bm25")
                 & (frame.dataset == "openstax")].set_index("domain")


def test_task1_slice_matches_the_regression_values_and_a_changed_k1_fails(tmp_path):
    data_root = shared("openstax")
    bm25 = yaml.safe_load((PROJECT / "params.yaml").read_text())["systems"]["bm25"]
    params = {"datasets": {"openstax": {"source": "local", "root": str(data_root), "domains": ["statistics"]}},
              "tasks": ["task1"], "systems": {"bm25": bm25}, "measures": ["nDCG@10"],
              "significance": {"resamples": 2000},
              "expected": [str(PIPELINE / "expected" / "offline-regression.yaml")]}
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(wd, "results/tables/reproduction.md")
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = _rows(wd)
    print(rows[["expected", "observed", "diff", "tolerance", "status", "note"]].to_string())
    assert rows.at["statistics", "status"] == "OK"
    # the expected Avg. is over statistics and calculus-1: not comparable with this one-domain slice
    assert rows.at["Avg.", "status"] == "not run" and rows.at["Avg.", "note"] == "Avg. over 1 domain (1 of the expected 2)"
    md = (wd / "results/tables/reproduction.md").read_text()
    assert "## mmir-offline-regression" in md and "| OK |" in md
    task1 = (wd / "results/tables/task1.md").read_text()
    assert "95% confidence intervals" in task1 and "seed 0" in task1

    params["systems"]["bm25"]["k1"] = 3.0
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(wd, "results/tables/reproduction.md")
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = _rows(wd)
    print(rows[["expected", "observed", "diff", "tolerance", "status"]].to_string())
    assert rows.at["statistics", "status"] == "FAIL"
    assert "FAIL" in (wd / "logs/reproduction.log").read_text()
