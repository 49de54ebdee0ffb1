"""Late-interaction encoders through mmir's loading path on tiny random checkpoints of the real architectures,
checked against a direct forward pass and against PyLate's / colpali-engine's own MaxSim scoring."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from mmir.encoders.cache import content_key, encoder_key
from mmir.encoders.multivector import make_multivector_encoder
from mmir.encoders.store import ShardFormat
from mmir.encoders.token_cache import TokenCache
from mmir.encoders.token_store import finalize_token_store, open_token_store, write_token_shard
from mmir.retrieval.maxsim import topk_maxsim

pytest.importorskip("colpali_engine")
pytest.importorskip("pylate")

from tiny_multivector import (  # noqa: E402
    COLBERT_DIM,
    COLPALI_IMAGE_TOKENS,
    DOCUMENT_LENGTH,
    QUERY_LENGTH,
    save_colpali,
    save_colpali_adapter,
    save_colqwen2_5,
    save_pylate_colbert,
)

QUERIES = ["the cat sat on the mat", "heart diagram labels", "mean of the sorted data ?"]
DOCS = ["the dog sat .", "a graph of the heart labels , the mean", "slope of the tangent line", "light energy",
        "the median is the middle value of the sorted data " * 4, "cat"]


@pytest.fixture(scope="module")
def colbert(tmp_path_factory):
    return save_pylate_colbert(tmp_path_factory.mktemp("colbert"))


def system(path, **kw):
    return {"kind": "multivector", "backend": "colbert", "model": str(path), "device": "cpu", "batch_size": 2, **kw}


def store_of(tmp_path, mats, key="k"):
    write_token_shard(tmp_path, 0, [str(i) for i in range(len(mats))], lambda a, b: mats[a:b], ShardFormat(mats[0].shape[1], key),
                      batch_size=4)
    finalize_token_store(tmp_path, key, 1)
    return open_token_store(tmp_path, key)


@torch.no_grad()
def test_colbert_checkpoint_loads_with_its_prefixes_lengths_skiplist_and_projection(colbert):
    path, weight = colbert
    from transformers import AutoModel, AutoTokenizer

    enc = make_multivector_encoder(system(path))
    q, d = enc.encode_queries(QUERIES), enc.encode_documents(DOCS)
    assert all(x.shape == (QUERY_LENGTH, COLBERT_DIM) for x in q)  # query expansion pads every query to query_length
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    for text, got in zip(DOCS, d):
        ids = tok(["[D] " + text], return_tensors="pt", truncation=True, max_length=DOCUMENT_LENGTH)
        h = torch.nn.functional.normalize(model(**ids).last_hidden_state[0] @ weight.T, dim=-1).numpy()
        keep = [t not in (".", ",") for t in tok.convert_ids_to_tokens(ids["input_ids"][0])]  # the saved skiplist
        np.testing.assert_allclose(got, h[keep], atol=1e-5)
    assert enc.cache_spec()["prompts"] == {"document": "[D] ", "query": "[Q] "}


def test_colbert_maxsim_over_the_store_equals_pylate_colbert_scores(colbert, tmp_path):
    from pylate.scores import colbert_scores

    enc = make_multivector_encoder(system(colbert[0]))
    q, d = enc.encode_queries(QUERIES), enc.encode_documents(DOCS)
    store = store_of(tmp_path, d)
    s, i = topk_maxsim(q, store.tokens, store.lengths, len(DOCS), chunk_tokens=13, query_tokens=QUERY_LENGTH)
    # PyLate's scoring on the same float16 token vectors, one document at a time (no padding)
    ref = np.array([[float(colbert_scores(torch.from_numpy(qq)[None], torch.from_numpy(store.item(j).astype(np.float32))[None],
                                          backend="torch")[0, 0]) for j in range(len(DOCS))] for qq in q])
    np.testing.assert_allclose(s, np.take_along_axis(ref, i, 1), rtol=1e-5)
    np.testing.assert_array_equal(i, np.argsort(-ref, axis=1, kind="stable"))


def test_colbert_settings_change_the_encoder_key(colbert):
    base = encoder_key(make_multivector_encoder(system(colbert[0])).cache_spec())
    for kw in ({"query_prefix": "[unused0]"}, {"document_length": 8}, {"query_length": 6}, {"query_expansion": False}):
        enc = make_multivector_encoder(system(colbert[0], **kw))
        assert encoder_key(enc.cache_spec()) != base, kw
    short = make_multivector_encoder(system(colbert[0], document_length=8, query_length=6))
    assert max(len(x) for x in short.encode_documents(DOCS)) <= 8 and short.encode_queries(QUERIES)[0].shape[0] == 6


def test_token_cache_hits_on_a_rerun_and_misses_for_another_encoder(colbert, tmp_path):
    enc = make_multivector_encoder(system(colbert[0]))
    calls = []

    def fn(texts):
        calls.append(len(texts))
        return enc.encode_documents(texts)

    keys = [content_key(encoder_key(enc.cache_spec()), "document", t) for t in DOCS]
    with TokenCache(tmp_path, enc.cache_spec()) as c:
        first, st = c.encode(DOCS, keys, fn, batch_size=4)
        assert st == {"hits": 0, "misses": 6, "model_calls": 2}
        again, st = c.encode(DOCS, keys, fn, batch_size=4)
        assert st["hits"] == 6 and st["model_calls"] == 0
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    with TokenCache(tmp_path, {**enc.cache_spec(), "document_length": 8}) as c:
        assert c.encode(DOCS[:1], keys[:1], fn)[1]["misses"] == 1


def test_token_cache_batches_texts_by_length_and_returns_input_order(colbert, tmp_path):
    """A batch holds texts of about one length (longest first), so it pads little; the matrices come back in input
    order and equal each text encoded alone (to float rounding: the padding differs)."""
    enc = make_multivector_encoder(system(colbert[0]))
    batches = []

    def fn(texts):
        batches.append(list(texts))
        return enc.encode_documents(texts)

    keys = [content_key(encoder_key(enc.cache_spec()), "document", t) for t in DOCS]
    with TokenCache(tmp_path, enc.cache_spec()) as c:
        mats, _ = c.encode(DOCS, keys, fn, batch_size=2)
    assert [t for b in batches for t in b] == sorted(DOCS, key=len, reverse=True)
    for text, m in zip(DOCS, mats):
        np.testing.assert_allclose(m, enc.encode_documents([text])[0], rtol=0, atol=1e-5)


def png(color, size):
    from PIL import Image

    b = io.BytesIO()
    Image.new("RGB", size, color).save(b, format="PNG")
    return b.getvalue()


@torch.no_grad()
def test_colqwen2_5_loads_and_equals_colpali_engine_scoring(tmp_path):
    from colpali_engine.models import ColQwen2_5, ColQwen2_5_Processor
    from PIL import Image

    path = save_colqwen2_5(tmp_path / "colqwen")
    enc = make_multivector_encoder({"kind": "multivector", "backend": "colpali", "architecture": "colqwen2.5", "model": str(path),
                                    "device": "cpu", "batch_size": 2})
    images = [png("red", (56, 84)), png((30, 200, 90), (84, 56)), png("blue", (56, 56))]
    q, im = enc.encode_queries(QUERIES), enc.encode_images(images)
    model, proc = ColQwen2_5.from_pretrained(path).eval(), ColQwen2_5_Processor.from_pretrained(path)
    for data, got in zip(images, im):  # each image alone: no padding in the reference
        batch = proc.process_images([Image.open(io.BytesIO(data)).convert("RGB")])
        np.testing.assert_allclose(got, model(**batch)[0].numpy(), atol=1e-5)
    batch = proc.process_queries(QUERIES[:1])
    np.testing.assert_allclose(q[0], model(**batch)[0].numpy(), atol=1e-5)
    store = store_of(tmp_path / "store", im)
    s, i = topk_maxsim(q, store.tokens, store.lengths, 3, chunk_tokens=40)
    ref = proc.score_multi_vector([torch.from_numpy(x) for x in q], [torch.from_numpy(store.item(j).astype(np.float32))
                                                                       for j in range(3)]).numpy()
    np.testing.assert_allclose(s, np.take_along_axis(ref, i, 1), rtol=1e-5)
    np.testing.assert_array_equal(i, np.argsort(-ref, axis=1, kind="stable"))
    pair = enc.encode_pairs([(DOCS[0], images[0])])[0]  # Task 4: the document's tokens, then the image's
    np.testing.assert_allclose(pair, np.concatenate([enc.encode_documents(DOCS[:1])[0], im[0]]), atol=1e-6)


@pytest.fixture(scope="module")
def colpali(tmp_path_factory):
    return save_colpali(tmp_path_factory.mktemp("colpali"))


def openstax_images(n: int = 2) -> list[bytes]:
    """The first ``n`` document images of the real openstax statistics domain (a JPEG and an RGBA PNG)."""
    import pandas as pd
    from conftest import shared

    t = pd.read_parquet(shared("openstax/document_images/statistics.parquet"), columns=["path", "bytes"]).head(n)
    return [bytes(b) for b in t["bytes"]]


def colpali_system(path) -> dict:
    return {"kind": "multivector", "backend": "colpali", "architecture": "colpali", "model": str(path), "device": "cpu",
            "batch_size": 2}


@torch.no_grad()
@pytest.mark.parametrize("kind", ["checkpoint", "adapter", "adapter-transformers4-keys"])
def test_colpali_loads_from_a_checkpoint_or_an_adapter_and_equals_colpali_engine(kind, colpali, tmp_path):
    """A full ColPali directory, and a peft LoRA adapter on it (vidore/colpali-v1.3's form: the base from the adapter's
    config, then the adapter; also with the transformers 4 key names that adapter was saved with), through mmir's
    encoder on 2 real openstax images and 2 queries, against colpali-engine's classes run directly (each input alone,
    so no padding): ColPali.from_pretrained for the checkpoint, the in-memory peft model that saved the adapter."""
    from colpali_engine.models import ColPali, ColPaliProcessor
    from PIL import Image

    pytest.importorskip("peft")
    base_model = ColPali.from_pretrained(colpali).eval()  # its lm_head stays on the meta device: unused by forward on the CPU
    if kind == "checkpoint":
        path, ref_model = colpali, base_model
    else:
        path = tmp_path / "adapter"
        ref_model = save_colpali_adapter(path, colpali, transformers4_keys=kind.endswith("keys"))
    images = openstax_images()
    enc = make_multivector_encoder(colpali_system(path))
    assert enc.base == (None if kind == "checkpoint" else {"model": str(colpali), "revision": None})
    q, im = enc.encode_queries(QUERIES[:2]), enc.encode_images(images)
    proc = ColPaliProcessor.from_pretrained(path)
    refs = [proc.process_queries([t]) for t in QUERIES[:2]] + [proc.process_images([Image.open(io.BytesIO(b))]) for b in images]
    for got, batch in zip(q + im, refs):
        want = ref_model(**batch)[0].numpy()
        assert got.dtype == np.float32 and got.shape == (int(batch["attention_mask"].sum()), 128) and np.isfinite(got).all()
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
        np.testing.assert_allclose(got, want, atol=1e-5)
        if kind != "checkpoint":  # the adapter's weights were applied: the base model gives other vectors
            assert np.abs(got - base_model(**batch)[0].numpy()).max() > 1e-2
    # an image: its 16 patch tokens, <bos>, "Describe the image." and the newline; a query: <bos>, its words, 10 <pad>s
    assert all(x.shape[0] == COLPALI_IMAGE_TOKENS + 1 + 4 + 1 for x in im)
    assert [x.shape[0] for x in q] == [1 + len(t.split()) + 10 for t in QUERIES[:2]]
    spec = enc.cache_spec()
    assert spec["model"] == str(path) and spec.get("base") == enc.base


def test_colpali_adapter_errors_name_the_adapter(colpali, tmp_path, monkeypatch):
    """An adapter whose weights fit no module of the model, and an adapter without peft installed: errors, not a model
    that silently runs without its adapter."""
    import transformers.utils
    from safetensors.torch import load_file, save_file

    from mmir.core.errors import MmirError

    pytest.importorskip("peft")
    path = tmp_path / "adapter"
    save_colpali_adapter(path, colpali)
    f = path / "adapter_model.safetensors"
    save_file({k.replace("language_model", "text_tower"): v for k, v in load_file(f).items()}, f, metadata={"format": "pt"})
    with pytest.raises(MmirError, match="does not fit"):
        make_multivector_encoder(colpali_system(path))
    monkeypatch.setattr(transformers.utils, "is_peft_available", lambda: False)
    with pytest.raises(MmirError, match=r"is a PEFT adapter on .*install peft"):
        make_multivector_encoder(colpali_system(path))


@pytest.mark.parametrize("preset", ["reason-moderncolbert", "gte-moderncolbert", "colqwen2.5", "colpali"])
def test_late_interaction_presets_load_through_the_same_path(preset, colbert, tmp_path):
    """Each preset with its hub id swapped for a tiny checkpoint of the same architecture (no hub here)."""
    from test_presets import system_of

    path = colbert[0] if "colbert" in preset else save_colqwen2_5(tmp_path / "colqwen") if preset == "colqwen2.5" else \
        save_colpali(tmp_path / "colpali")
    s = system_of(preset, model=str(path), revision=None, device="cpu")
    enc = make_multivector_encoder(s)
    q, d = enc.encode_queries(QUERIES[:2]), enc.encode_documents(DOCS[:2])
    assert len(q) == 2 and len(d) == 2 and all(x.ndim == 2 and np.allclose(np.linalg.norm(x, axis=1), 1, atol=1e-4) for x in q + d)
    assert enc.cache_spec()["model"] == str(path)
