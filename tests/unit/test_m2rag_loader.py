"""M2RAG-Bench dev-set loader on hand-made records with every irregularity of spec §1."""

import io
import json
import tarfile

import pytest

from mmir.benchmarks.m2rag import loader
from mmir.benchmarks.m2rag.loader import (
    DevSetImageResolver,
    dump_record,
    fetch_dev_set,
    load_dev_set,
    parse_record,
)
from mmir.core.errors import DataError

RECORD = {
    "query_id": 17,
    "content": "Why is the sky blue?",
    "level": 1,
    "webpages": [
        {   # a good page with every image irregularity
            "webpage_id": 0, "url": "https://a.example/sky", "title": "Sky", "snippet": "ignored",
            "cleaned_webpage_splits": [
                {"split_id": 0, "text": "Rayleigh scattering <IMAGE_PLACEHOLDER>[0] explains it.", "score": 9,
                 "evaluation": "ok\n9", "image_ids": [0]},
                {"split_id": 1, "text": "Ad <IMAGE_PLACEHOLDER>[1] and gone <IMAGE_PLACEHOLDER>[7].", "score": 2,
                 "evaluation": "meh\n2", "image_ids": [1]},
                {"split_id": 2, "text": "Unscored chunk.", "score": None},
            ],
            "images": [
                {"split_id": 1, "image_id": 1, "image_url": "https://a/1.jpg", "cached_image_url": "http://h:8000/ELI5/dev_set/17/0/1.jpg",
                 "valid": False, "final_score": None, "detailed_image_caption": None},
                {"split_id": 0, "image_id": 0, "image_url": "https://a/0.png", "cached_image_url": "http://h:8000/ELI5/dev_set/17/0/0.png",
                 "valid": True, "final_score": 8, "detailed_image_caption": "A diagram\nof scattering"},
                {"split_id": 5, "image_id": 2, "image_url": "https://a/2.png", "cached_image_url": "http://h:8000/ELI5/dev_set/17/0/2.png",
                 "valid": True, "final_score": 4, "detailed_image_caption": "x"},
            ],
        },
        {"webpage_id": 1, "link": "https://b.example", "title": "Failed", "cleaned_webpage_splits": None, "images": []},
    ],
    "aux_images": [
        {"image_id": "aux-0", "image_url": "u", "cached_image_url": "http://h:8000/ELI5/dev_set/17/aux/0.webp",
         "valid": True, "final_score": 7, "detailed_image_caption": "sky photo"},
        {"image_id": "aux-1", "image_url": "u", "cached_image_url": "http://h:8000/ELI5/dev_set/17/aux/1.png",
         "valid": False, "final_score": None, "detailed_image_caption": None},
    ],
}


def _lines():
    other_level = dict(RECORD, query_id=18, level=2)
    duplicate = dict(RECORD)
    no_content = {"query_id": 19, "content": ""}
    return [json.dumps(RECORD), "", "{not json", json.dumps(other_level), json.dumps(duplicate), json.dumps(no_content)]


def test_record_with_every_irregularity(tmp_path):
    path = tmp_path / "dev_set.jsonl"
    path.write_text("\n".join(_lines()) + "\n", encoding="utf-8")
    ds = load_dev_set(path)
    assert [q.query_id for q in ds.queries] == ["17"]
    q = ds.queries[0]
    good, failed = q.webpages
    assert failed.chunks is None and failed.url == "https://b.example"  # link renamed to url
    assert [im.image_id for im in good.images] == [0, 1, 2]  # sorted by image_id
    # the dangling placeholder [7] is deleted, the known ones stay
    assert good.chunks[1].text == "Ad <IMAGE_PLACEHOLDER>[1] and gone ."
    assert good.chunks[0].text.count("<IMAGE_PLACEHOLDER>[0]") == 1
    assert good.chunks[2].score is None
    assert good.images[0].caption == "A diagram\nof scattering" and good.images[0].final_score == 8.0
    assert good.images[1].valid is False and good.images[1].final_score is None
    assert [a.image_id for a in q.aux_images] == ["aux-0", "aux-1"] and q.aux_images[0].is_aux
    c = ds.report.counts
    assert c["webpages_failed"] == 1
    assert c["placeholders_dangling"] == 1
    assert c["images_invalid"] == 1 and c["images_null_score"] == 1
    assert c["aux_images_invalid"] == 1 and c["aux_images_null_score"] == 1
    assert c["images_split_missing"] == 1
    assert c["chunks_unscored"] == 1
    assert c["records_malformed"] == 2  # bad JSON + empty content
    assert c["records_other_level"] == 1
    assert c["records_duplicate_id"] == 1
    assert c["queries"] == 1
    assert ds.report.examples["placeholders_dangling"][0].startswith("line 1, webpage 0, split 1")


def test_levels_none_keeps_all_and_roundtrip(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(_lines()), encoding="utf-8")
    ds = load_dev_set(path, levels=None)
    assert [q.query_id for q in ds.queries] == ["17", "18"]
    again = parse_record(json.loads(json.dumps(dump_record(ds.queries[0]))))
    assert again.webpages[0].chunks[1].text == ds.queries[0].webpages[0].chunks[1].text
    assert again.aux_images[0].cached_image_url == ds.queries[0].aux_images[0].cached_image_url


def _targz(path, name, text):
    data = text.encode("utf-8")
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def test_reads_archive_and_folder(tmp_path):
    archive = tmp_path / "dl" / "dev_set.jsonl.tar.gz"
    archive.parent.mkdir()
    _targz(archive, "dev_set.jsonl", json.dumps(RECORD) + "\n")
    assert [q.query_id for q in load_dev_set(archive).queries] == ["17"]
    assert [q.query_id for q in load_dev_set(tmp_path / "dl").queries] == ["17"]
    with pytest.raises(DataError, match="no dev_set.jsonl"):
        load_dev_set(tmp_path / "missing")


def test_images_resolve_under_root(tmp_path):
    root = tmp_path / "images"
    (root / "ELI5/dev_set/17/0").mkdir(parents=True)
    (root / "ELI5/dev_set/17/0/0.png").write_bytes(b"png")
    path = tmp_path / "dev_set.jsonl"
    path.write_text(json.dumps(RECORD), encoding="utf-8")
    ds = load_dev_set(path, image_root=root)
    imgs = ds.queries[0].webpages[0].images
    assert imgs[0].path == (root / "ELI5/dev_set/17/0/0.png").resolve()
    assert imgs[0].load_bytes() == b"png"
    assert ds.report.counts["images_unresolved"] == 2 and ds.report.counts["aux_images_unresolved"] == 2
    # the root may also be the dev_set folder itself; unsafe paths never resolve
    assert DevSetImageResolver(root / "ELI5" / "dev_set").resolve("http://h/ELI5/dev_set/17/0/0.png") is not None
    assert DevSetImageResolver(root).resolve("../../etc/passwd") is None
    assert DevSetImageResolver(root, strip_prefix="http://h:8000/").candidates("http://h:8000/ELI5/x.png") == ["ELI5/x.png"]


def test_fetch_unpacks_pinned_snapshot(tmp_path, monkeypatch):
    calls = {}

    def fake_snapshot(repo_id, *, repo_type, revision, allow_patterns, local_dir):
        calls.update(repo_id=repo_id, revision=revision, patterns=allow_patterns)
        (tmp_path / "dl").mkdir(exist_ok=True)
        _targz(tmp_path / "dl" / loader.DEV_SET_ARCHIVE, "dev_set.jsonl", json.dumps(RECORD) + "\n")
        return local_dir

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    out = fetch_dev_set(tmp_path / "dl")
    assert calls == {"repo_id": "ylwt/M2RAG-Bench", "revision": loader.PINNED_REVISION, "patterns": ["dev_set.jsonl.tar.gz"]}
    assert (out / "dev_set.jsonl").is_file()
    assert len(load_dev_set(out).queries) == 1


def test_fetch_offline_names_the_recipe(tmp_path, monkeypatch):
    import huggingface_hub

    def offline(*a, **k):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(DataError, match="hf download ylwt/M2RAG-Bench"):
        fetch_dev_set(tmp_path / "dl")
