"""The real openstax statistics domain, reshaped the way the hub data can be: Windows paths in the image
tables, SVG bytes under a .png name for a positive image, a duplicated identical image row. The prepared
qrels must stay those of the original (the SVG image stays judged, it just cannot be retrieved)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import shared

from mmir.data.prepare import prepare_domain, write_prepared

pytestmark = pytest.mark.integration

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle r="4"/></svg>'


def _copy(src, dst):
    for config in ("documents", "examples", "examples_multimodal", "document_images", "examples_images"):
        (dst / config).mkdir(parents=True)
        shutil.copy(src / config / "statistics.parquet", dst / config / "statistics.parquet")
    return dst


def test_hub_shaped_openstax_keeps_every_judgment(tmp_path):
    src = shared("openstax")
    ds = lambda root: {"source": "local", "root": str(root), "integrity": {}}  # noqa: E731
    base_out = tmp_path / "base"
    write_prepared(prepare_domain("o", ds(_copy(src, tmp_path / "orig")), "statistics"), base_out)

    root = _copy(src, tmp_path / "hub")
    exm = pq.read_table(root / "examples_multimodal" / "statistics.parquet").to_pylist()
    judged = {}
    for q in exm:
        for p in q["positive_images"]:
            judged.setdefault(p["image_path"], []).append(q["id"])
    svg_path = max(judged, key=lambda p: len(judged[p]))  # the image most queries judged relevant
    f = root / "document_images" / "statistics.parquet"
    t = pq.read_table(f)
    paths = t.column("path").to_pylist()
    data = [SVG if p == svg_path else b for p, b in zip(paths, t.column("bytes").to_pylist())]
    t = pa.table({"path": pc.replace_substring(t.column("path"), "/", "\\"), "bytes": pa.array(data, pa.binary()),
                  "alt": t.column("alt")})
    t = pa.concat_tables([t, t.slice(0, 1)])  # a duplicated identical row, as the hub has some
    pq.write_table(t, f)
    f = root / "examples_images" / "statistics.parquet"
    q = pq.read_table(f)
    pq.write_table(q.set_column(0, "path", pc.replace_substring(q.column("path"), "/", "\\")), f)

    out = tmp_path / "prep"
    report = write_prepared(prepare_domain("o", ds(root), "statistics"), out)
    base = json.loads((base_out / "prepare.json").read_text())
    assert report["qrels_task3"] == base["qrels_task3"] == 507
    for name in ("qrels.task1.txt", "qrels.task2.txt", "qrels.task3.txt", "qrels.task4.txt", "topics_mm.parquet",
                 "topics.parquet"):
        assert (out / name).read_bytes() == (base_out / name).read_bytes(), name
    assert report["unretrievable"]["task3"] == len(judged[svg_path]) >= 2
    assert report["problems"]["corpus_images_corrupt"] == 1 and report["problems"]["duplicate_images_identical"] == 1
    assert report["corpus_images"] == 253 and report["corpus_images_retrievable"] == 252
    assert "missing_query_images" not in report["problems"] and "mm_missing_positive_images" not in report["problems"]
    # the SVG image is in no Task 4 pair, so the released labels have one pair less per gold passage of its page
    assert report["pairs"] < base["pairs"] and report["unretrievable"]["task4_official"] == 0
