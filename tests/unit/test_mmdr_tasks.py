"""mmir.benchmarks.mmdr.tasks: task schema, aliases, ids, splits, GT matching, profiles (spec §1)."""

from __future__ import annotations

import json

import pytest

from mmir.benchmarks.mmdr.tasks import (
    Task,
    canonical_split,
    format_task_for_llm,
    load_tasks,
    normalize_report_type,
    report_profile,
    resolve_task_paths,
)
from mmir.core.errors import DataError


def _write(path, rows, jsonl=False):
    if jsonl:
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


def test_aliases_ids_and_images(tmp_path):
    (tmp_path / "img").mkdir()
    rows = [
        {"qid": "7", "caption": "Cap", "body": "Body", "image_url": "img/a.png", "difficulty": "Hard"},
        {"id": 120, "title": "T", "text": "X", "images": ["https://h.org/i.jpg", "img\\b.png", ""], "set": "Research"},
        {"title": "Only a title"},
        {"qid": "Q7", "body": "dup"},
        {"qid": "Q7", "body": "dup2", "split": "daily"},
    ]
    tasks = load_tasks(_write(tmp_path / "quiz.json", rows))
    assert [t.qid for t in tasks] == ["Q7", "Q120", "Q2", "Q7_1", "Q7_2"]
    t0, t1, t2 = tasks[:3]
    assert (t0.title, t0.text, t0.difficulty, t0.set) == ("Cap", "Body", "hard", "research")
    assert t0.images == (str((tmp_path / "img" / "a.png").resolve()),)
    assert t1.images == ("https://h.org/i.jpg", str((tmp_path / "img" / "b.png").resolve()))
    assert t1.set == "research"  # explicit set beats the id rule
    assert (t2.title, t2.text) == ("Only a title", "Only a title")
    assert tasks[4].set == "daily"


def test_split_from_id_and_row(tmp_path):
    rows = [{"qid": "Q99", "body": "a"}, {"qid": "Q100", "body": "b"}, {"qid": "custom", "body": "c"}]
    tasks = load_tasks(_write(tmp_path / "q.jsonl", rows, jsonl=True))
    assert [t.set for t in tasks] == ["research", "daily", "research"]  # non-canonical id: row 2 < 100


def test_ground_truth_by_index_then_id(tmp_path):
    rows = [{"qid": f"Q{i}", "body": f"task {i}"} for i in range(3)]
    gt = [{"qid": "Q0", "answer": "gt zero"}, {"qid": "Q2", "gt": ""}, {"id": "2", "text": "gt two by id"}]
    tasks = load_tasks(_write(tmp_path / "q.json", rows), gt_path=_write(tmp_path / "gt.jsonl", gt, jsonl=True))
    # row 0 by index; row 1 by index has empty GT and no id match; row 2 by index ("gt two by id") wins
    assert [t.ground_truth for t in tasks] == ["gt zero", "", "gt two by id"]
    gt2 = [{"qid": "Q9", "body": "nine"}, {"qid": "5", "body": "five"}]
    rows2 = [{"qid": "Q5", "body": "x"}] + [{"qid": f"Q{i}", "body": "y"} for i in (6, 7)]
    tasks2 = load_tasks(_write(tmp_path / "q2.json", rows2), gt_path=_write(tmp_path / "gt2.json", gt2))
    assert tasks2[0].ground_truth == "nine"  # index 0 first
    assert tasks2[1].ground_truth == "five"  # index 1


def test_errors_name_file_row_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"qid": "Q0", "body": "ok"}\n{not json}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_tasks(bad)
    assert e.value.row == 1 and "bad.jsonl" in str(e.value)
    with pytest.raises(DataError) as e:
        load_tasks(_write(tmp_path / "b.json", [{"qid": "Q0", "body": "a", "images": 5}]))
    assert (e.value.row, e.value.field) == (0, "images")
    with pytest.raises(DataError) as e:
        load_tasks(_write(tmp_path / "c.json", [{"qid": "Q0", "body": "a"}, "oops"]))
    assert e.value.row == 1
    with pytest.raises(DataError) as e:
        load_tasks(_write(tmp_path / "d.json", [{"qid": "Q0"}]))
    assert e.value.field == "body"
    with pytest.raises(DataError):
        load_tasks(_write(tmp_path / "e.json", {"not": "a list"}))
    with pytest.raises(DataError):
        load_tasks(tmp_path / "missing.json")


def test_profiles_and_splits():
    mk = lambda qid, s, d=None: Task(qid=qid, raw_id=qid, index=0, title="t", text="x", set=s, difficulty=d)  # noqa: E731
    assert report_profile(mk("Q1", "research")) == "research"
    assert report_profile(mk("Q1", "academic")) == "research"
    assert report_profile(mk("Q120", "daily", "easy")) == "daily_easy"
    assert report_profile(mk("Q120", "daily", "hard")) == "daily_hard"
    assert report_profile(mk("Q120", "daily", "complex")) == "daily_medium"
    assert report_profile(mk("Q5", "")) == "research"
    assert report_profile(mk("Q105", "")) == "daily_medium"
    assert [normalize_report_type(x) for x in ("Research-deep", "daily hard", "easy", "whatever")] == [
        "research", "daily_hard", "daily_easy", "daily_medium"]
    assert [canonical_split(q) for q in ("Q0", "Q99", "Q100", "Q139")] == ["Research", "Research", "Daily", "Daily"]
    assert canonical_split("Q140", "research") == "Research" and canonical_split("x", "daily_easy") == "Daily"


def test_format_task_for_llm():
    t = Task(qid="Q1", raw_id="Q1", index=0, title="Title", text="Body text", images=("/abs/a.png", "https://x/y.jpg"))
    assert format_task_for_llm(t) == (
        "Title\n\nBody text\n\n[Images]\n- /abs/a.png\n- https://x/y.jpg\n\n"
        "NOTE: If images are local, use them as evidence targets."
    )


def test_resolve_paths_env(tmp_path):
    p, r = resolve_task_paths(env={"MMDR_RESEARCH_JSON": str(tmp_path / "q.json")})
    assert p == tmp_path / "q.json" and r == tmp_path.resolve()
    p, _ = resolve_task_paths(benchmark_root=tmp_path, env={})
    assert p == tmp_path / "research questions" / "quiz" / "quiz.json"
