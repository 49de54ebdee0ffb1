"""The new dataset sources inside the workflow: Vaswani in BEIR form goes through prepare -> retrieve -> score in
Snakemake and scores what the TREC form scores in-process; a BRIGHT copy with a reasoning grid plans its jobs."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import shared

from integration.helpers import snakemake as _snakemake
from integration.test_bright_topics import hub_fixture
from integration.test_vaswani_forms import BM25, _beir_form
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.workflow import retrieval_steps
from mmir.workflow.steps import score

pytestmark = pytest.mark.integration


def test_beir_dataset_through_prepare_retrieve_score(tmp_path):
    trec = shared("vaswani") / "trec"
    wd = tmp_path / "wf"
    wd.mkdir()
    params = {"datasets": {"vaswani": {"source": "beir", "root": str(_beir_form(trec, tmp_path / "beir"))}},
              "systems": {"bm25": {"kind": "bm25", "k1": 0.9, "b": 0.4}}, "tasks": ["task1"], "measures": ["nDCG@10", "MAP"]}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    target = "results/metrics/task1/vaswani/bm25/vaswani.json"
    proc = _snakemake(wd, target)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for rule in ("prepare", "retrieve", "score"):
        assert f"rule {rule}:" in proc.stderr or f"localrule {rule}:" in proc.stderr, rule
    got = json.loads((wd / target).read_text())["measures"]
    # the TREC form, prepared and scored in-process
    ref = tmp_path / "trec"
    write_prepared(prepare_domain("vaswani", {"source": "trec", "root": str(trec), "corpus": "corpus/doc-text.trec",
                                              "topics": "query-text.trec", "qrels": "qrels"}, "vaswani"), ref / "prep")
    retrieval_steps.retrieve(retrieval_steps.RetrieveJob("task1", ref / "prep", "bm25", BM25, {"protocol": "official", "top_k": 1000},
                                                         ref / "run.trec", ref / "run.json"))
    assert (wd / "results/runs/task1/vaswani/bm25/vaswani.trec").read_bytes() == (ref / "run.trec").read_bytes()
    expected = score(ref / "run.trec", ref / "prep" / "qrels.task1.txt", ["nDCG@10", "MAP"], ref / "m.json", ref / "m.tsv", {})
    assert got == expected["measures"]


def test_bright_copy_with_a_reasoning_grid_plans_its_jobs(tmp_path):
    root = hub_fixture(shared("bright-topics"), tmp_path / "BRIGHT")
    wd = tmp_path / "wf"
    wd.mkdir()
    params = {"datasets": {"bright": {"source": "bright", "root": str(root), "domains": ["biology", "pony"], "reasoning": ["gpt4"]}},
              "systems": {"bm25": {"kind": "bm25"}}, "tasks": ["task1"],
              "ablations": {"reasoning": {"systems": ["bm25"], "variants": ["gpt4"]}}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(wd, "-n", "--quiet", "rules")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = {line.split()[0]: int(line.split()[1]) for line in proc.stdout.splitlines() if len(line.split()) == 2
              and line.split()[1].isdigit()}
    assert counts["prepare"] == 2 and counts["reason_queries"] == 2 and counts["ablation_report"] == 1
    assert counts["retrieve"] == 4  # bm25 (task1, ablation base) and bm25+reason:gpt4, per task
