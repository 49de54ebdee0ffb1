"""Python plug-ins (``backend: plugin``): config, identity (distribution and version, editable installs, a module's
sha256), the encode and retrieve steps of dense, mm and multivector plug-ins against a direct computation with the
plug-in's own outputs, the embedding-cache key (a new version or an edited source is a miss), every bad output stopping
the job with a named error and nothing written, and plug-in rerankers."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from retrieval_pipeline import ENCODING, run_system
from test_multimodal import ds, mm_root
from toy_plugins import SOURCE, forget, write_distribution, write_module

from mmir.config import validate_config as fill_config
from mmir.config.models import (
    DensePluginSystem,
    MMPluginSystem,
    MultiVectorPluginSystem,
    PluginReranker,
    parse,
    parse_params,
    parse_system,
)
from mmir.config.models.rerank import Reranker
from mmir.core.errors import ConfigError
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.encoders.cache import EmbeddingCache
from mmir.encoders.plugins import PluginError, identify
from mmir.encoders.plugins.caller import texts_sha256
from mmir.retrieval.encoding import KindEncoder
from mmir.workflow import retrieval_steps


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plug")
    out = tmp / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp)), "d"), out)
    return out


@pytest.fixture
def toy(tmp_path, monkeypatch, request):
    """A module of the toy plug-ins outside any distribution, on the Python path: its name (one per test)."""
    name = f"toy_{request.node.name.split('[')[0]}_{abs(hash(request.node.name)) % 10**6}"
    write_module(tmp_path / "mods", name)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    yield name
    forget(name)


def unit(x):
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def _corpus(prep):
    c = pd.read_parquet(prep / "corpus.parquet")
    return c["doc_id"].tolist(), c["text"].tolist()


def _excluded(prep, name="excluded.tsv"):
    ex = pd.read_csv(prep / name, sep="\t")
    return {q: set(g["doc_id"]) for q, g in ex.groupby("qid")}


def _ranking(scores, ids, excluded=()):
    order = np.lexsort((np.arange(len(ids)), -scores))
    return [ids[j] for j in order if ids[j] not in excluded]


# ------------------------------------------------------------------------------------------------ config
def test_backend_plugin_is_a_variant_of_each_vector_kind_and_of_rerankers():
    assert type(parse_system({"kind": "dense", "backend": "plugin", "factory": "a.b:c"})) is DensePluginSystem
    assert type(parse_system({"kind": "mm", "backend": "plugin", "factory": "lsa", "image_mode": "stack"})) is MMPluginSystem
    assert type(parse_system({"kind": "multivector", "backend": "plugin", "factory": "lsa"})) is MultiVectorPluginSystem
    r = parse(Reranker, {"backend": "plugin", "factory": "lsa-reranker", "options": {"k": 2}}, "rerankers.r")
    assert type(r) is PluginReranker and r.kind == "plugin" and r.options == {"k": 2}
    assert parse_system({"kind": "dense", "backend": "plugin", "factory": "x"}).model == "x"  # what lineage rows show


@pytest.mark.parametrize("entry, key, message", [
    ({"kind": "dense", "backend": "plugin", "factory": "not a factory"}, "systems.s.factory", "neither 'package.module:function'"),
    ({"kind": "dense", "backend": "plugin"}, "systems.s.factory", "Field required"),
    ({"kind": "dense", "backend": "plugin", "factory": "x", "model": "m"}, "systems.s.model", "unknown key"),
    ({"kind": "mm", "backend": "other", "encoder": "clip"}, "systems.s.backend", "backend must be plugin, or absent"),
])
def test_bad_plugin_entries_name_their_key(entry, key, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_system(entry, "systems.s")
    assert err.value.key == key


def test_validation_names_a_factory_that_cannot_be_found(tmp_path, toy):
    from mmir.workflow.validate import check_plugins

    base = {"datasets": {"t": {"source": "local", "root": str(tmp_path), "domains": ["d"]}}, "tasks": ["task1"]}
    ok = fill_config({**base, "systems": {"p": {"kind": "dense", "backend": "plugin", "factory": f"{toy}:Counts"}}})
    check_plugins(parse_params(ok))
    for factory, message in (("no_such_module_xyz:f", "not installed nor on the Python path"),
                             ("no-such-entry-point", "no entry point 'no-such-entry-point' in the group mmir.plugins")):
        bad = fill_config({**base, "systems": {"p": {"kind": "dense", "backend": "plugin", "factory": factory}}})
        with pytest.raises(ConfigError, match=message) as err:
            check_plugins(parse_params(bad))
        assert err.value.key == "systems.p.factory"


# ---------------------------------------------------------------------------------------------- identity
def test_a_module_outside_any_distribution_is_its_source_sha256(tmp_path, toy):
    path = tmp_path / "mods" / f"{toy}.py"
    ident = identify(f"{toy}:Counts")
    assert ident.distribution is None and ident.label == f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    path.write_text(path.read_text() + "\n# edited\n")
    assert identify(f"{toy}:Counts").label != ident.label


def test_a_distribution_is_its_name_and_version_by_entry_point_or_module(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_distribution(site, "toydist_a", "1.0", entry_points={"toy-a": "toydist_a:Counts"})
    monkeypatch.syspath_prepend(str(site))
    try:
        by_ep, by_module = identify("toy-a"), identify("toydist_a:Counts")
        code = hashlib.sha256(f"__init__.py\0{hashlib.sha256(SOURCE.encode()).hexdigest()}\n".encode()).hexdigest()
        assert by_ep.label == by_module.label == f"toydist_a==1.0 (sha256:{code})" and by_ep.target == "toydist_a:Counts"
        write_distribution(site, "toydist_a", "1.1", entry_points={"toy-a": "toydist_a:Counts"})  # pip install of 1.1
        importlib.invalidate_caches()
        assert identify("toy-a").label == f"toydist_a==1.1 (sha256:{code})"
        with pytest.raises(PluginError, match=r"no entry point 'toy-b' .*installed: .*toy-a"):
            identify("toy-b", "systems.x")
    finally:
        forget("toydist_a")


def test_an_editable_install_adds_its_source_sha256(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    init = write_distribution(tmp_path / "site", "toydist_e", "0.3", editable_root=project)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(project / "src"))
    try:
        ident = identify("toydist_e:Counts")
        assert ident.editable and ident.label.startswith("toydist_e==0.3 (editable, sha256:")
        init.write_text(init.read_text() + "\n# edited in place, same version\n")
        assert identify("toydist_e:Counts").label != ident.label
    finally:
        forget("toydist_e")


def _pip_install(src, target, *extra):
    """``pip install --target`` of the project folder ``src``, offline with the venv's setuptools (the shared venv is
    not touched)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
                           "--target", str(target), *extra, str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _flat_project(src, name, version):
    """A plug-in project as one writes it from the docs: a flat layout, the package ``name`` (``model.py`` holds the
    toy plug-ins' :data:`SOURCE`)."""
    (src / name).mkdir(parents=True, exist_ok=True)
    (src / name / "__init__.py").write_text("from .model import Counts\n")
    (src / name / "model.py").write_text(SOURCE)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
                                        f'[project]\nname = "{name}"\nversion = "{version}"\n'
                                        f'[tool.setuptools]\npackages = ["{name}"]\n')


def test_a_plugin_pip_installed_from_its_source_folder_is_identified_by_the_code_imported(prepared, tmp_path, monkeypatch):
    """``pip install <folder>`` leaves ``<folder>/<name>.egg-info``: the plug-in imported from that folder was taken for
    the installed distribution (its version pinned the code), so an edit was a cache hit and the run kept the stale
    vectors. Now the code imported is hashed: the edit is a miss and the run has the edited code's values."""
    name = f"flatplug_{abs(hash(str(tmp_path))) % 10**6}"
    src = tmp_path / "src"
    _flat_project(src, name, "1.0")
    _pip_install(src, tmp_path / "site")
    assert [p.name for p in src.glob("*.egg-info")] == [f"{name}.egg-info"]  # what the build leaves in the folder
    monkeypatch.syspath_prepend(str(src))  # the factory imported from the source folder, as with PYTHONPATH
    system = _dense(f"{name}:Counts")
    try:
        ident = identify(system["factory"])
        ids, texts = _corpus(prepared)
        assert _misses(prepared, system, tmp_path / "a") == len(ids)
        assert _misses(prepared, system, tmp_path / "b") == 0
        model = src / name / "model.py"
        model.write_text(model.read_text().replace("v[:, -1] = 0.01", "v[:, -1] = 3.0"))  # an edit that changes vectors
        forget(name), forget(f"{name}.model")
        run, _ = run_system("task1", prepared, system, tmp_path / "c", k=10)
        assert json.loads((tmp_path / "c/vectors/documents/shard-00000.stats.json").read_text())["cache_misses"] == len(ids)
        assert identify(system["factory"]).label != ident.label  # the job's params change: Snakemake reruns it
        ref = importlib.import_module(name).Counts()
        ref.fit(texts)
        topics = pd.read_parquet(prepared / "topics.parquet")
        expect = unit(ref.vectors(topics["query"].tolist())) @ unit(ref.vectors(texts)).T * 100
        qid, ranked = next(iter(run.items()))
        row = topics["qid"].tolist().index(qid)
        np.testing.assert_allclose([s for _, s in ranked], [expect[row][ids.index(d)] for d, _ in ranked], atol=1e-4)
        assert ident.source == str((src / name / "__init__.py").resolve())
        assert ident.distribution is None and ident.label == f"sha256:{ident.source_sha256}"
    finally:
        forget(name), forget(f"{name}.model")


def test_two_metadata_folders_of_one_distribution_are_named_not_picked(tmp_path, monkeypatch):
    name = f"flatplug_{abs(hash(str(tmp_path))) % 10**6}"
    src, site = tmp_path / "src", tmp_path / "site"
    _flat_project(src, name, "1.0")
    _pip_install(src, site)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(site))  # one folder on the path twice (PYTHONPATH and a .pth file): one folder
    try:
        one = identify(f"{name}:Counts")
        assert one.label == f"{name}==1.0 (sha256:{one.source_sha256})"
        _flat_project(src, name, "1.1")
        _pip_install(src, site, "--upgrade")  # pip leaves 1.0's metadata folder beside 1.1's
        assert sorted(p.name for p in site.glob("*.dist-info")) == [f"{name}-1.0.dist-info", f"{name}-1.1.dist-info"]
        importlib.invalidate_caches()
        two = identify(f"{name}:Counts")
        assert two.version is None and two.source_sha256 == one.source_sha256  # the same code
        assert two.label == (f"{name}==? (2 metadata folders list its files: {name}-1.0.dist-info, {name}-1.1.dist-info; "
                             f"remove the stale one; sha256:{one.source_sha256})")
    finally:
        forget(name), forget(f"{name}.model")


# ------------------------------------------------------------------------------ dense: stage and cache key
def _dense(factory, **kw):
    return {"kind": "dense", "backend": "plugin", "factory": factory, "batch_size": 2, **kw}


def test_dense_plugin_run_equals_a_direct_computation_and_is_fitted_on_the_corpus(prepared, tmp_path, toy):
    run, stats = run_system("task1", prepared, _dense(f"{toy}:Counts"), tmp_path / "w", k=10)
    ref = importlib.import_module(toy).Counts()
    ids, texts = _corpus(prepared)
    ref.fit(texts)
    topics = pd.read_parquet(prepared / "topics.parquet")
    expect = unit(ref.vectors(topics["query"].tolist())) @ unit(ref.vectors(texts)).T * 100
    excluded = _excluded(prepared)
    for r, qid in enumerate(topics["qid"]):
        assert [d for d, _ in run[qid]] == _ranking(expect[r], ids, excluded.get(qid, ()))
        np.testing.assert_allclose([s for _, s in run[qid]], sorted(expect[r][[ids.index(d) for d, _ in run[qid]]], reverse=True),
                                   atol=1e-4)
    spec = KindEncoder(parse_system(_dense(f"{toy}:Counts")), name="sys", prep=prepared).spec
    assert spec["fit"] == {"documents": len(texts), "sha256": texts_sha256(texts)} and spec["normalize"] == "l2"
    shard = json.loads((tmp_path / "w/vectors/documents/shard-00000.stats.json").read_text())
    assert shard["plugin"].startswith("sha256:") and shard["cache_misses"] == len(ids) and shard["cache_model_calls"] == 3


def _misses(prep, system, work, kind="documents"):
    run_system("task1", prep, system, work, k=10)
    return json.loads((work / "vectors" / kind / "shard-00000.stats.json").read_text())["cache_misses"]


def test_an_edited_module_or_a_new_version_is_a_cache_miss(prepared, tmp_path, monkeypatch, toy):
    n = len(_corpus(prepared)[0])
    system = _dense(f"{toy}:Counts")
    assert _misses(prepared, system, tmp_path / "a") == n
    assert _misses(prepared, system, tmp_path / "b") == 0  # same code, same corpus: every vector from the cache
    path = tmp_path / "mods" / f"{toy}.py"
    path.write_text(path.read_text() + "\n# a new revision of the plug-in\n")
    assert _misses(prepared, system, tmp_path / "c") == n
    # options are part of the key too
    assert _misses(prepared, _dense(f"{toy}:Counts", options={"bad_batch": 99}), tmp_path / "d") == n

    site = tmp_path / "site"
    write_distribution(site, "toydist_v", "1.0", entry_points={"toy-v": "toydist_v:Counts"})
    monkeypatch.syspath_prepend(str(site))
    try:
        assert _misses(prepared, _dense("toy-v"), tmp_path / "e") == n
        assert _misses(prepared, _dense("toy-v"), tmp_path / "f") == 0
        write_distribution(site, "toydist_v", "1.1", entry_points={"toy-v": "toydist_v:Counts"})
        importlib.invalidate_caches()
        assert _misses(prepared, _dense("toy-v"), tmp_path / "g") == n
    finally:
        forget("toydist_v")


def _encode(prep, system, work, kind="documents"):
    store = work / "vectors" / kind
    job = retrieval_steps.EncodeJob(prep, "sys", system, kind, 0, 1, ENCODING, work / "cache", store,
                                    store / "shard-00000.sealed.json", store / "shard-00000.stats.json")
    return retrieval_steps.encode(job), job


@pytest.mark.parametrize("mode, problem", [
    ("shape", r"shape \(2, 13, 1\), not \(2, d\): one row per input"),
    ("dtype", "dtype float64, not float32"),
    ("count", "1 vectors for 2 inputs"),
    ("nan", r"NaN in 1 rows \(first: 0\)"),
    ("inf", r"infinite values in 1 rows \(first: 1\)"),
    ("raise", "raised RuntimeError: toy failure"),
    ("type", "returned a builtins.list, not a numpy array"),
])
def test_each_bad_dense_output_stops_the_job_naming_it_and_nothing_is_written(prepared, tmp_path, toy, mode, problem):
    system = _dense(f"{toy}:Counts", options={"mode": mode})
    with pytest.raises(PluginError, match=problem) as err:
        _encode(prepared, system, tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"systems.sys: plug-in '{toy}:Counts' (sha256:") and "batch 1 (2 document texts, encode_documents)" in msg
    store = tmp_path / "vectors" / "documents"
    assert not (store / "shard-00000.sealed.json").exists() and not (store / "shard-00000.stats.json").exists()
    assert not list(store.glob("shard-00000.*"))  # not even a partly written batch
    with EmbeddingCache(tmp_path / "cache", KindEncoder(parse_system(system), name="sys", prep=prepared).spec) as cache:
        assert len(cache) == 0


def test_a_dimension_that_changes_between_batches_stops_the_job(prepared, tmp_path, toy):
    system = _dense(f"{toy}:Counts", options={"mode": "dim", "bad_batch": 2})
    with pytest.raises(PluginError, match=r"batch 2 \(2 document texts, encode_documents\): vectors of dimension 2, but "
                       r"earlier batches had \d+"):
        _encode(prepared, system, tmp_path)
    assert not (tmp_path / "vectors/documents/shard-00000.stats.json").exists()
    with EmbeddingCache(tmp_path / "cache", KindEncoder(parse_system(system), name="sys", prep=prepared).spec) as cache:
        assert len(cache) == 2  # batch 1 passed its checks: kept, as any finished batch (a rerun resumes)


def test_a_dimension_other_than_the_caches_names_the_plugin_not_only_the_cache_file(prepared, tmp_path, monkeypatch):
    """The documents job stored vectors of d dimensions; the queries job's plug-in returns 2: the error named the cache
    file alone (``cache vectors have dim 13, got vectors of dim 2``)."""
    write_module(tmp_path / "m", "toy_qdim", "\nclass Q(Counts):\n    def encode_queries(self, texts):\n"
                 "        return self.vectors(texts)[:, :2].copy()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "m"))
    try:
        system = _dense("toy_qdim:Q")
        _encode(prepared, system, tmp_path, "documents")
        d = json.loads((tmp_path / "vectors/documents/shard-00000.stats.json").read_text())["dim"]
        with pytest.raises(PluginError) as err:
            _encode(prepared, system, tmp_path, "queries")
        label = identify("toy_qdim:Q").label
        cache = next((tmp_path / "cache").glob("toy_qdim_Q-*.sqlite"))
        assert str(err.value) == (f"systems.sys: plug-in 'toy_qdim:Q' ({label}): batch 1 (2 query texts, encode_queries): "
                                  f"vectors of dimension 2, but the embedding cache {cache} holds this plug-in's vectors of "
                                  f"dimension {d}; the job stops, nothing of this batch is written")
    finally:
        forget("toy_qdim")


def test_a_factory_that_fails_or_returns_the_wrong_object_is_named(prepared, tmp_path, toy):
    cases = [(f"{toy}:NOT_CALLABLE", "is a int, not a callable"), (f"{toy}:Nope", "has no attribute 'Nope'"),
             (f"{toy}:Colours", r"returned a Colours without encode_queries, encode_documents \(the DensePlugin protocol"),
             (f"{toy}:make_counts", r"make_counts\(\*\*options\) raised TypeError")]
    for factory, message in cases:
        options = {"unknown_option": 1} if factory.endswith("make_counts") else {}
        with pytest.raises(PluginError, match=message):
            _encode(prepared, _dense(factory, options=options), tmp_path)


# --------------------------------------------------------------------------------------- mm and multivector
def test_mm_plugin_task3_equals_a_direct_computation(prepared, tmp_path, toy):
    from mmir.data.images import blank_image

    system = {"kind": "mm", "backend": "plugin", "factory": f"{toy}:Colours", "image_mode": "first", "batch_size": 2}
    run, _ = run_system("task3", prepared, system, tmp_path / "w", k=10)
    ref = importlib.import_module(toy).Colours()
    topics = pd.read_parquet(prepared / "topics_mm.parquet")
    qimg = pd.read_parquet(prepared / "query_images.parquet").set_index("path")
    images = pd.read_parquet(prepared / "images.parquet")
    images = images[images["ok"]]
    firsts = [Image.open(io.BytesIO(qimg.at[p[0], "bytes"])).convert("RGB") if len(p) else blank_image()
              for p in topics["image_paths"]]
    qv = unit((unit(ref.encode_texts(topics["query"].tolist(), "query")) + unit(ref.encode_images(firsts, "query"))) / 2)
    iv = unit(ref.encode_images([Image.open(io.BytesIO(b)).convert("RGB") for b in images["bytes"]], "document"))
    expect = qv.astype(np.float32) @ iv.astype(np.float32).T  # float32, as the store and the search (near-ties)
    for r, qid in enumerate(topics["qid"]):
        assert [d for d, _ in run[qid]] == _ranking(expect[r], images["path"].tolist())[:10]

    with pytest.raises(PluginError, match="image_mode all needs encode_image_sets"):
        KindEncoder(parse_system({**system, "image_mode": "all"}), name="sys")
    bad = {**system, "options": {"mode": "nan"}}
    with pytest.raises(PluginError, match=rf"systems.sys: plug-in '{toy}:Colours' .*batch 1 \(\d document texts, encode_texts\): NaN"):
        _encode(prepared, bad, tmp_path / "bad")


def _maxsim(q, d):
    return float((unit(q) @ unit(d).T).max(axis=1).sum())


def test_multivector_plugin_task1_equals_maxsim_of_its_token_vectors(prepared, tmp_path, toy):
    system = {"kind": "multivector", "backend": "plugin", "factory": f"{toy}:Tokens", "batch_size": 2}
    run, _ = run_system("task1", prepared, system, tmp_path / "w", k=10)
    ref = importlib.import_module(toy).Tokens()
    ids, texts = _corpus(prepared)
    ref.fit(texts)
    topics = pd.read_parquet(prepared / "topics.parquet")
    docs = ref.tokens(texts)
    excluded = _excluded(prepared)
    for qid, q in zip(topics["qid"], ref.tokens(topics["query"].tolist())):
        s = np.array([_maxsim(q, d) for d in docs], dtype=np.float32)
        assert [d for d, _ in run[qid]] == _ranking(s, ids, excluded.get(qid, ()))


@pytest.mark.parametrize("mode, problem", [
    ("count", "1 token matrices for 2 inputs"), ("dtype", "text 0: dtype float64, not float32"),
    ("shape", r"text 0: shape \(\d+,\), not \(tokens, d\)"), ("nan", "text 0: NaN in"), ("inf", "text 0: infinite values in"),
    ("type", r"returned a ndarray, not a list of one \(tokens, d\) array per input \(2 inputs\)"),
    ("raise", "raised RuntimeError: toy failure"),
])
def test_each_bad_multivector_output_stops_the_job(prepared, tmp_path, toy, mode, problem):
    """Batch 1: the first batch_size (2) documents, which also gives the store its dimension."""
    system = {"kind": "multivector", "backend": "plugin", "factory": f"{toy}:Tokens", "batch_size": 2, "options": {"mode": mode}}
    with pytest.raises(PluginError, match=problem):
        _encode(prepared, system, tmp_path)
    assert not list((tmp_path / "vectors" / "documents").glob("shard-00000.s*.json"))


# ------------------------------------------------------------------------------------------------ rerankers
def _rerank_job(tmp_path, prep, reranker, depth=4):
    from mmir.retrieval.runs import write_run
    from mmir.workflow.rerank_steps import RerankJob

    ids, _ = _corpus(prep)
    write_run(tmp_path / "first.trec", {"q1": [(d, 9.0 - i) for i, d in enumerate(ids) if d != "d/bbbbbbbb_0.txt"],
                                        "q2": [(d, 9.0 - i) for i, d in enumerate(ids)]}, "bm25")
    return RerankJob("task1", prep, "bm25+rr:p", "p", reranker, depth, tmp_path / "first.trec", tmp_path / "out.trec",
                     tmp_path / "out.json", tmp_path / "out.calls.jsonl")


def test_plugin_reranker_orders_by_its_scores(prepared, tmp_path, toy):
    from mmir.retrieval.runs import read_run
    from mmir.workflow.rerank_steps import rerank

    stats = rerank(_rerank_job(tmp_path, prepared, {"backend": "plugin", "factory": f"{toy}:Overlap"}))
    ref = importlib.import_module(toy).Overlap()
    _, texts = _corpus(prepared)
    ref.fit(texts)
    first = {q: [d for d, _ in r] for q, r in read_run(tmp_path / "first.trec").items()}
    corpus = dict(zip(*_corpus(prepared)))
    queries = dict(pd.read_parquet(prepared / "topics.parquet")[["qid", "query"]].itertuples(index=False))
    out = read_run(tmp_path / "out.trec")
    for qid, ranking in first.items():
        head = ranking[:4]
        s = ref.vectors([corpus[d] for d in head]) @ ref.vectors([queries[qid]])[0]
        assert [d for d, _ in out[qid]] == [head[j] for j in np.lexsort((np.arange(4), -s))] + ranking[4:]
    assert stats["kind"] == "plugin" and stats["pairs"] == 8 and stats["plugin"].startswith("sha256:")


@pytest.mark.parametrize("mode, problem", [("shape", r"shape \(4, 1\), not \(4,\)"), ("dtype", "dtype float64"),
                                           ("count", "3 scores for 4 candidates"), ("nan", "NaN in 1 candidates"),
                                           ("inf", "infinite values in 1 candidates"), ("raise", "toy failure")])
def test_each_bad_reranker_output_stops_the_job_naming_the_query(prepared, tmp_path, toy, mode, problem):
    from mmir.workflow.rerank_steps import rerank

    job = _rerank_job(tmp_path, prepared, {"backend": "plugin", "factory": f"{toy}:Overlap", "options": {"mode": mode}})
    with pytest.raises(PluginError, match=rf"rerankers.p: plug-in '{toy}:Overlap' .*query q1 \(4 candidates, score\).*{problem}"):
        rerank(job)
    assert not (tmp_path / "out.trec").exists() and not (tmp_path / "out.json").exists()


# ------------------------------------------------------------------------------------- rules and lineage
def test_the_mlflow_tag_model_revision_is_the_identity_not_the_factory(toy):
    from mmir.workflow.steps import model_revision

    for system in (_dense(f"{toy}:Counts"), {"kind": "mm", "backend": "plugin", "factory": f"{toy}:Colours"}):
        assert model_revision(parse_system(system)) == identify(system["factory"]).label


def test_the_identity_is_in_the_jobs_params_and_the_lineage(tmp_path, toy):
    from mmir.reporting.lineage import lineage
    from mmir.workflow.rules import RULES

    root = mm_root(tmp_path)
    config = fill_config({"datasets": {"t": {"source": "local", "root": str(root), "domains": ["d"]}}, "tasks": ["task1"],
                          "systems": {"bm25": {"kind": "bm25"}, "p": _dense(f"{toy}:Counts")},
                          "rerankers": {"r": {"backend": "plugin", "factory": f"{toy}:Overlap"}},
                          "rerank": {"runs": [{"system": "bm25", "reranker": "r", "depth": 5}]}})
    label = identify(f"{toy}:Counts").label
    w = {"dataset": "t", "domain": "d", "system": "p", "kind": "documents", "shard": "00000", "task": "task1"}
    assert RULES["encode"].slice(config, w)["plugin"] == label and RULES["retrieve"].slice(config, w)["plugin"] == label
    assert RULES["rerank"].slice(config, {**w, "system": "bm25+rr:r"})["plugin"] == label
    assert "plugin" not in RULES["retrieve"].slice(config, {**w, "system": "bm25"})
    lin = lineage({k: config[k] for k in ("datasets", "systems", "rerankers")})
    row = next(r for r in lin["systems"] if r["system"] == "p")
    assert (row["backend"], row["model"], row["revision"]) == ("plugin", f"{toy}:Counts", label)
    assert lin["rerankers"] == [{"reranker": "r", "kind": "plugin", "factory": f"{toy}:Overlap", "revision": label}]
