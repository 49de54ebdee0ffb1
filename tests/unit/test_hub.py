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


PINNED = "97702ca9ea81cd0a25288e74a9402439550d6bd4"  # the commit the MTEB port of MM-BRIGHT pins


def test_hub_domain_names_are_the_published_split_names():
    from conftest import SHARED_DATA

    from mmir.data.domains import MM_BRIGHT_DOMAINS

    tsv = SHARED_DATA / "mm-bright-stats" / "domains.tsv"
    if not tsv.exists():
        pytest.skip(f"{tsv} not found (set MMIR_SHARED_DATA to the shared data folder)")
    names = [line.split("\t")[0] for line in tsv.read_text().splitlines()[1:] if line]
    assert MM_BRIGHT_DOMAINS == names and len(names) == 29
    assert {"askubuntu", "earthscience", "medicalsciences", "quantumcomputing"} <= set(names)


def test_default_revision_is_the_pinned_commit():
    from mmir.workflow.validate import validate_config

    cfg = validate_config({"datasets": {"mmb": {"source": "hf"}}, "systems": {"bm25": {"kind": "bm25"}}})
    assert cfg["datasets"]["mmb"]["revision"] == PINNED
    assert PINNED in (PROJECT / "README.md").read_text()


def test_validate_lists_the_29_hub_domains_offline(tmp_path):
    from mmir.data.domains import MM_BRIGHT_DOMAINS

    overlay = tmp_path / "hub.yaml"
    overlay.write_text(yaml.safe_dump({"datasets": {"mmb": {"source": "hf", "domains": "all"}}}))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(PROJECT / "src")}
    p = subprocess.run([sys.executable, "-m", "mmir", "--configfile", str(overlay), "validate"], cwd=PROJECT,
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    listed = [line.split("\t")[1] for line in p.stdout.splitlines() if line.startswith("mmb\t")]
    print(f"{len(listed)} hub domains: {', '.join(listed)}")
    assert listed == MM_BRIGHT_DOMAINS


def test_explicit_hub_domain_must_be_a_hub_split():
    from mmir.core.errors import ConfigError
    from mmir.workflow.validate import validate_config

    with pytest.raises(ConfigError) as exc:  # the README's old spelling is not a hub split
        validate_config({"datasets": {"mmb": {"source": "hf", "domains": ["biology", "earth_science"]}},
                         "systems": {"bm25": {"kind": "bm25"}}})
    assert exc.value.key == "datasets.mmb.domains.1" and "earthscience" in str(exc.value)
