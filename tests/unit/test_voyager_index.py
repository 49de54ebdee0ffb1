"""mmir.retrieval.voyager_index: PyLate's Voyager candidates re-scored by exact MaxSim; high recall against the exact
top-k, exact scores, labelled approximate, cached by everything that changes the index."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("voyager")
pytest.importorskip("pylate")

from mmir.encoders.store import ShardFormat  # noqa: E402
from mmir.encoders.token_store import finalize_token_store, open_token_store, write_token_shard  # noqa: E402
from mmir.retrieval.maxsim import topk_maxsim  # noqa: E402
from mmir.retrieval.voyager_index import VoyagerIndex, VoyagerParams, index_key  # noqa: E402

D = 32


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _store(root, n=300, seed=0, key="enc#documents"):
    """``n`` items of 4..24 unit token vectors around 40 topic centres (so MaxSim has real structure), two shards."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((40, D)))
    mats = []
    for _ in range(n):
        t = rng.integers(0, 40, size=3)
        rows = centres[rng.choice(t, size=int(rng.integers(4, 25)))] + 0.35 * rng.standard_normal((1, D))
        mats.append(_unit(rows + 0.25 * rng.standard_normal(rows.shape)))
    ids = [f"d{i}" for i in range(n)]
    fmt = ShardFormat(dim=D, encoder_key=key)
    half = n // 2
    for s, (a, b) in enumerate([(0, half), (half, n)]):
        write_token_shard(root, s, ids[a:b], lambda x, y, a=a: mats[a + x : a + y], fmt, batch_size=64)
    finalize_token_store(root, key, 2)
    queries = [_unit(centres[rng.choice(40, size=6)] + 0.3 * rng.standard_normal((6, D))) for _ in range(20)]
    return open_token_store(root, key), queries


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    store, queries = _store(root)
    index = VoyagerIndex(store, tmp_path_factory.mktemp("cache"), VoyagerParams(m=16, ef_construction=100, ef_search=100,
                                                                                k_token=50))
    return store, queries, index


def test_recall_and_exact_scores(built):
    store, queries, index = built
    k = 10
    es, ei = topk_maxsim(queries, store.tokens, store.lengths, k)
    vs, vi, stats = index.search(queries, k)
    recall = np.mean([len(set(a) & set(b)) / k for a, b in zip(ei.tolist(), vi.tolist())])
    print(f"Voyager recall@10 vs exact MaxSim: {recall:.3f} (mean candidates {stats['voyager_candidates_mean']})")
    assert recall >= 0.9
    # every returned item carries its exact MaxSim, computed here from the store independently
    for r, q in enumerate(queries):
        for s, i in zip(vs[r], vi[r]):
            d = store.item(int(i)).astype(np.float32)
            assert s == pytest.approx(float((q @ d.T).max(axis=1).sum()), rel=1e-5)
    assert stats["approximate"] is True and stats["search"].startswith("approximate:voyager(M=16")


def test_exclusions_are_never_returned(built):
    store, queries, index = built
    _, ei = topk_maxsim(queries, store.tokens, store.lengths, 5)
    exclude = [set(row[:2]) for row in ei.tolist()]
    _, vi, _ = index.search(queries, 5, exclude)
    assert all(not (set(row) & ex) for row, ex in zip(vi.tolist(), exclude))


def test_cache_hit_and_every_key_part_rebuilds(tmp_path):
    store, queries = _store(tmp_path / "s", n=40)
    cache = tmp_path / "cache"
    p = VoyagerParams(m=8, ef_construction=40)
    first = VoyagerIndex(store, cache, p)
    again = VoyagerIndex(store, cache, p)
    assert first.built and not again.built and again.key == first.key
    np.testing.assert_array_equal(first.search(queries, 5)[1], again.search(queries, 5)[1])
    # search-time settings reuse the index; build settings, other vectors or another encoder rebuild it
    assert not VoyagerIndex(store, cache, VoyagerParams(m=8, ef_construction=40, ef_search=10, k_token=5)).built
    assert VoyagerIndex(store, cache, VoyagerParams(m=12, ef_construction=40)).built
    assert VoyagerIndex(store, cache, VoyagerParams(m=8, ef_construction=60)).built
    other, _ = _store(tmp_path / "s2", n=40, seed=1)
    assert index_key(other, p) != first.key and VoyagerIndex(other, cache, p).built
    enc, _ = _store(tmp_path / "s3", n=40, key="other#documents")
    assert index_key(enc, p) != first.key and VoyagerIndex(enc, cache, p).built
    assert len(list((cache / "voyager").iterdir())) == 5  # no temporary folders left behind


def test_the_default_stays_exact():
    from mmir.config.models import parse_system

    s = parse_system({"kind": "multivector", "backend": "colbert", "model": "m"})
    assert s.index == "exact" and s.voyager.m == 64 and s.voyager.k_token == 100  # PyLate's defaults
    assert VoyagerParams(**s.voyager.model_dump()) == VoyagerParams()


def test_the_stage_runs_voyager_and_labels_it_approximate(tmp_path):
    """A tiny ColBERT through the retrieval stage: with every item a candidate the Voyager run equals the exact run
    (ids and scores); its stats say approximate, the exact run's say exact."""
    pytest.importorskip("colpali_engine")
    from retrieval_pipeline import run_system
    from test_multimodal import ds, mm_root
    from tiny_multivector import save_pylate_colbert

    from mmir.data.prepare import prepare_domain, write_prepared

    prep = tmp_path / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp_path)), "d"), prep)
    path, _ = save_pylate_colbert(tmp_path / "colbert")
    system = {"kind": "multivector", "backend": "colbert", "model": str(path), "device": "cpu", "batch_size": 2}
    exact, es = run_system("task1", prep, system, tmp_path / "e", k=5)
    approx, vs = run_system("task1", prep, system | {"index": "voyager", "voyager": {"m": 8, "k_token": 1000}}, tmp_path / "v", k=5)
    assert es["search"] == "exact (MaxSim)" and es["approximate"] is False
    assert vs["approximate"] is True and vs["search"].startswith("approximate:voyager(M=8") and vs["voyager_built"]
    assert set(approx) == set(exact)
    for q in exact:
        assert [d for d, _ in approx[q]] == [d for d, _ in exact[q]]
        np.testing.assert_allclose([s for _, s in approx[q]], [s for _, s in exact[q]], rtol=1e-5)


def test_tables_label_approximate_rows(tmp_path):
    import json

    import pandas as pd
    from test_table_significance import _unit

    from mmir.config import PROJECT_ROOT, read_config, validate_config
    from mmir.workflow import steps
    from mmir.workflow.rules.common import approximate
    from mmir.workflow.rules.retrieval import _retrieve_params

    raw, _ = read_config(PROJECT_ROOT / "params.yaml", [])
    raw["systems"]["mv"] = {"kind": "multivector", "backend": "colbert", "model": "m"}
    raw["systems"]["mv-voyager"] = {"kind": "multivector", "backend": "colbert", "model": "m", "index": "voyager"}
    config = validate_config(raw)
    assert approximate(config, "mv-voyager") and not approximate(config, "mv") and not approximate(config, "bm25")
    w = {"task": "task1", "system": "mv-voyager", "dataset": "openstax", "domain": "statistics"}
    assert _retrieve_params(config, w)["cache_root"] == config["paths"]["embedding_cache"]
    assert _retrieve_params(config, w | {"system": "mv"})["cache_root"] is None
    metrics = [_unit(tmp_path, "os", "stat", s, v)[0] for s, v in (("bm25", [0.2, 0.4]), ("dense", [0.5, 0.7]))]
    out = steps.TableFiles(tmp_path / "t.md", tmp_path / "t.csv", tmp_path / "t.json")
    steps.report("task1", metrics, "nDCG@10", "official", out, approximate=["dense"])
    md = out.md.read_text()
    assert "| dense (approximate) |" in md and "Rows marked (approximate)" in md
    assert "dense" in json.loads(out.metrics.read_text())["task1"]["os"]  # plain names; the label has its CSV column
    assert pd.read_csv(out.csv).set_index("system").at["dense", "label"] == "approximate"


def test_an_overlay_with_a_voyager_system_plans_its_workflow(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from mmir.config import PROJECT_ROOT

    if not (PROJECT_ROOT.parent / "shared" / "data" / "openstax").is_dir():
        pytest.skip("needs ../shared/data")
    snakemake = Path(sys.executable).parent / "snakemake"
    proc = subprocess.run([str(snakemake), "-n", "--nolock", "--cores", "2", "--directory", str(PROJECT_ROOT), "--snakefile",
                           str(PROJECT_ROOT / "Snakefile"), "--configfile",
                           str(PROJECT_ROOT / "workflow" / "configs" / "multivector-voyager.yaml")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "results/runs/task1/openstax/reason-colbert-voyager/statistics.trec" in proc.stdout + proc.stderr
