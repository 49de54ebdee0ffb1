"""The named reply parsers of mmir.llm.parsers, each checked against the rule as the spec states it.

Every test first finds the rule's sentence in its source (``shared/specs/*.md``, or this project's README for the
rules that are ours), so a spec edit that changes a rule fails here, then checks the parser on the spec's cases.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import PROJECT

from mmir.llm.parsers import (
    FIRST_INTEGER,
    FIRST_JSON,
    JSON_ARRAY,
    JSON_OBJECT,
    LAST_INTEGER,
    PARSERS,
    SCORE_0_100,
    SEARCH_QUERY,
    TEXT,
    YES_NO,
    get_parser,
)

SPECS = PROJECT.parent / "shared" / "specs"


def _says(path: Path, *phrases: str) -> None:
    """Skip when the document is absent; fail when it no longer states the rule."""
    if not path.exists():
        pytest.skip(f"{path} not found")
    text = re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))
    for p in phrases:
        assert p in text, f"{path.name} no longer says: {p!r}"


def test_last_integer_is_m2rag_section_2_1_and_6():
    _says(SPECS / "m2rag.md", "**Parse rule:** take the last integer in the reply and clamp it to [0,10].",
          "**Score = last integer anywhere in the reply**, found with regex `\\d+`", 'a reply such as "8/10" parses as 10')
    assert LAST_INTEGER("blah\n8").value == 8  # spec §8 cases
    assert LAST_INTEGER("12").value == 10  # clamped
    assert LAST_INTEGER("The answer is good.\n8/10").value == 10  # the "8/10" quirk
    assert LAST_INTEGER("score: -3").value == 3  # \d+ has no sign
    no = LAST_INTEGER("no digits")
    assert not no.ok and no.value is None and no.error  # the spec's 0 is the benchmark's policy, not the parser's
    assert not LAST_INTEGER("").ok and not LAST_INTEGER(None).ok


def test_first_integer_is_m2rag_section_2_2():
    _says(SPECS / "m2rag.md", "**Parse rule:** take the first integer and clamp it to [0,10]; no integer gives null.",
          "The image-scoring VLM instead takes the *first* integer.")
    assert FIRST_INTEGER("8, because 3 things").value == 8
    assert FIRST_INTEGER("15").value == 10
    assert not FIRST_INTEGER("none").ok


def test_json_object_is_mmdr_section_3():
    _says(SPECS / "mmdr-bench.md", "Parsing is lenient: the whole reply, else the first `{...}` span.",
          "An empty or failed parse falls back to the fixed defaults")
    assert (JSON_OBJECT('{"a": 1}').value, JSON_OBJECT('{"a": 1}').method) == ({"a": 1}, "whole")
    p = JSON_OBJECT('Sure! ```json\n{"a": 1}\n``` done')
    assert (p.value, p.method) == ({"a": 1}, "span")
    for bad in ("", "   ", "no json here", "{}", "[1, 2]", '{"a": 1', "```{not json}```"):
        r = JSON_OBJECT(bad)
        assert not r.ok and r.value is None and r.method is None and r.error, bad  # "{}" = empty parse -> fallback


def test_json_array_is_mmdr_chart_engines():
    _says(SPECS / "mmdr-bench.md", "extracts up to 15 claims", "the score is the confidence-weighted share of supported claims")
    assert JSON_ARRAY('[{"a": 1}, 3]').value == [{"a": 1}]  # non-object entries dropped
    assert JSON_ARRAY('text ```json\n[{"claim": "x"}]\n```').value == [{"claim": "x"}]
    assert JSON_ARRAY("[]").ok and JSON_ARRAY("[]").value == []  # no claims is a parse, scored 0 by the policy
    assert not JSON_ARRAY('{"a": 1}').ok and not JSON_ARRAY("").ok


def test_yes_no_is_the_mmdr_vqa_text_fallback():
    _says(SPECS / "mmdr-bench.md", "asked a yes/no question", "fall back to text matching (yes 1 / no 0)")
    assert [YES_NO(x).value for x in ("YES", "No.", "Yes, it does")] == [1.0, 0.0, 1.0]
    assert not YES_NO("yes and no").ok and not YES_NO("maybe").ok


def test_first_json_is_our_native_ragas_rule():
    _says(SPECS / "m2rag.md", "Context precision")
    assert FIRST_JSON('blah {"verdict": 1} tail').value == {"verdict": 1}
    assert FIRST_JSON('```json\n["a", "b"]\n```').value == ["a", "b"]
    assert not FIRST_JSON("no json here").ok


def test_score_0_100_is_the_readme_rag_judge_rule():
    _says(PROJECT / "docs" / "rag.md", "Parsing is strict (`Score: 85`, `**Score**: 85.`, `85/100`, JSON `{\"score\": 85}`, a bare "
          "number; out of range or words only is not a score)")
    cases = {"Score: 85": 85.0, "85/100": 85.0, "**Score**: 85.": 85.0, '{"score": 72, "why": "ok"}': 72.0,
             "The answer is mostly right.\nScore: 90": 90.0, "score=40": 40.0, "  100 ": 100.0, "0": 0.0}
    for reply, value in cases.items():
        assert SCORE_0_100(reply).value == value, reply
    for bad in ("Score: 150", "Score: -5", "120/100", "The answer is good.", "", None, '{"score": "high"}'):
        assert not SCORE_0_100(bad).ok, bad


def test_search_query_is_the_readme_reformulation_marker():
    _says(PROJECT / "docs" / "generative.md", "then writes a search query after `Search query:`")
    assert SEARCH_QUERY("I think...\nSearch query: **bayes theorem proof**").value == "bayes theorem proof"
    assert SEARCH_QUERY("search query: a\nmore\nSEARCH QUERY: \"last one\"").value == "last one"  # the LAST marker
    assert not SEARCH_QUERY("no marker").ok and not SEARCH_QUERY("Search query:   ").ok


def test_registry():
    assert set(PARSERS) == {"last_integer", "first_integer", "first_json", "json_object", "json_array", "yes_no",
                            "score_0_100", "search_query", "text"}
    assert get_parser("text") is TEXT and TEXT("x").value == "x" and not TEXT("  ").ok
    assert all(p.source for p in PARSERS.values())
    with pytest.raises(KeyError, match="known"):
        get_parser("nope")
