"""The multi-vector store: round trip of token matrices (float16, offsets, lengths), resume of a killed shard,
and the errors of a store whose token counts do not match its manifest."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mmir.encoders.sharded import _npy_header
from mmir.encoders.store import EncoderKeyMismatchError, ShardFormat, ShardMismatchError
from mmir.encoders.token_store import (
    HEADER_BYTES,
    TokenCountMismatchError,
    TokenShardWriter,
    finalize_token_store,
    open_token_store,
    write_token_shard,
)

FMT = ShardFormat(dim=6, encoder_key="enc#documents")
HALF = ShardFormat(dim=6, encoder_key="enc#documents", dtype="float16")  # the full-size setting


def items(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(t), 6)).astype(np.float32) for t in rng.integers(1, 12, size=n)]


def test_round_trip_offsets_lengths_float16(tmp_path):
    mats = items(23)
    ids = [f"d{i}" for i in range(23)]
    for s, (a, b) in enumerate([(0, 10), (10, 10), (10, 23)]):  # shard 1 is empty
        st = write_token_shard(tmp_path, s, ids[a:b], lambda x, y, a=a: mats[a + x : a + y], HALF, batch_size=4)
        assert st["tokens"] == sum(len(m) for m in mats[a:b])
    manifest = finalize_token_store(tmp_path, FMT.encoder_key, 3)
    assert manifest["total_items"] == 23 and manifest["total_tokens"] == sum(len(m) for m in mats)
    store = open_token_store(tmp_path, FMT.encoder_key)
    assert store.ids == ids and store.tokens.dtype == np.float16 and store.tokens.shape == (manifest["total_tokens"], 6)
    np.testing.assert_array_equal(store.lengths, [len(m) for m in mats])
    np.testing.assert_array_equal(store.offsets, np.cumsum([0] + [len(m) for m in mats])[:-1])
    for i, m in enumerate(mats):
        np.testing.assert_array_equal(store.item(i), m.astype(np.float16))
    # a plain .npy: numpy reads the shard as written
    np.testing.assert_array_equal(np.load(tmp_path / "shard-00000.npy"), np.concatenate(mats[:10]).astype(np.float16))


def test_killed_shard_resumes_at_the_lost_batch(tmp_path):
    mats, ids = items(30, seed=1), [str(i) for i in range(30)]
    calls = []

    def compute(a, b):
        calls.append((a, b))
        return mats[a:b]

    w = TokenShardWriter(tmp_path, 0, items=30, dim=6, encoder_key=FMT.encoder_key, batch_size=7)
    for b in range(3):
        w.write_batch(b, compute(*w.batch_range(b)))
    w.close()
    # the kill: batch 3's bytes half written, its progress line torn
    with open(tmp_path / "shard-00000.npy", "ab") as f:
        f.write(np.ones((5, 6), np.float16).tobytes()[:37])
    with open(tmp_path / "shard-00000.progress", "a") as f:
        f.write('{"batch": 3, "len')
    assert _npy_header(tmp_path / "shard-00000.npy")[0] == (0, 6)  # not sealed: the header still says 0 rows
    calls.clear()
    st = write_token_shard(tmp_path, 0, ids, compute, FMT, batch_size=7)
    assert st["batches_skipped"] == 3 and st["batches_computed"] == 2 and calls == [(21, 28), (28, 30)]
    finalize_token_store(tmp_path, FMT.encoder_key, 1)
    store = open_token_store(tmp_path, FMT.encoder_key)
    np.testing.assert_array_equal(np.asarray(store.tokens), np.concatenate(mats))  # float32: as computed
    assert (tmp_path / "shard-00000.npy").stat().st_size == HEADER_BYTES + sum(len(m) for m in mats) * 6 * 4
    # a rerun of a sealed shard computes nothing
    calls.clear()
    assert write_token_shard(tmp_path, 0, ids, compute, FMT, batch_size=7)["batches_computed"] == 0 and not calls


def test_resume_refuses_other_parameters_and_bad_batches(tmp_path):
    w = TokenShardWriter(tmp_path, 0, items=4, dim=6, encoder_key="a", batch_size=2)
    with pytest.raises(ShardMismatchError, match="next batch is 0"):
        w.write_batch(1, items(2))
    with pytest.raises(ShardMismatchError, match=r"item 1 of batch 0.*\(0, 6\)"):
        w.write_batch(0, [np.ones((2, 6)), np.ones((0, 6))])
    with pytest.raises(ShardMismatchError, match="NaN"):
        w.write_batch(0, [np.ones((2, 6)), np.full((1, 6), np.nan)])
    w.close()
    with pytest.raises(ShardMismatchError, match="partial shard"):
        TokenShardWriter(tmp_path, 0, items=4, dim=6, encoder_key="b", batch_size=2)


def test_token_counts_that_do_not_match_the_manifest_are_named(tmp_path):
    mats = items(8)
    write_token_shard(tmp_path, 0, [str(i) for i in range(8)], lambda a, b: mats[a:b], FMT)
    finalize_token_store(tmp_path, FMT.encoder_key, 1)
    with pytest.raises(EncoderKeyMismatchError):
        open_token_store(tmp_path, "other")
    m = json.loads((tmp_path / "manifest.json").read_text())
    m["shards"][0]["tokens"] += 1
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TokenCountMismatchError, match=r"shard-00000\.npy.*8 items of \d+ tokens"):
        open_token_store(tmp_path, FMT.encoder_key, verify="size")
    m["shards"][0]["tokens"] -= 1
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    lens = np.load(tmp_path / "shard-00000.lengths.npy")
    lens[0] += 1
    np.save(tmp_path / "shard-00000.lengths.npy", lens)
    with pytest.raises(TokenCountMismatchError, match="summing to"):
        open_token_store(tmp_path, FMT.encoder_key, verify="size")
