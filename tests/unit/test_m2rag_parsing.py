"""M2RAG reply parsing (spec §2.1, §2.2, §4, §6, §8 "Parse"); the judges' rules are named parsers of mmir.llm."""

from mmir.benchmarks.m2rag.generate import parse_placement
from mmir.benchmarks.m2rag.metrics import parse_judge_score
from mmir.benchmarks.m2rag.parsing import strip_images, strip_links, unwrap_markdown
from mmir.llm.parsers import FIRST_INTEGER, FIRST_JSON, LAST_INTEGER


def test_spec_parse_cases():
    # spec §8: "blah\n8" -> 8; "no digits" -> 0 (released rule); "12" -> 10 after the clamp
    assert parse_judge_score("blah\n8") == 8
    assert parse_judge_score("12") == 10
    assert parse_judge_score("no digits", released_parse=True) == 0
    # our default: no integer is not a score (the metric records a counted failure)
    assert parse_judge_score("no digits") is None


def test_last_int_quirks_match_released_code():
    assert LAST_INTEGER("The answer is good.\n8/10").value == 10  # "8/10" reads as 10 (spec §6 quirk)
    assert LAST_INTEGER("score: -3").value == 3  # no sign
    assert LAST_INTEGER("7\n\n").value == 7
    assert LAST_INTEGER("").value is None


def test_first_int_for_image_scores():
    assert FIRST_INTEGER("8, because 3 things").value == 8
    assert FIRST_INTEGER("15").value == 10
    assert FIRST_INTEGER("none").value is None


def test_unwrap_markdown():
    assert unwrap_markdown("plain answer") == "plain answer"
    assert unwrap_markdown("Here:\n```markdown\n# Title\nbody\n```") == "# Title\nbody"
    # missing closing fence: everything after the opening one
    assert unwrap_markdown("```markdown\n# T\nbody text") == "# T\nbody text"
    # a closing fence in the first half of the text is ignored
    text = "```markdown\nA\n```\n" + "x" * 100
    assert unwrap_markdown(text) == "A\n```\n" + "x" * 100


def test_strip_images_and_links():
    assert strip_images("see ![a cat](images/1.png) here") == "see a cat here"
    assert strip_links("a [link](http://x) b") == "a link b"


def test_extract_json():
    assert FIRST_JSON('blah {"verdict": 1} tail').value == {"verdict": 1}
    assert FIRST_JSON('```json\n["a", "b"]\n```').value == ["a", "b"]
    assert not FIRST_JSON("no json here").ok


def test_parse_placement():
    assert parse_placement("A chart of sales\n3", 5) == (3, "A chart of sales")
    assert parse_placement("cap\n-1", 5) == (-1, "cap")
    assert parse_placement("cap\n9", 5) == (-1, "cap")  # out of range
    assert parse_placement("cap only", 5) == (-1, "")
    assert parse_placement("line one\nline two\nbefore line 2\n", 5) == (2, "line one line two")
    # the released code reads digits without sign: "-1" places the image before line 1
    assert parse_placement("cap\n-1", 5, released_quirks=True) == (1, "cap")
