"""Table captions name only the samples of the datasets in that table: a text-only TREC dataset (Task 1 only) is
described under Task 1, not under Tasks 2-4, the ablation grids or the stages it takes no part in."""

from __future__ import annotations

from conftest import write_domain

from mmir.workflow.rules import RULES
from mmir.workflow.validate import validate_config


def _config(tmp_path) -> dict:
    root = write_domain(tmp_path / "raw")
    for kind in ("examples_multimodal", "examples_images"):  # the local dataset has Task 2-4 data and query images
        (root / kind).mkdir()
        (root / kind / "d.parquet").write_bytes(b"")
    trec = tmp_path / "trec"
    trec.mkdir()
    for f in ("docs.trec", "topics.trec", "qrels"):
        (trec / f).write_text("")
    sample = {"queries": 6, "corpus": "judged", "distractors": 40, "seed": 0}
    return validate_config({
        "datasets": {"x": {"source": "local", "root": str(root), "domains": ["d"], "sample": sample},
                     "v": {"source": "trec", "root": str(trec), "corpus": "docs.trec", "topics": "topics.trec",
                           "qrels": "qrels", "domains": ["v"], "sample": {**sample, "queries": 20}}},
        "systems": {"bm25": {"kind": "bm25"}},
        "ablations": {"caption": {"systems": ["bm25"], "captioners": ["ocr"]}}})



def test_captions_describe_only_the_datasets_in_the_table(tmp_path):
    cfg = _config(tmp_path)
    notes = {t: RULES["report"].job(cfg, {"task": t}).params["notes"] for t in ("task1", "task2", "task3", "task4")}
    sampled = {t: [n.split("`")[1] for n in ns if n.startswith("`")] for t, ns in notes.items()}
    assert sampled == {"task1": ["x", "v"], "task2": ["x"], "task3": ["x"], "task4": ["x"]}
    assert "20 queries" in next(n for n in notes["task1"] if n.startswith("`v`"))  # Vaswani's own sample line
    abl = RULES["ablation_report"].job(cfg, {"grid": "caption"}).params["samples"]
    assert [n.split("`")[1] for n in abl] == ["x"]
