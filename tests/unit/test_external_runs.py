"""External runs (``kind: run``): every kind of broken run gives its own error naming the file, the 1-based line and
the field; ties, exclusions and the top-k cut; the config, validation, rule inputs and params (the file's sha256
decides a rerun), lineage and MLflow tags. The real-data check (a bm25s run scored against pytrec_eval, reranked) is
tests/integration/test_external_runs.py."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from conftest import write_domain

from mmir.core.errors import ConfigError, DataError
from mmir.retrieval.external import RunFileError, apply_protocol, read_checked_run

QIDS = ["q1", "q2"]
DOCS = ["d/a_0.txt", "d/a_1.txt", "d/b_0.txt"]
IMAGES = ["d/img/x.png", "d/img/y.png"]
PAIRS = ["d/a_0.txt|||d/img/x.png", "d/b_0.txt|||d/img/y.png"]
GOOD = "q1 Q0 d/a_0.txt 1 3.5 ext\nq1 Q0 d/b_0.txt 2 2.0 ext\n"


def _read(tmp_path, text: str, items=DOCS, ranks="documents", task="task1"):
    f = tmp_path / "run.trec"
    f.write_text(text, encoding="utf-8")
    return read_checked_run(f, QIDS, items, ranks, task)


BROKEN = [  # (name, run text, items, ranks, task, the message after "<file>, ")
    ("empty file", "\n  \n", DOCS, "documents", "task1", None),
    ("missing column", GOOD + "q2 Q0 d/a_0.txt 1 2.0\n", DOCS, "documents", "task1",
     "line 3, field 'tag': 5 columns, expected 6: qid Q0 docid rank score tag ('tag' is missing)"),
    ("extra column", "q1 Q0 d/a 0.txt 1 2.0 ext\n", DOCS, "documents", "task1",
     "line 1, field 'tag': 7 columns, expected 6: qid Q0 docid rank score tag (a space inside an id?)"),
    ("rank not an integer", GOOD + "q2 Q0 d/a_0.txt first 2.0 ext\n", DOCS, "documents", "task1",
     "line 3, field 'rank': 'first' is not an integer rank"),
    ("score not a number", GOOD + "q2 Q0 d/a_0.txt 1 high ext\n", DOCS, "documents", "task1",
     "line 3, field 'score': 'high' is not a number"),
    ("score nan", GOOD + "q2 Q0 d/a_0.txt 1 nan ext\n", DOCS, "documents", "task1",
     "line 3, field 'score': 'nan' is not a finite number"),
    ("unknown query", GOOD + "q9 Q0 d/a_0.txt 1 2.0 ext\n", DOCS, "documents", "task1",
     "line 3, field 'qid': 'q9' is not a topic of task1 (a run of another task, domain or sample?)"),
    ("unknown document", GOOD + "q2 Q0 d/zz_0.txt 1 2.0 ext\n", DOCS, "documents", "task2",
     "line 3, field 'docid': 'd/zz_0.txt' is not an item of task2: expected a document id of the prepared corpus "
     "(corpus.parquet)"),
    ("unknown image", "q1 Q0 d/img/x.png 1 2.0 ext\nq1 Q0 d/a_0.txt 2 1.0 ext\n", IMAGES, "images", "task3",
     "line 2, field 'docid': 'd/a_0.txt' is not an item of task3: expected a decodable image path of the prepared "
     "corpus images (images.parquet, ok = true)"),
    ("document where a pair is ranked", "q1 Q0 d/a_0.txt 1 2.0 ext\n", PAIRS, "pairs", "task4",
     "line 1, field 'docid': 'd/a_0.txt' is not an item of task4: expected a (document, image) pair id "
     "'<doc_id>|||<image_path>' of pairs.parquet (Task 4 ranks pairs, not documents)"),
    ("unknown pair", "q1 Q0 d/a_0.txt|||d/img/y.png 1 2.0 ext\n", PAIRS, "pairs", "task4",
     "line 1, field 'docid': 'd/a_0.txt|||d/img/y.png' is not an item of task4: expected a (document, image) pair id "
     "'<doc_id>|||<image_path>' of pairs.parquet"),
    ("item twice", GOOD + "q1 Q0 d/a_0.txt 3 1.0 ext\n", DOCS, "documents", "task1",
     "line 3, field 'docid': 'd/a_0.txt' is ranked twice for query 'q1' (lines 1 and 3)"),
    ("ranks contradict scores", "q2 Q0 d/a_0.txt 1 1.0 ext\nq2 Q0 d/a_1.txt 2 0.5 ext\nq2 Q0 d/b_0.txt 3 0.75 ext\n",
     DOCS, "documents", "task1", "line 3, field 'rank': query 'q2': rank 3 has score 0.75, higher than the score 0.5 of "
     "rank 2 (line 2): a TREC run ranks higher scores first"),
]


@pytest.mark.parametrize("name, text, items, ranks, task, message", BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_run_names_its_file_line_and_field(tmp_path, name, text, items, ranks, task, message):
    with pytest.raises(RunFileError) as err:
        _read(tmp_path, text, items, ranks, task)
    f = tmp_path / "run.trec"
    if message is None:  # an empty file has no line to name
        assert str(err.value) == f"{f}: the run is empty: no line 'qid Q0 docid rank score tag'"
        assert err.value.line is None
    else:
        assert str(err.value) == f"{f}, {message}"
        line = int(message.split(",")[0].split()[1])
        assert err.value.line == line and err.value.row == line - 1 and err.value.field == message.split("'")[1]
    assert isinstance(err.value, DataError) and err.value.file == str(f)


def test_the_first_problem_by_line_is_named_with_the_count_of_the_others(tmp_path):
    # a reversed ranking (line 2 contradicts line 1) before a bad score on line 3: line 2 is named, 2 more counted
    text = "q1 Q0 d/a_0.txt 1 1.0 ext\nq1 Q0 d/a_1.txt 2 2.0 ext\nq2 Q0 d/b_0.txt 1 x ext\nq2 Q0 d/c 1 1 ext\n"
    with pytest.raises(RunFileError) as err:
        _read(tmp_path, text)
    assert err.value.line == 2 and err.value.field == "rank" and err.value.more == 2
    assert str(err.value).endswith("(2 more lines with a problem)")


def test_a_line_that_is_not_utf8_is_named_and_a_bom_is_read(tmp_path):
    f = tmp_path / "run.trec"
    f.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"q2 Q0 d/a_0.txt 1 1 caf\xe9\n")
    with pytest.raises(RunFileError) as err:
        read_checked_run(f, QIDS, DOCS)
    assert str(err.value) == f"{f}, line 3: not UTF-8 text (invalid continuation byte at byte 24 of the line)"
    f.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert read_checked_run(f, QIDS, DOCS) == {"q1": [("d/a_0.txt", 3.5), ("d/b_0.txt", 2.0)]}


def test_ties_are_allowed_and_keep_rank_order(tmp_path):
    # equal scores at ranks 1 and 2 keep rank order (file order reversed); lines sharing rank 3 go by score
    text = ("q1 Q0 d/a_1.txt 2 5.0 t\nq1 Q0 d/a_0.txt 1 5.0 t\nq1 Q0 d/c_0.txt 3 1.0 t\nq1 Q0 d/b_0.txt 3 4.0 t\n"
            "q2 Q0 d/a_0.txt 0 1 t\n")
    run = _read(tmp_path, text, DOCS + ["d/c_0.txt"])
    assert run == {"q1": [("d/a_0.txt", 5.0), ("d/a_1.txt", 5.0), ("d/b_0.txt", 4.0), ("d/c_0.txt", 1.0)],
                   "q2": [("d/a_0.txt", 1.0)]}


def test_tie_counts_count_as_the_retrieve_step_does_for_mmirs_own_runs():
    import numpy as np

    from mmir.retrieval.external import tie_counts
    from mmir.workflow.retrieval_steps import tie_stats

    rng = np.random.default_rng(0)
    scores = -np.sort(-rng.integers(0, 6, size=(20, 14)).astype(float), axis=1)
    scores[3, 5:] = -np.inf  # a ranking of 5 items
    run = {f"q{i}": [(f"d{j}", float(v)) for j, v in enumerate(row) if np.isfinite(v)] for i, row in enumerate(scores)}
    assert tie_counts(run) == tie_stats(scores) and tie_counts(run)["tied_top10_items"] > 0


def test_exclusions_come_off_before_the_top_k_cut_and_are_counted():
    run = {"q1": [("a", 4.0), ("x", 3.0), ("b", 2.0), ("c", 1.0)], "q2": [("x", 1.0)], "q3": [("a", 1.0)]}
    kept, counts = apply_protocol(run, {"q1": {"x"}, "q2": {"x"}}, top_k=2)
    assert kept == {"q1": [("a", 4.0), ("b", 2.0)], "q3": [("a", 1.0)]}
    assert counts == {"excluded_removed": 2, "queries_with_excluded_removed": 2, "queries_emptied": 1,
                      "queries_cut_to_top_k": 1, "items_cut_by_top_k": 1}


def test_the_retrieve_step_copies_the_checked_run_with_exclusions_and_the_cut_counted(tmp_path, caplog):
    import logging

    from mmir.data.prepare import prepare_domain, write_prepared
    from mmir.retrieval.runs import read_run
    from mmir.workflow.retrieval_steps import RetrieveJob, retrieve

    prep = tmp_path / "prep"
    write_prepared(prepare_domain("x", {"source": "local", "root": str(write_domain(tmp_path / "raw"))}, "d"), prep)
    ext = tmp_path / "ext.trec"  # q1's negative d/cccc0003_0.txt first; q2 absent
    ext.write_text("q1 Q0 d/cccc0003_0.txt 1 9 t\nq1 Q0 d/aaaa0001_0.txt 2 8 t\nq1 Q0 d/bbbb0002_0.txt 3 7 t\n")
    job = RetrieveJob("task1", prep, "ext", {"kind": "run", "path": str(ext)}, {"protocol": "official", "top_k": 1},
                      tmp_path / "out.trec", tmp_path / "out.json", external=ext)
    with caplog.at_level(logging.INFO, logger="mmir.workflow.external_runs"):
        stats = retrieve(job)
    assert read_run(tmp_path / "out.trec") == {"q1": [("d/aaaa0001_0.txt", 8.0)]}
    assert json.loads((tmp_path / "out.json").read_text()) == stats
    assert {k: stats[k] for k in ("external_lines", "topics", "topics_missing", "excluded_removed", "queries_cut_to_top_k",
                                  "items_cut_by_top_k", "run_lines")} == {
        "external_lines": 3, "topics": 2, "topics_missing": 1, "excluded_removed": 1, "queries_cut_to_top_k": 1,
        "items_cut_by_top_k": 1, "run_lines": 1}
    assert stats["external_sha256"] == hashlib.sha256(ext.read_bytes()).hexdigest()
    assert "1 topics missing, scored 0" in caplog.text and "cut 1 rankings to the top 1 (1 items)" in caplog.text
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}/gone.trec: no such run file"):
        retrieve(RetrieveJob(**{**job.__dict__, "external": tmp_path / "gone.trec"}))


# ----------------------------------------------------------------------------------------------- config and rules
def _project(tmp_path, monkeypatch, runs: dict[str, str] | None = None, **system) -> dict:
    """A project folder (the working directory) with a tiny local dataset and an external run system ``ext``."""
    from mmir.workflow.validate import validate_config

    tmp_path.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(tmp_path)
    root = write_domain(tmp_path / "raw")
    for task, text in (runs if runs is not None else {"task1": GOOD}).items():
        Path(f"runs/{task}").mkdir(parents=True, exist_ok=True)
        Path(f"runs/{task}/x-d.trec").write_text(text)
    return validate_config({"datasets": {"x": {"source": "local", "root": str(root), "domains": ["d"]}}, "tasks": ["task1"],
                            "systems": {"bm25": {"kind": "bm25"},
                                        "ext": {"kind": "run", "path": "runs/{task}/{dataset}-{domain}.trec", **system}}})


def test_a_run_path_holds_only_task_dataset_and_domain():
    from mmir.config.models import parse_system

    with pytest.raises(ConfigError, match=r"systems.path.*a run path template holds only \{task\}, \{dataset\} and "
                       r"\{domain\} \(unknown: system\)"):
        parse_system({"kind": "run", "path": "runs/{system}/{task}.trec"})
    with pytest.raises(ConfigError, match="systems.path"):
        parse_system({"kind": "run", "path": "runs/{task.trec"})


def test_validation_names_the_missing_run_file_and_refuses_ablations(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)  # the file exists: valid
    with pytest.raises(ConfigError) as err:
        _project(tmp_path / "p2", monkeypatch, runs={})
    assert "config key 'systems.ext.path': no run file 'runs/task1/x-d.trec' for task1 on x/d (1 of the 1 run files" in str(err.value)
    from mmir.workflow.validate import validate_config

    cfg = _project(tmp_path / "p3", monkeypatch)
    cfg["ablations"] = {"caption": {"systems": ["ext"], "captioners": ["ocr"]}}
    with pytest.raises(ConfigError, match=r"ablations.caption.systems.0.*external run"):
        validate_config(cfg)


def test_the_retrieve_job_reads_the_file_by_its_relative_path_and_its_sha256_decides_reruns(tmp_path, monkeypatch):
    from mmir.workflow.rules import RULES

    cfg = _project(tmp_path, monkeypatch)
    w = {"task": "task1", "dataset": "x", "domain": "d", "system": "ext"}
    job = RULES["retrieve"].job(cfg, w)
    assert job.input["external"] == "runs/task1/x-d.trec"  # relative: a moved project plans nothing new
    assert not any("captions" in k or k.startswith("shards_") for k in job.input)
    sha = hashlib.sha256(GOOD.encode()).hexdigest()
    assert job.params["external_sha256"] == sha and job.params["system"]["path"] == "runs/{task}/{dataset}-{domain}.trec"
    assert job.params["evaluation"] == {"protocol": "official", "top_k": 1000}
    # new bytes under the same mtime: the params differ, so Snakemake's params trigger reruns the job
    st = os.stat("runs/task1/x-d.trec")
    Path("runs/task1/x-d.trec").write_text(GOOD.replace("2.0", "2.5"))
    os.utime("runs/task1/x-d.trec", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert RULES["retrieve"].job(cfg, w).params["external_sha256"] == hashlib.sha256(GOOD.replace("2.0", "2.5").encode()).hexdigest()
    bm25 = RULES["retrieve"].job(cfg, {**w, "system": "bm25"}).params
    assert "external_sha256" not in bm25  # other systems' params unchanged


def test_lineage_and_mlflow_tags_name_the_file_and_its_sha256(tmp_path):
    from mmir.config.models import parse_system
    from mmir.reporting.lineage import external_runs_lineage, systems_lineage
    from mmir.tracking import external_run_tags

    rows = systems_lineage({"ext": parse_system({"kind": "run", "path": "runs/{task}/{dataset}/{domain}.trec"})})
    assert rows == [{"system": "ext", "kind": "run", "backend": "", "model": "runs/{task}/{dataset}/{domain}.trec",
                     "revision": "external run files (sha256 each: external runs)", "preset": ""}]
    run_dir = tmp_path / "results/runs/task1/x/ext"
    run_dir.mkdir(parents=True)
    stats = {"task": "task1", "system": "ext", "external_file": "runs/task1/x/d.trec", "external_sha256": "ab" * 32,
             "external_lines": 2, "topics_missing": 1}
    (run_dir / "d.stats.json").write_text(json.dumps(stats))
    assert external_runs_lineage([run_dir / "d.stats.json"]) == [
        {"system": "ext", "task": "task1", "file": "runs/task1/x/d.trec", "sha256": "ab" * 32, "lines": 2, "topics_missing": 1}]
    from mmir.reporting.html import render_report
    from mmir.reporting.lineage import lineage

    lin = lineage({"systems": {"ext": {"kind": "run", "path": "runs/{task}/{dataset}/{domain}.trec"}}},
                  external_runs=[run_dir / "d.stats.json"])
    page = render_report([], lin)
    assert ('<td>ext</td><td>task1</td><td><code>runs/task1/x/d.trec</code></td><td class="hash">' + "ab" * 32) in page
    from mmir.workflow.steps import model_revision

    assert model_revision(parse_system({"kind": "run", "path": "r/{task}.trec"})) == "external run r/{task}.trec"  # MLflow tag
    tags = {"external_run_file": "runs/task1/x/d.trec", "external_run_sha256": "ab" * 32}
    assert external_run_tags(str(run_dir / "d.trec")) == tags
    rr = tmp_path / "results/runs/task1/x/ext+rr:ce"  # a reranked row: its first stage's file
    rr.mkdir()
    (rr / "d.stats.json").write_text(json.dumps({"first_stage": str(run_dir / "d.trec")}))
    assert external_run_tags(str(rr / "d.trec")) == tags
    assert external_run_tags(None) == {}
