"""The hub source offline: one clear error, with the recipe for a local copy, before any job runs."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT

from mmir.core.errors import DataError
from mmir.data.hub import fetch_domain


def test_fetch_offline_fails_with_local_copy_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as exc:
        fetch_domain("mm-bright/MM-BRIGHT", "main", "biology", ["documents"], tmp_path)
    msg = str(exc.value)
    assert "cannot reach the Hugging Face hub" in msg and "source: local" in msg and "--revision main" in msg
    assert not any(tmp_path.iterdir())


def test_workflow_with_hub_dataset_stops_before_any_job(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"datasets": {"mmb": {"source": "hf", "domains": ["biology"]}}, "systems": {"bm25": {"kind": "bm25"}}}))
    snakemake = Path(sys.executable).parent / "snakemake"
    p = subprocess.run([str(snakemake), "-s", str(PROJECT / "Snakefile"), "--directory", str(tmp_path), "--cores", "1"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
                       timeout=300)
    assert p.returncode != 0
    assert "dataset mmb:" in p.stderr and "source: local" in p.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "logs").exists()
