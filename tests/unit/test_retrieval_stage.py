"""Bad inputs of the retrieval stage name the store or the vectors: a store encoded for another config of the
system, query and item vectors of different dimensions, a stale store whose rows are not the task's items."""

import json

import numpy as np
import pandas as pd
import pytest

from mmir.core.errors import DataError
from mmir.encoders.store import EncoderKeyMismatchError, ShardFormat, write_shard
from mmir.retrieval.retrievers import VectorRetriever
from mmir.workflow import retrieval_steps

SYSTEM = {"kind": "dense", "model": "toy", "batch_size": 4}


def _store(path, ids, dim, system):
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(ids), dim)).astype(np.float32)
    write_shard(path, 0, ids, lambda a, b: vecs[a:b], ShardFormat(dim=dim, encoder_key="toy#kind", dtype="float32"), batch_size=2)
    (path / "shard-00000.stats.json").write_text(json.dumps({
        "shards": 1, "rows": len(ids), "system_sha256": retrieval_steps.system_fingerprint(system), "truncations": {}}))


@pytest.fixture
def prep(tmp_path):
    p = tmp_path / "prep"
    p.mkdir()
    pd.DataFrame({"doc_id": ["a", "b", "c"], "text": ["x", "y", "z"]}).to_parquet(p / "corpus.parquet")
    pd.DataFrame({"qid": ["q1"], "query": ["x"], "image_paths": [[]], "gold_answers": [[]]}).to_parquet(p / "topics.parquet")
    (p / "excluded.tsv").write_text("qid\tdoc_id\n")
    return p


def _retrieve(prep, tmp_path, stores, system=SYSTEM):
    return retrieval_steps.retrieve(retrieval_steps.RetrieveJob("task1", prep, "toy", system, {"protocol": "official", "top_k": 10},
                                                                tmp_path / "r.trec", tmp_path / "r.json", stores))


def test_store_of_another_system_config_is_refused(prep, tmp_path):
    other = dict(SYSTEM, query_template="query: {text}")
    _store(tmp_path / "documents", ["a", "b", "c"], 4, other)
    _store(tmp_path / "queries", ["q1"], 4, other)
    stores = {"documents": str(tmp_path / "documents"), "queries": str(tmp_path / "queries")}
    with pytest.raises(EncoderKeyMismatchError, match="another system config"):
        _retrieve(prep, tmp_path, stores)
    assert not (tmp_path / "r.trec").exists()
    assert _retrieve(prep, tmp_path, stores, other)["run_lines"] == 3  # its own config reads it


def test_dimension_mismatch_names_both_shapes():
    r = VectorRetriever()
    r.index(np.zeros((5, 8), dtype=np.float32))
    with pytest.raises(ValueError, match=r"query vectors \(2, 4\), item vectors \(5, 8\)"):
        r.search(np.zeros((2, 4), dtype=np.float32), 3, None)


def test_stale_store_rows_are_an_error_naming_the_store(prep, tmp_path):
    _store(tmp_path / "documents", ["a", "b"], 4, SYSTEM)  # the corpus has three documents now
    _store(tmp_path / "queries", ["q1"], 4, SYSTEM)
    with pytest.raises(DataError, match=r"documents.*not the task's 3 items"):
        _retrieve(prep, tmp_path, {"documents": str(tmp_path / "documents"), "queries": str(tmp_path / "queries")})


def test_a_vector_retrieve_never_imports_torch(prep, tmp_path):
    """A retrieve job reads stored vectors with numpy only: on 2 cores, importing torch alone took 3-5 s of every
    dense or CLIP retrieve job (17 of them in the first run)."""
    import subprocess
    import sys

    _store(tmp_path / "documents", ["a", "b", "c"], 4, SYSTEM)
    _store(tmp_path / "queries", ["q1"], 4, SYSTEM)
    code = f"""
import json, sys
from pathlib import Path
from mmir.workflow import retrieval_steps
stores = {{"documents": {str(tmp_path / "documents")!r}, "queries": {str(tmp_path / "queries")!r}}}
stats = retrieval_steps.retrieve(retrieval_steps.RetrieveJob("task1", Path({str(prep)!r}), "toy", {SYSTEM!r},
    {{"protocol": "official", "top_k": 10}}, Path({str(tmp_path / "r.trec")!r}), Path({str(tmp_path / "r.json")!r}), stores))
print(json.dumps({{"lines": stats["run_lines"], "heavy": [m for m in ("torch", "transformers") if m in sys.modules]}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"lines": 3, "heavy": []}
