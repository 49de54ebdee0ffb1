"""The beir, ir_datasets and bright sources on tiny inline fixtures: what each reads, that every error names file,
row and field, and that each lands in the same prepared layout as the MM-BRIGHT and TREC sources."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from mmir.config.models import parse_dataset
from mmir.core.errors import ConfigError, DataError
from mmir.data.domains import check_dataset, dataset_domains, fetched, has_multimodal
from mmir.data.prepare import ALL_FILES, prepare_domain, read_excluded, write_prepared
from mmir.data.trec import read_qrels

CORPUS = [{"_id": "d1", "title": "Mean", "text": "the mean of a sample"}, {"_id": "d2", "title": "", "text": "a histogram of values"},
          {"_id": "d3", "title": "Box", "text": "a box plot shows quartiles"}]
QUERIES = [{"_id": "q1", "text": "sample mean"}, {"_id": "q2", "text": "quartiles"}, {"_id": "q9", "text": "a train query"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq1\td3\t0\nq2\td3\t1\n"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def beir_dir(root: Path, corpus=CORPUS, queries=QUERIES, qrels=QRELS) -> Path:
    (root / "qrels").mkdir(parents=True)
    _jsonl(root / "corpus.jsonl", corpus)
    _jsonl(root / "queries.jsonl", queries)
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_beir_local_keeps_grades_the_split_queries_and_title_text(tmp_path):
    root = beir_dir(tmp_path / "beir")
    p = prepare_domain("toy", {"source": "beir", "root": str(root)}, "toy")
    assert list(p.corpus["text"]) == ["Mean the mean of a sample", "a histogram of values", "Box a box plot shows quartiles"]
    assert list(p.topics["qid"]) == ["q1", "q2"]  # q9 is not judged in the test split (BEIR's loader drops it)
    assert p.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}}  # score 0 is not relevant
    untitled = prepare_domain("toy", {"source": "beir", "root": str(root), "title": False}, "toy")
    assert untitled.corpus["text"][0] == "the mean of a sample"
    write_prepared(p, tmp_path / "out")
    assert all((tmp_path / "out" / f).is_file() for f in ALL_FILES)
    assert read_qrels(tmp_path / "out" / "qrels.task1.txt") == p.qrels


@pytest.mark.parametrize("corpus, qrels, where", [
    ("{not json\n", QRELS, ("corpus.jsonl", 1, None)),
    (json.dumps({"title": "t", "text": "x"}) + "\n", QRELS, ("corpus.jsonl", 1, "_id")),
    (None, "query-id\tcorpus-id\tscore\nq1\td1\n", ("test.tsv", 2, None)),
    (None, "query-id\tcorpus-id\tscore\nq1\td1\thigh\n", ("test.tsv", 2, "score")),
    # an unknown document is named at its qrels line, not at the query's row of queries.jsonl
    (None, "query-id\tcorpus-id\tscore\nq1\td1\t1\n\nq1\tdX\t1\n", ("test.tsv", 4, "corpus-id")),
    (None, "query-id\tcorpus-id\tscore\nq2\td1\t1\n", ("queries.jsonl", 2, "text")),
])
def test_beir_errors_name_file_line_and_field(tmp_path, corpus, qrels, where):
    root = beir_dir(tmp_path / "beir", qrels=qrels, queries=[QUERIES[0], {"_id": "q2", "text": " "}])
    if corpus is not None:
        (root / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    with pytest.raises(DataError) as exc:
        prepare_domain("toy", {"source": "beir", "root": str(root)}, "toy")
    assert (Path(exc.value.file).name, exc.value.line, exc.value.field) == where
    assert f"{Path(exc.value.file).name}, line {where[1]}" in str(exc.value)


def _png(color) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, format="PNG")
    return buf.getvalue()


def test_beir_image_corpus_gives_task3_qrels(tmp_path):
    """A ViDoRe-style export: parquet tables, a corpus of page images (no text), a qrels parquet."""
    root = tmp_path / "vidore"
    for sub in ("corpus", "queries", "qrels"):
        (root / sub).mkdir(parents=True)
    pd.DataFrame({"corpus-id": [1, 2], "image": [{"bytes": _png("red"), "path": "p1.png"}, {"bytes": _png("blue"), "path": None}]}
                 ).to_parquet(root / "corpus" / "test-00000-of-00001.parquet")
    pd.DataFrame({"query-id": [7], "query": ["red page"]}).to_parquet(root / "queries" / "test-00000-of-00001.parquet")
    pd.DataFrame({"query-id": [7], "corpus-id": [1], "score": [1]}).to_parquet(root / "qrels" / "test-00000-of-00001.parquet")
    ds = {"source": "beir", "root": str(root)}
    assert has_multimodal(ds, "vidore")
    p = prepare_domain("vidore", ds, "vidore")
    assert p.qrels == {"7": {"1": 1}}
    assert list(p.mm.images["path"]) == ["images/1.png", "images/2"] and all(p.mm.images["ok"])
    assert p.mm.qrels["task3"] == {"7": {"images/1.png": 1}}


def test_beir_from_the_hub_offline_fails_with_the_recipe_and_reads_a_hub_shaped_snapshot(tmp_path, monkeypatch):
    from mmir.data.beir import HUB_PATTERNS
    from mmir.data.hub import fetch_files

    ds = parse_dataset({"source": "beir", "repo_id": "mteb/scifact", "revision": "0" * 40})
    assert fetched(ds) and dataset_domains("scifact", ds) == ["scifact"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="cannot reach the Hugging Face hub"):
        fetch_files(ds.repo_id, ds.revision, HUB_PATTERNS, tmp_path / "raw")
    # the snapshot as the fetch leaves it (what prepare reads from data/raw/<dataset>/)
    snap = beir_dir(tmp_path / "snapshot")
    p = prepare_domain("scifact", ds, "scifact", raw_root=snap)
    assert p.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}}
    with pytest.raises(ConfigError, match="exactly one of root"):
        parse_dataset({"source": "beir", "root": "x", "repo_id": "mteb/scifact", "revision": "0" * 40})
    with pytest.raises(ConfigError, match="pinned revision"):
        parse_dataset({"source": "beir", "repo_id": "mteb/scifact"})


def test_ir_datasets_unknown_id_and_missing_field(tmp_path):
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    (tmp_path / "docs.tsv").write_text("d1\tthe mean of a sample\nd2\ta box plot\n", encoding="utf-8")
    (tmp_path / "queries.tsv").write_text("q1\tsample mean\n", encoding="utf-8")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n", encoding="utf-8")
    name = "mmir-test/tiny-tsv"
    if name not in ir_datasets.registry:
        ir_datasets.registry.register(name, Dataset(TsvDocs(LocalDownload(tmp_path / "docs.tsv")),
                                                    TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
                                                    TrecQrels(LocalDownload(tmp_path / "qrels"), {1: "relevant"})))
    p = prepare_domain("tiny", {"source": "ir_datasets", "dataset_id": name}, "tiny")
    assert list(p.corpus["text"]) == ["the mean of a sample", "a box plot"] and p.qrels == {"q1": {"d1": 1}}
    with pytest.raises(DataError) as exc:
        prepare_domain("tiny", {"source": "ir_datasets", "dataset_id": name, "doc_fields": ["title", "text"]}, "tiny")
    assert (exc.value.file, exc.value.row, exc.value.field) == (f"irds://{name}/docs", 0, "title")
    with pytest.raises(DataError, match="not an ir_datasets id"):
        prepare_domain("x", {"source": "ir_datasets", "dataset_id": "no/such-dataset"}, "x")


def test_ir_datasets_register_module_registers_a_local_collection(tmp_path, monkeypatch):
    """How a workflow job finds a local collection: register_module is imported before the id is looked up."""
    (tmp_path / "docs.tsv").write_text("d1\tthe mean of a sample\n", encoding="utf-8")
    (tmp_path / "queries.tsv").write_text("q1\tsample mean\n", encoding="utf-8")
    (tmp_path / "qrels").write_text("q1 0 d1 2\n", encoding="utf-8")
    (tmp_path / "mmir_test_irds_local.py").write_text(
        "import ir_datasets\nfrom pathlib import Path\nfrom ir_datasets.datasets.base import Dataset\n"
        "from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries\nfrom ir_datasets.util import LocalDownload\n"
        "here = Path(__file__).parent\n"
        "ir_datasets.registry.register('mmir-test/module', Dataset(TsvDocs(LocalDownload(here / 'docs.tsv')), "
        "TsvQueries(LocalDownload(here / 'queries.tsv')), TrecQrels(LocalDownload(here / 'qrels'), {2: 'highly relevant'})))\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = prepare_domain("local", {"source": "ir_datasets", "dataset_id": "mmir-test/module",
                                 "register_module": "mmir_test_irds_local"}, "local")
    assert p.qrels == {"q1": {"d1": 2}} and p.report["ir_datasets"]["id"] == "mmir-test/module"


def _bright(root: Path, task: str = "biology", long_docs: bool = True) -> Path:
    ex = pd.DataFrame([
        {"id": "0", "query": "why do moths fly to light", "reasoning": "r", "gold_ids": ["b/a.txt"], "gold_ids_long": ["b/A.txt"],
         "excluded_ids": ["N/A"], "gold_answer": "N/A"},
        {"id": "1", "query": "what is phototaxis", "reasoning": "r", "gold_ids": ["b/b.txt", "b/a.txt"], "gold_ids_long": ["N/A"],
         "excluded_ids": ["b/c.txt", "b/zz.txt"], "gold_answer": "$\\frac{1}{n}$"}])
    tables = {"examples": ex, "documents": pd.DataFrame({"id": ["b/a.txt", "b/b.txt", "b/c.txt"], "content": ["x", "y", "z"]})}
    if long_docs:
        tables["long_documents"] = pd.DataFrame({"id": ["b/A.txt"], "content": ["long x"]})
    for config, df in tables.items():
        (root / config).mkdir(parents=True, exist_ok=True)
        df.to_parquet(root / config / f"{task}-00000-of-00001.parquet", index=False)
    return root


def test_bright_excluded_ids_gold_answer_and_long_context(tmp_path):
    root = _bright(tmp_path / "BRIGHT")
    ds = {"source": "bright", "root": str(root)}
    p = prepare_domain("bright", ds, "biology")
    assert p.qrels == {"0": {"b/a.txt": 1}, "1": {"b/b.txt": 1, "b/a.txt": 1}}
    assert p.excluded == {"1": ["b/c.txt"]}  # "N/A" = none; an id outside the corpus cannot be ranked anyway
    assert p.report["problems"]["excluded_not_in_corpus"] == 1
    assert [list(a) for a in p.topics["gold_answers"]] == [[], ["$\\frac{1}{n}$"]]
    write_prepared(p, tmp_path / "out")
    assert read_excluded(tmp_path / "out" / "excluded.tsv") == {"1": {"b/c.txt"}}
    long = prepare_domain("bright", ds | {"long_context": True}, "biology")
    assert list(long.corpus["doc_id"]) == ["b/A.txt"] and long.qrels == {"0": {"b/A.txt": 1}}
    # from the hub: the same files where the fetch leaves them (data/raw/<dataset>/)
    hub = prepare_domain("bright", {"source": "bright"}, "biology", raw_root=root)
    assert hub.qrels == p.qrels and hub.excluded == p.excluded


def test_bright_domains_and_config_errors(tmp_path):
    ds = parse_dataset({"source": "bright"})
    assert fetched(ds) and len(dataset_domains("bright", ds)) == 12
    assert dataset_domains("bright", {"source": "bright", "long_context": True})[-1] == "pony"
    with pytest.raises(ConfigError, match="not a BRIGHT task"):
        check_dataset("bright", {"source": "bright", "domains": ["biology", "chemistry"]})
    with pytest.raises(ConfigError, match="datasets.bright.domains.0"):
        check_dataset("bright", {"source": "bright", "long_context": True, "domains": ["leetcode"]})
    with pytest.raises(ConfigError, match="needs anserini_root"):
        parse_dataset({"source": "bright", "qrels_from": "anserini-fixed"})
    root = _bright(tmp_path / "BRIGHT", "leetcode", long_docs=False)
    with pytest.raises(DataError, match="no long documents for 'leetcode'"):
        prepare_domain("bright", {"source": "bright", "root": str(root), "long_context": True}, "leetcode")
    (root / "examples" / "leetcode-00000-of-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match="not a readable parquet file"):
        prepare_domain("bright", {"source": "bright", "root": str(root)}, "leetcode")


def test_the_bright_first_run_config_validates_offline_with_12_tasks_and_a_reasoning_grid():
    import subprocess
    import sys

    from conftest import PROJECT

    p = subprocess.run([sys.executable, "-m", "mmir", "--params", "workflow/configs/bright-hub.yaml", "validate"], cwd=PROJECT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    tasks = [line.split("\t")[1] for line in p.stdout.splitlines() if line.startswith("bright\t")]
    assert len(tasks) == 12 and tasks[0] == "biology" and tasks[-1] == "theoremqa_questions"
    from mmir.workflow.units import ablation_units
    from mmir.workflow.validate import load_config

    cfg = load_config(str(PROJECT / "workflow/configs/bright-hub.yaml"))
    assert {u["system"] for u in ablation_units(cfg, "reasoning")} == {"bm25", "bm25+reason:gpt4"}


@pytest.mark.parametrize("ds", [{"source": "bright", "domains": ["biology"], "reasoning": ["gpt4"]},
                                {"source": "beir", "repo_id": "mteb/scifact", "revision": "0" * 40}])
def test_fetch_step_of_hub_sources_offline_stops_with_the_local_copy_recipe(tmp_path, monkeypatch, ds):
    from mmir.workflow import steps

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="cannot reach the Hugging Face hub") as exc:
        steps.fetch("x", ds, "biology", tmp_path / "marker.json")
    assert ds.get("repo_id", "xlangai/BRIGHT") in str(exc.value) and not (tmp_path / "marker.json").exists()


def test_the_bright_first_run_config_as_an_overlay_of_params_yaml_is_the_same_config():
    """snakemake always merges a --configfile into params.yaml: bright-hub.yaml's nulls drop the offline datasets, systems
    and stages, so its documented snakemake command plans BRIGHT alone (it used to stop on essentiality.task)."""
    from conftest import PROJECT

    from mmir.workflow.units import task_units
    from mmir.workflow.validate import load_config

    alone = load_config(str(PROJECT / "workflow/configs/bright-hub.yaml"))
    merged = load_config(str(PROJECT / "params.yaml"), [str(PROJECT / "workflow/configs/bright-hub.yaml")])
    for key in ("datasets", "systems", "tasks", "rag", "m2rag", "mmdr", "essentiality", "audit"):
        assert (key in merged, merged.get(key)) == (key in alone, alone.get(key)), key
    assert list(merged["datasets"]) == ["bright"] and list(merged["systems"]) == ["bm25"]
    assert task_units(merged, "task1") == task_units(alone, "task1")


def test_validate_names_an_unknown_ir_datasets_id_or_register_module_before_any_job(tmp_path, monkeypatch):
    """A misspelt id used to pass validate and stop only in the prepare job; the registry is the installed package's."""

    check_dataset("s", {"source": "ir_datasets", "dataset_id": "beir/scifact/test"})   # in the catalogue, nothing fetched
    with pytest.raises(ConfigError, match=r"'beir/scifakt/test' is not an ir_datasets id") as exc:
        check_dataset("s", {"source": "ir_datasets", "dataset_id": "beir/scifakt/test"}, "my.yaml")
    assert (exc.value.key, exc.value.file) == ("datasets.s.dataset_id", "my.yaml")
    with pytest.raises(ConfigError, match="cannot import 'mmir_no_such_module'") as exc:
        check_dataset("s", {"source": "ir_datasets", "dataset_id": "x/y", "register_module": "mmir_no_such_module"})
    assert exc.value.key == "datasets.s.register_module"
    (tmp_path / "mmir_test_irds_validate.py").write_text(
        "import ir_datasets\nfrom ir_datasets.datasets.base import Dataset\n"
        "if 'mmir-test/validate' not in ir_datasets.registry:\n"
        "    ir_datasets.registry.register('mmir-test/validate', Dataset())\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    check_dataset("s", {"source": "ir_datasets", "dataset_id": "mmir-test/validate", "register_module": "mmir_test_irds_validate"})
