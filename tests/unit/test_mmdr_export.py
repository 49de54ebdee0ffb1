"""mmir.benchmarks.mmdr.export on small synthetic runs: CSV bytes (BOM, CRLF, rounding, blanks), duplicates,
incomplete rows, split filter, manifest keys and provenance (spec §8)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from scripted import ScriptedBackend

from mmir.benchmarks.mmdr.aggregate import RawScoring, TaskScores, results_record, too_short_record
from mmir.benchmarks.mmdr.export import (
    LEADERBOARD_COLUMNS,
    TASK_COLUMNS,
    ExportIncomplete,
    FileFormat,
    csv_bytes,
    export_leaderboard,
    provenance,
)
from mmir.benchmarks.mmdr.judge import Judge
from mmir.core.errors import DataError

GEN_RAW = {"R": 0.5, "I": 0.25, "S": 0.125}
EVI_RAW = {"E_con": 0.1, "E_cov": 0.2, "E_fid": 1 / 3}


def _rec(qid, gen=50.0, evi=20.0, mm=30.0, vef=100.0, **kw):
    return results_record(qid=qid, report_type=kw.pop("rt", "research"), scores=TaskScores(gen=gen, evi=evi, mm=mm, vef=vef),
                          raw=RawScoring(general=GEN_RAW, evidence=EVI_RAW), extra={"report_model": kw.pop("model", "agent-x")}, **kw)


def _run(tmp_path, records):
    res = tmp_path / "run" / "results" / "demo.jsonl"
    res.parent.mkdir(parents=True)
    res.write_text("".join(json.dumps(r) + "\n" for r in records) + "\n", encoding="utf-8")
    return res


def _read(path, bom=True):
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") == bom
    assert b"\r\n" in raw and raw.count(b"\n") == raw.count(b"\r\n")
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"), newline="")))


def test_export_partial_run(tmp_path):
    recs = [_rec("Q0"), _rec("Q1", gen=10.0), too_short_record("Q120", 10, 1000), _rec("Q1", gen=70.0, model="agent-y")]
    results = _run(tmp_path, recs)
    summ = tmp_path / "run" / "reports" / "mm" / "Q0" / "mm_router_routed" / "final_summary.json"
    summ.parent.mkdir(parents=True)
    summ.write_text(json.dumps({"summary": {"avg_metric_by_dim": {"semantic": 0.4, "vqa_score": 0.4}}}), encoding="utf-8")
    (tmp_path / "run" / "reports" / "Q0.md").write_text("# report\n", encoding="utf-8")
    out = export_leaderboard(results)
    assert out.leaderboard.name == "demo.partial_leaderboard.csv" and out.leaderboard.parent.name == "summary"
    rows = _read(out.tasks)
    assert list(rows[0].keys()) == TASK_COLUMNS
    assert [r["Task ID"] for r in rows] == ["Q0", "Q1", "Q120"]
    q0, q1, q120 = rows
    assert q1["FLAE"] == "70.0"  # the last Q1 record wins, at Q1's first position
    assert q0["Overall"] == str(round(0.2 * 50 + 0.5 * (0.6 * 20 + 0.4 * 100) + 0.3 * 30, 6))
    assert q0["Fid."] == "33.333333" and q0["Sem."] == "40.0" and q0["Acc."] == "" and q0["Complete"] == "True"
    assert q0["Report Path"] == "reports/Q0.md" and len(q0["Report SHA256"]) == 64
    assert q0["MOSAIC Summary Path"] == "reports/mm/Q0/mm_router_routed/final_summary.json"
    assert (q120["Split"], q120["Complete"], q120["Overall"], q120["Stored Overall"]) == ("Daily", "False", "", "0.0")
    man = out.manifest
    assert list(man)[:5] == ["schema", "source_results", "source_sha256", "model", "split"]
    assert man["model"] == "agent-x"  # most frequent report_model among retained records (tie -> first seen)
    assert man["source_results"] == "results/demo.jsonl"
    assert (man["records_selected"], man["records_complete"], man["expected_records"], man["submission_ready"]) == (3, 2, 140, False)
    assert man["duplicate_qids_last_record_retained"] == ["Q1"]
    assert man["missing_component_tasks"] == [{"task_id": "Q120", "missing": ["Overall", "FLAE", "Read.", "Insh.", "Stru.",
                                                                             "TRACE", "Vef.", "Con.", "Cov.", "Fid.", "MOSAIC"]}]
    assert man["metric_counts"]["Sem."] == 1 and man["metric_counts"]["Overall"] == 2
    assert "provenance" not in man
    board = _read(out.leaderboard)[0]
    assert list(board) == LEADERBOARD_COLUMNS and board["Sem."] == "40.0" and board["Acc."] == ""
    text = out.manifest_path.read_text(encoding="utf-8")
    assert not text.endswith("\n") and json.loads(text) == man


def test_split_require_complete_and_provenance(tmp_path):
    recs = [_rec(f"Q{i}") for i in range(100, 140)] + [_rec("Q5")]
    results = _run(tmp_path, recs)
    judge = Judge(ScriptedBackend(default="nonsense", model="scripted-judge"), provider="test")
    judge.complete("controller", "mmdr_controller_v1", {"task": "t", "report_type": "research"}, temperature=0.2)
    judge.audit.records[0].use_fallback("unparseable")
    prov = provenance(judge, commit={"commit": "abc", "dirty": False})
    out = export_leaderboard(results, tmp_path / "o", split="daily", require_complete=True, file_format=FileFormat(bom=False),
                             provenance_info=prov)
    assert out.submission_ready and out.leaderboard.name == "demo.daily.leaderboard.csv"
    assert len(_read(out.tasks, bom=False)) == 40
    assert out.manifest["provenance"]["judge"]["model"] == "scripted-judge"
    assert out.manifest["provenance"]["prompt_sha256"].keys() == {"mmdr_controller_v1"}
    assert out.manifest["provenance"]["judge_fallbacks"] == {"controller": 1}
    assert list(out.manifest)[-2:] == ["outputs", "provenance"]
    with pytest.raises(ExportIncomplete):
        export_leaderboard(results, tmp_path / "o2", split="research", require_complete=True)
    assert (tmp_path / "o2" / "demo.research.partial_leaderboard.csv").exists()  # written before raising
    assert (tmp_path / "o2" / "demo.research.leaderboard_manifest.json").exists()
    with pytest.raises(ValueError):
        export_leaderboard(results, split="weekly")


def test_bad_results_raise_data_error(tmp_path):
    results = _run(tmp_path, [_rec("Q0")])
    results.write_text(results.read_text() + '{"scores": {}}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        export_leaderboard(results)
    assert e.value.row == 2 and e.value.field == "qid"
    results.write_text("{oops\n", encoding="utf-8")
    with pytest.raises(DataError):
        export_leaderboard(results)
    with pytest.raises(DataError):
        export_leaderboard(tmp_path / "none.jsonl")


def test_csv_bytes_format():
    rows = [{"Model": "a,b", "Overall": 1 / 3, "Complete": False, "VQA": None, "Read.": -1e-9}]
    text = csv_bytes(["Model", "Overall", "Complete", "VQA", "Read."], rows, 6, bom=False).decode()
    assert text == 'Model,Overall,Complete,VQA,Read.\r\n"a,b",0.333333,False,,-0.0\r\n'
