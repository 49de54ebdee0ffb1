"""Query-image protocols and pair fusion (MM-BRIGHT §4.1; the released code's first-usable-image rule)."""

import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mmir.config.models import MMSystem
from mmir.retrieval.encoding import BLANK, kind_rows, stack_vertically
from mmir.retrieval.fusion import PairMatrix, build_query_vectors, pair_rows, query_vectors


def unit(x):
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


T = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
IDS = ["a.png", "b.png", BLANK]
IMG = unit([[0, 1, 1], [1, 1, 0], [1, 1, 1]])


def test_first_mode_takes_the_first_image_that_decodes_else_blank():
    # query 0: its first image is missing (not in the store: undecodable), the second decodes -> b.png
    # query 1: a.png; query 2: nothing usable -> the blank image
    q = query_vectors(T, [["missing.png", "b.png"], ["a.png", "b.png"], ["missing.png"]], IDS, IMG, "first", "mean")
    np.testing.assert_allclose(q[0], unit((T[0] + IMG[1]) / 2), atol=1e-6)
    np.testing.assert_allclose(q[1], unit((T[1] + IMG[0]) / 2), atol=1e-6)
    np.testing.assert_allclose(q[2], unit((T[2] + IMG[2]) / 2), atol=1e-6)


def test_mean_stack_and_text_only_modes():
    q = query_vectors(T, [["a.png", "b.png"], [], ["b.png"]], IDS, IMG, "mean", "mean")
    np.testing.assert_allclose(q[0], unit((T[0] + unit(IMG[0] + IMG[1])) / 2), atol=1e-6)
    np.testing.assert_allclose(q[1], unit((T[1] + IMG[2]) / 2), atol=1e-6)  # no image: blank
    stacks = unit([[1, 1, 0], [0, 1, 1], [1, 0, 1]])  # one stacked-image vector per query
    s = query_vectors(T, [["a.png"]] * 3, [f"q{i}" for i in range(3)], stacks, "stack", "mean")
    np.testing.assert_allclose(s, unit((T + stacks) / 2), atol=1e-6)
    np.testing.assert_allclose(query_vectors(T, [[]] * 3, [], None, "none", "mean"), T, atol=1e-6)


def test_stack_vertically_scales_to_the_widest_and_keeps_order():
    red, blue = Image.new("RGB", (20, 10), "red"), Image.new("RGB", (10, 10), "blue")
    out = stack_vertically([red, blue])
    assert out.size == (20, 30)  # blue scaled to width 20 (height 20), below red
    assert out.getpixel((5, 5)) == (255, 0, 0) and out.getpixel((5, 25)) == (0, 0, 255)


def _png(color, size=(8, 8)):
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def test_query_kinds_list_usable_images_once_and_stack_per_query(tmp_path):
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["x", "y"], "image_paths": [["i1.png", "bad.png", "i2.png"], ["i1.png"]],
                  "positive_images": [[], []], "negative_images": [[], []]}).to_parquet(tmp_path / "topics_mm.parquet")
    pd.DataFrame({"path": ["i1.png", "bad.png", "i2.png"], "bytes": [_png("red"), b"", _png("blue", (8, 4))],
                  "ok": [True, False, True]}).to_parquet(tmp_path / "query_images.parquet")
    system = MMSystem(kind="mm", encoder="clip")
    rows = kind_rows("query_images", tmp_path, system)
    assert rows.ids == ["i1.png", "i2.png", BLANK] and rows.images and rows.query
    stacks = kind_rows("query_stacks", tmp_path, system)
    assert stacks.ids == ["q1", "q2"]
    assert Image.open(io.BytesIO(stacks.payloads[0])).size == (8, 12)  # i1 over i2; the undecodable one skipped


def test_pair_matrix_rows_are_normalised_means():
    text, images = unit([[1, 0], [0, 1]]), unit([[1, 1]])
    docs, imgs = pair_rows(["d1", "d1", "d2"], ["", "p", ""], ["d1", "d2"], ["p"])
    m = PairMatrix(text, images, docs, imgs)
    np.testing.assert_allclose(m[0:3], [[1, 0], unit((text[0] + images[0]) / 2), [0, 1]], atol=1e-6)
    with pytest.raises(KeyError, match="not in the encoded store"):
        pair_rows(["d3"], [""], ["d1"], [])


def test_build_query_vectors_paper_protocol():
    s = 1 / np.sqrt(2)
    text = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 2]], dtype=np.float32)
    images = [np.array([[0, 1, 0], [1, 0, 0]], np.float32), None, np.zeros((0, 3), np.float32)]
    blank = np.array([0, 0, 1], np.float32)
    q = build_query_vectors(text, images, blank_vec=blank)  # first image, mean fusion
    np.testing.assert_allclose(q, [[s, s, 0], [0, s, s], [0, 0, 1]], atol=1e-6)
    # mean of all images (extension)
    qm = build_query_vectors(text, images, image_mode="mean", blank_vec=blank)
    expect0 = np.array([1, 0, 0]) + np.array([s, s, 0])
    np.testing.assert_allclose(qm[0], expect0 / np.linalg.norm(expect0), atol=1e-6)
    eye = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    np.testing.assert_allclose(build_query_vectors(text, images, fusion="text"), eye)
    np.testing.assert_allclose(build_query_vectors(text, images, image_mode="none"), eye)
    np.testing.assert_allclose(build_query_vectors(text, images, fusion="image", blank_vec=blank),
                               [[0, 1, 0], [0, 0, 1], [0, 0, 1]])
    with pytest.raises(ValueError, match="blank"):
        build_query_vectors(text, images)
    with pytest.raises(ValueError):
        build_query_vectors(text, images, image_mode="none", fusion="image")
    with pytest.raises(ValueError):
        build_query_vectors(text, images[:2], blank_vec=blank)


def test_pair_matrix_fuses_unnormalised_vectors_and_checks_shapes():
    s = 1 / np.sqrt(2)
    t = np.array([[3, 4], [1, 0]], np.float32)  # not normalised: PairMatrix normalises both sides first
    one_image = PairMatrix(t, np.array([[0, 2]], np.float32), [0, 1], [-1, 0])
    np.testing.assert_allclose(one_image[0:2], [[0.6, 0.8], [s, s]], atol=1e-6)
    no_images = PairMatrix(t, np.zeros((0, 2), np.float32), [0, 1], [-1, -1])
    np.testing.assert_allclose(no_images[0:2], [[0.6, 0.8], [1, 0]], atol=1e-6)
    both = PairMatrix(t, np.array([[0.6, 0.8], [0, 1]], np.float32), [0, 1], [0, 1])
    np.testing.assert_allclose(both[0:2], [[0.6, 0.8], [s, s]], atol=1e-6)
    assert one_image.shape == (2, 2) and len(one_image) == 2
    with pytest.raises(ValueError, match="rows"):
        PairMatrix(t, np.zeros((0, 2), np.float32), [0, 1], [-1])
    with pytest.raises(ValueError, match="d="):
        PairMatrix(t, np.ones((1, 3), np.float32), [0], [0])
    with pytest.raises(TypeError):
        one_image[0]
