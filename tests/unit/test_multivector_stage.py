"""Multi-vector systems through the retrieval stage (encode -> token stores -> exact MaxSim -> TREC run) on a tiny
prepared domain, checked against MaxSim computed directly from the encoder's outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from retrieval_pipeline import encode_kinds, run_system
from test_multimodal import ds, mm_root

from mmir.config.models import parse_system
from mmir.core.errors import DataError
from mmir.data.prepare import prepare_domain, write_prepared
from mmir.encoders.multivector import make_multivector_encoder
from mmir.retrieval.items import task_items, task_queries

pytest.importorskip("colpali_engine")

from tiny_multivector import save_colqwen2_5, save_pylate_colbert  # noqa: E402


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mv")
    out = tmp / "prep"
    write_prepared(prepare_domain("t", ds(mm_root(tmp)), "d"), out)
    return out


@pytest.fixture(scope="module")
def colbert(tmp_path_factory):
    path, _ = save_pylate_colbert(tmp_path_factory.mktemp("colbert"))
    return {"kind": "multivector", "backend": "colbert", "model": str(path), "device": "cpu", "batch_size": 2, "chunk_tokens": 16}


@pytest.fixture(scope="module")
def colqwen(tmp_path_factory):
    path = save_colqwen2_5(tmp_path_factory.mktemp("colqwen"))
    return {"kind": "multivector", "backend": "colpali", "architecture": "colqwen2.5", "model": str(path), "device": "cpu",
            "batch_size": 2, "chunk_tokens": 50}


def maxsim(q, d):
    return float((q.astype(np.float32) @ d.astype(np.float32).T).max(axis=1).sum())


def expected_run(queries, items, qids, ids, k, dtype=np.float32):
    """MaxSim of every (query, item) on vectors stored as ``dtype``, ranked by score then item order."""
    out = {}
    for qid, q in zip(qids, queries):
        s = np.array([maxsim(q.astype(dtype), d.astype(dtype)) for d in items], dtype=np.float32)
        order = np.argsort(-s, kind="stable")[:k]
        out[qid] = [(ids[j], float(s[j])) for j in order]
    return out


def check(run, want):
    assert set(run) == set(want)
    for qid in want:
        assert [d for d, _ in run[qid]] == [d for d, _ in want[qid]], qid
        np.testing.assert_allclose([s for _, s in run[qid]], [s for _, s in want[qid]], rtol=1e-5)


def test_colbert_task1_run_equals_direct_maxsim_and_a_rerun_reuses_everything(prepared, colbert, tmp_path):
    run, stats = run_system("task1", prepared, colbert, tmp_path / "w", k=5, encoding={"shard_size": 3, "dtype": "float16",
                                                                                       "batch_rows": 2}, shards=2)
    assert stats["search"] == "exact (MaxSim)" and stats["maxsim_largest_temporary"][1] <= 16 + 20  # one item may exceed 16
    enc = make_multivector_encoder(colbert)
    items, qs = task_items("task1", prepared), task_queries("task1", prepared)
    from mmir.retrieval.items import item_texts

    want = expected_run(enc.encode_queries(qs.texts), enc.encode_documents(item_texts(items, prepared, None)), qs.qids, items.ids,
                        5, np.float16)
    excluded = {(r["qid"], r["doc_id"]) for r in _excluded(prepared)}
    want = {q: [(d, s) for d, s in v if (q, d) not in excluded] for q, v in want.items()}
    check({q: v[: len(want[q])] for q, v in run.items()}, {q: v[: len(run[q])] for q, v in want.items()})
    again = encode_kinds("task1", prepared, colbert, tmp_path / "w", encoding={"shard_size": 3, "dtype": "float16", "batch_rows": 2},
                         shards=2)
    st = json.loads((tmp_path / "w" / "vectors" / "documents" / "shard-00001.stats.json").read_text())
    assert again and st["batches_computed"] == 0 and st["cache_model_calls"] == 0


def _excluded(prep):
    import pandas as pd

    p = prep / "excluded.tsv"
    return pd.read_csv(p, sep="\t").to_dict("records") if p.exists() else []


def test_colqwen_task3_and_task4_runs_equal_direct_maxsim(prepared, colqwen, tmp_path):
    enc = make_multivector_encoder(colqwen)
    qs = task_queries("task3", prepared)
    q = enc.encode_queries(qs.texts)
    import pandas as pd

    im = pd.read_parquet(prepared / "images.parquet")
    data = dict(zip(im["path"], im["bytes"]))
    items3 = task_items("task3", prepared)
    run3, _ = run_system("task3", prepared, colqwen, tmp_path / "w3", k=10)
    check(run3, expected_run(q, enc.encode_images([bytes(data[p]) for p in items3.image_paths]), qs.qids, items3.ids, 10))
    items4 = task_items("task4", prepared)
    text = pd.read_parquet(prepared / "corpus.parquet").set_index("doc_id")["text"]
    pairs = enc.encode_pairs([(text[d], bytes(data[p]) if p else b"") for d, p in zip(items4.doc_ids, items4.image_paths)])
    run4, stats4 = run_system("task4", prepared, colqwen, tmp_path / "w4", k=100)
    assert stats4["items"] == len(items4)
    want = expected_run(q, pairs, qs.qids, items4.ids, 100)
    kept = {qid: {d for d, _ in v} for qid, v in run4.items()}
    check(run4, {qid: [x for x in v if x[0] in kept[qid]] for qid, v in want.items()})  # pairs excluded by the task drop out
    # a pair's document text is cut at document_length tokens (none here, at 512): counted as the pairs' cuts
    tok = enc.processor.tokenizer
    texts = [text[d] for d in items4.doc_ids]
    assert stats4["encode_pairs_token_cut"] == 0 and "encode_pairs_image_text" not in stats4
    short = make_multivector_encoder({**colqwen, "document_length": 3})
    assert short.count_truncations(texts, "document") == {
        "texts": len(texts), "char_cut": 0, "token_cut": sum(len(tok(t, add_special_tokens=False)["input_ids"]) > 3 for t in texts),
        "char_cut_binding": 0}
    assert short.count_truncations(texts, "document")["token_cut"] > 0 and short.count_truncations(texts, "query")["token_cut"] == 0


def test_a_store_whose_token_counts_do_not_match_its_manifest_is_named(prepared, colbert, tmp_path):
    stores = encode_kinds("task1", prepared, colbert, tmp_path / "w")
    run_system("task1", prepared, colbert, tmp_path / "w", k=3)  # seals the stores
    m = json.loads((tmp_path / "w" / "vectors" / "documents" / "manifest.json").read_text())
    m["shards"][0]["tokens"] += 2
    path = tmp_path / "w" / "vectors" / "documents" / "manifest.json"
    path.write_text(json.dumps(m))
    from mmir.workflow.multivector import search

    with pytest.raises(DataError, match="shard-00000.npy.*tokens"):
        search(parse_system(colbert), "task1", stores, task_items("task1", prepared), task_queries("task1", prepared), 3, None)


def test_a_killed_encode_job_resumes_at_the_lost_batch(prepared, colbert, tmp_path):
    """The encode job dies in its third batch; the rerun skips the two written batches (and their model calls)."""

    real = make_multivector_encoder(colbert)
    calls = {"n": 0}

    class Dying:
        cache_spec = real.cache_spec

        def encode_queries(self, texts):
            return real.encode_queries(texts)

        def encode_documents(self, texts):
            calls["n"] += 1
            if calls["n"] == 3:
                raise KeyboardInterrupt("killed")
            return real.encode_documents(texts)

    enc = {"shard_size": 100, "dtype": "float16", "batch_rows": 1}
    sys1 = {**colbert, "batch_size": 1}
    with pytest.raises(KeyboardInterrupt):
        encode_kinds("task1", prepared, sys1, tmp_path / "w", encoder=Dying(), encoding=enc)
    progress = (tmp_path / "w" / "vectors" / "documents" / "shard-00000.progress").read_text().splitlines()
    assert len(progress) == 3  # the header and two batches
    encode_kinds("task1", prepared, sys1, tmp_path / "w", encoder=real, encoding=enc)
    st = json.loads((tmp_path / "w" / "vectors" / "documents" / "shard-00000.stats.json").read_text())
    assert st["batches_skipped"] == 2 and st["batches_computed"] == st["batches_total"] - 2


def test_colbert_cuts_are_counted_per_kind_with_the_query_image_text(prepared, colbert, tmp_path):
    """Issue 31 item 8: a ColBERT system counts its cuts as every text encoder does: documents over document_length,
    queries over query_length and, for Task 2, the queries whose image text (their images' captions, after the query's
    own text) the cut reached, or left nothing of; the retrieve stats carry them per kind. Checked against the
    checkpoint's tokenizer: the model reads "[Q] "/"[D] " + text between [CLS] and [SEP], at most query_length /
    document_length tokens."""
    import pandas as pd
    from transformers import AutoTokenizer

    from mmir.reporting.cuts import image_text_cut_notes
    from mmir.retrieval.items import ImageText, item_texts, query_texts

    qs = task_queries("task2", prepared)
    caption = "the mean median and the sorted data of the sample , a graph of the heart labels"
    caps = tmp_path / "ocr.parquet"
    paths = [p for ps in qs.image_paths for p in ps]
    pd.DataFrame({"path": paths, "text": [caption] * len(paths)}).to_parquet(caps)
    tok = AutoTokenizer.from_pretrained(colbert["model"])

    def n_tokens(text: str, prefix: str) -> int:  # content tokens, the prefix token included
        return len(tok(prefix + text, add_special_tokens=False)["input_ids"])

    docs = item_texts(task_items("task2", prepared), prepared, None)
    for query_length, document_length in ((12, 20), (6, 6)):
        system = {**colbert, "query_length": query_length, "document_length": document_length}
        _, stats = run_system("task2", prepared, system, tmp_path / f"w{query_length}", k=5, captions=caps)
        texts = query_texts(qs, ImageText.load(caps, prepared, False))
        room = query_length - 2  # [CLS] and [SEP]
        own = [n_tokens(q, "[Q] ") for q in qs.texts]
        whole = [n_tokens(t, "[Q] ") for t in texts]
        with_image = [i for i, ps in enumerate(qs.image_paths) if ps]
        assert with_image and len(with_image) < len(qs)  # queries with and without images
        assert {k: v for k, v in stats.items() if k.startswith("encode_mm_queries_") and k != "encode_mm_queries_model_calls"} == {
            "encode_mm_queries_char_cut": 0, "encode_mm_queries_token_cut": sum(n > room for n in whole),
            "encode_mm_queries_image_text": len(with_image),
            "encode_mm_queries_image_text_cut": sum(whole[i] > room for i in with_image),
            "encode_mm_queries_image_text_dropped": sum(own[i] >= room for i in with_image)}
        assert stats["encode_mm_queries_image_text_cut"] == len(with_image)  # the caption never fits
        assert stats["encode_mm_queries_image_text_dropped"] == (len(with_image) if query_length == 6 else 0)
        shard = json.loads((tmp_path / f"w{query_length}" / "vectors" / "documents" / "shard-00000.stats.json").read_text())
        assert (shard["cache_hits"], shard["cache_misses"]) == (0, len(docs))  # a cold encode: every row a miss, once
        cut = sum(n_tokens(d, "[D] ") > document_length - 2 for d in docs)
        assert stats["encode_documents_token_cut"] == cut and (cut > 0) is (document_length == 6)
        # the table caption's sentence (two domains' stats summed)
        n = len(with_image)
        dropped = f" (all of it for {2 * n})" if query_length == 6 else ""
        assert image_text_cut_notes({"sys (untrained)": [stats, stats], "bm25": [{"encode_documents_token_cut": 3}]}) == [
            f"`sys (untrained)`: the encoder's length limit cut the images' text of {2 * n} of the {2 * n} queries with "
            f"image text{dropped}."]
