"""Files mmir writes itself and reads back (run files, LLM call audits, M2RAG knowledge bases) break lines at ``\\n`` only:
``json.dumps(ensure_ascii=False)`` writes U+0085, U+2028 and U+2029 as they are, and an LLM reply or an id may hold
any character ``str.splitlines`` would also break at."""

from __future__ import annotations

import pytest

from mmir.llm.audit import CallAudit
from mmir.llm.records import CallRecord
from mmir.retrieval.runs import read_run, write_run

BREAKERS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("ch", BREAKERS)
def test_run_ids_with_any_line_breaking_character_read_back(tmp_path, ch):
    run = {"q1": [(f"doc{ch}a", 2.0), ("d2", 1.0)], f"q{ch}2": [("d3", 0.5)]}
    path = tmp_path / "run.trec"
    write_run(path, run, tag="t")
    assert read_run(path) == run


def test_run_with_crlf_line_ends(tmp_path):
    path = tmp_path / "run.trec"
    path.write_bytes(b"q1 Q0 d1 1 2.0 t\r\nq1 Q0 d2 2 1.0 t\r\n")
    assert read_run(path) == {"q1": [("d1", 2.0), ("d2", 1.0)]}


def test_call_audit_replies_with_line_breaking_characters_read_back(tmp_path):
    text = "a reply" + "".join(BREAKERS) + "end"
    audit = CallAudit([CallRecord(label="judge", prompt_id="p", prompt_sha256="0" * 64, model="m", text=text)])
    path = tmp_path / "audit.jsonl"
    audit.write_jsonl(path)
    assert "\u2028" in path.read_text(encoding="utf-8")  # written as it is, not escaped
    assert [r.text for r in CallAudit.read_jsonl(path).records] == [text]
