"""The OCR stage through Snakemake on a slice of the shared openstax domain: corpus images in two shard jobs plus
the query images, each job on 2 worker processes (spawned from the rule script), gathered into one caption file."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml
from conftest import shared

from integration.helpers import openstax_slice, snakemake

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("tesseract") is None,
                                 reason="the tesseract binary is absent (Debian: apt-get install tesseract-ocr)")]


def test_ocr_shards_run_in_parallel_and_gather(tmp_path):
    root = openstax_slice(shared("openstax"), tmp_path / "slice", n_queries=4, n_doc_images=6)
    wd = tmp_path / "wf"
    wd.mkdir()
    params = {"datasets": {"os": {"source": "local", "root": str(root), "domains": ["statistics"]}},
              "systems": {"bm25": {"kind": "bm25"}},
              "captioners": {"tess": {"kind": "ocr", "engine": "tesseract", "shard_size": 4}},
              "resources": {"ocr": {"threads": 2}}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    target = "results/captions/os/statistics/tess.parquet"
    proc = snakemake(wd, target)
    assert proc.returncode == 0, proc.stderr[-4000:]
    shards = sorted((wd / "results/captions/os/statistics/tess.shards").rglob("*.stats.json"))
    assert [f"{p.parent.name}/{p.name}" for p in shards] == [
        "images/shard-00000.stats.json", "images/shard-00001.stats.json", "query_images/shard-00000.stats.json"]
    stats = [json.loads(p.read_text()) for p in shards]
    assert [s["rows"] for s in stats[:2]] == [[0, 4], [4, 6]] and {s["workers"] for s in stats} == {2}
    caps = pd.read_parquet(wd / target)
    prepared = pd.read_parquet(wd / "data/prepared/os/statistics/images.parquet")
    queries = pd.read_parquet(wd / "data/prepared/os/statistics/query_images.parquet")
    assert caps["path"].tolist() == prepared["path"].tolist() + queries["path"].tolist()
    assert caps["text"].str.len().sum() > 0
    total = json.loads((wd / "results/captions/os/statistics/tess.stats.json").read_text())
    assert total["images"] == len(caps) == sum(s["images"] for s in stats)
    again = snakemake(wd, target)
    assert again.returncode == 0 and "Nothing to be done" in again.stderr + again.stdout
