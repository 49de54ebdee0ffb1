"""M2RAG metrics (spec §6, §8): recall, context windows, pooling, Overall, counted judge failures."""

import io
import json
import math
import re

import pytest
from PIL import Image
from scripted import ScriptedBackend

from mmir.benchmarks.m2rag.aggregate import aggregate
from mmir.benchmarks.m2rag.generate import single_stage
from mmir.benchmarks.m2rag.metrics import (
    ImageEvaluation,
    Judges,
    JudgeScore,
    QueryEvaluation,
    RagasScore,
    RegexTokenizer,
    average_precision,
    context_precision,
    evaluate_answer,
    faithfulness,
    fluency,
    image_contexts,
    image_recall,
    relevance,
)
from mmir.benchmarks.m2rag.records import (
    PLACEHOLDER,
    Chunk,
    ImageItem,
    M2RAGQuery,
    Webpage,
)
from mmir.benchmarks.m2rag.selection import select_input
from mmir.llm.backends import GenerationFailure
from mmir.llm.client import LLMClient


def caller(reply):
    return LLMClient(ScriptedBackend(reply if callable(reply) else (lambda t: reply)))


# ----------------------------------------------------------------------------------------------- recall
def test_image_recall_cases():
    assert image_recall(set(), {"x"}) == 1.0  # no important image
    assert image_recall({"a", "b"}, {"b", "c"}) == 0.5
    assert image_recall({"a"}, []) == 0.0
    assert image_recall(["a", "a", "b"], ["a", "b", "b"]) == 1.0  # set semantics


# ------------------------------------------------------------------------------------------ context windows
def words(a, b):
    return " ".join(f"w{i}" for i in range(a, b))


def test_context_windows_last_and_first_256_tokens():
    text = words(0, 300) + PLACEHOLDER + words(300, 700)
    (above, below), = image_contexts(text, 1).windows
    tok = RegexTokenizer()
    assert len(tok.encode(above)) == 256 and len(tok.encode(below)) == 256
    assert above == " " + words(44, 300)  # the last 256 tokens (each word keeps its leading space)
    assert below == words(300, 556)  # the first 256 tokens
    short = image_contexts("abc " + PLACEHOLDER + " def", 1).windows
    assert short == [("abc ", " def")]
    assert image_contexts(text, 1, max_tokens=2).windows == [(" w298 w299", "w300 w301")]


def test_context_windows_span_segments_and_fix_counts():
    t = f"A{PLACEHOLDER}B{PLACEHOLDER}C"
    assert image_contexts(t, 2).windows == [("A", "BC"), ("AB", "C")]
    w = image_contexts(f"A{PLACEHOLDER}B{PLACEHOLDER}C{PLACEHOLDER}D", 1)  # surplus merged with a space
    assert w.windows == [("A", "B C D")] and w.surplus_placeholders == 2
    w = image_contexts(f"A{PLACEHOLDER}B", 3)
    assert w.windows == [("A", "B"), ("AB", ""), ("AB", "")] and w.missing_placeholders == 2


def test_regex_tokenizer_round_trip():
    tok = RegexTokenizer()
    s = "Hello,  world!\n\n- item 1.5 ünïcode  "
    assert tok.decode(tok.encode(s)) == s


# ------------------------------------------------------------------------------------------------ judges
def test_judge_scores_and_counted_failures():
    assert fluency(caller("Well written.\n8"), "doc") == JudgeScore(8, 0.8, "Well written.\n8")
    s = relevance(caller("Fully on topic, 10/10"), "q", "doc")
    assert (s.raw, s.normalised) == (10, 1.0)
    bad = fluency(caller("I refuse to score this."), "doc")
    assert bad.raw is None and bad.normalised is None and bad.error == "unparsable" and not bad.ok
    assert fluency(caller("no number"), "doc", released_parse=True).normalised == 0.0
    failed = fluency(caller(GenerationFailure("timeout", "too slow")), "doc")
    assert failed.error.startswith("generation_failed") and failed.reply is None


def test_context_precision_average_precision():
    assert average_precision([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([0, 0]) == 0.0
    verdicts = iter([1, 0, 1])
    score = context_precision(caller(lambda t: json.dumps({"reason": "r", "verdict": next(verdicts)})), "q", "a",
                              ["c1", "c2", "c3"])
    assert score.value == pytest.approx(0.8333333) and score.details["verdicts"] == [1, 0, 1]
    bad = context_precision(caller("useful, I think"), "q", "a", ["c1"])
    assert bad.value is None and bad.error.startswith("unparsable")
    assert context_precision(caller("{}"), "q", "a", []).error == "no_contexts"


def test_faithfulness_native_and_no_statement_is_a_failure_not_one():
    def reply(text):
        if "Break the answer" in text:
            return '{"statements": ["Cats purr.", "Cats bark.", "Dogs bark."]}'
        n = len(re.findall(r"^\d+\. ", text, re.M))
        assert n == 3
        return json.dumps({"verdicts": [{"statement": "s", "reason": "r", "verdict": v} for v in (1, 0, 1)]})

    s = faithfulness(caller(reply), "q", "Cats purr. Cats bark. Dogs bark.", ["Cats purr.", "Dogs bark."])
    assert s.value == pytest.approx(2 / 3) and s.details["verdicts"] == [1, 0, 1]
    none = faithfulness(caller('{"statements": []}'), "q", "", ["ctx"])
    assert none.value is None and none.error == "no_statements"  # the released code would report 1.0

    def short(text):
        return '{"statements": ["a", "b"]}' if "Break the answer" in text else '{"verdicts": [{"verdict": 1}]}'

    assert faithfulness(caller(short), "q", "a b", ["c"]).error == "verdict_count_mismatch"


# ------------------------------------------------------------------------------------------ aggregation
def qe(qid, text=0.5, images=(), recall=1.0, fail=None):
    def js(v):
        return JudgeScore(None, None, None, "unparsable") if v is None else JudgeScore(int(v * 10), v, "r")

    imgs = [ImageEvaluation(k, f"u{k}", js(v), js(v), js(v)) for k, v in enumerate(images)]
    fl = js(None) if fail == "fluency" else js(text)
    return QueryEvaluation(qid, fl, js(text), RagasScore(text), RagasScore(text), imgs, recall)


def test_pooling_weights_images_not_queries():
    run = aggregate([qe("a", images=(0.9, 0.9, 0.9)), qe("b", images=(0.1,)), qe("c", images=())])
    m = run.metrics["image_coherence"]
    assert m.value == pytest.approx((0.9 * 3 + 0.1) / 4) and m.n == 4 and m.unit == "images"
    assert m.value != pytest.approx((0.9 + 0.1) / 2)  # not a mean of per-query means


def test_overall_is_mean_of_eight_and_failures_are_counted():
    evals = [qe("a", text=0.8, images=(0.6, None), recall=0.5), qe("b", text=0.6, images=(0.6,), recall=1.0, fail="fluency"),
             None]
    run = aggregate(evals, failed_generations=1)
    v = {k: s.value for k, s in run.metrics.items()}
    assert v["fluency"] == pytest.approx(0.8) and run.metrics["fluency"].failures == 1
    assert v["relevance"] == pytest.approx(0.7) and v["image_recall"] == pytest.approx(0.75)
    assert v["image_helpfulness"] == pytest.approx(0.6) and run.metrics["image_helpfulness"].failures == 1
    assert run.overall == pytest.approx(sum(v.values()) / 8)
    assert run.text_avg == pytest.approx((0.8 + 0.7 + 0.7 + 0.7) / 4) and run.mm_precision_avg == pytest.approx(0.6)
    assert run.n_queries == 2 and run.n_excluded == 2
    assert run.percent()["overall"] == f"{run.overall * 100:.1f}"
    # no image anywhere: no NaN, the image metrics and Overall are reported missing
    none = aggregate([qe("a", images=())])
    assert none.overall is None and set(none.missing) == {"image_coherence", "image_helpfulness", "image_reference"}
    assert none.percent()["overall"] == "n/a" and not any(isinstance(s.value, float) and math.isnan(s.value)
                                                          for s in none.metrics.values())


# ---------------------------------------------------------------------------------------- one answer
def png(color):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, format="PNG")
    return buf.getvalue()


def test_evaluate_answer_end_to_end():
    imgs = [ImageItem(0, "c/0.png", split_id=0, final_score=9, caption="cat photo", data=png((1, 2, 3))),
            ImageItem(1, "c/1.png", split_id=0, final_score=8, caption="dog photo", data=png((3, 2, 1))),
            ImageItem(2, "c/2.png", split_id=0, final_score=5, caption="bird", data=png((5, 5, 5)))]
    page = Webpage(0, "Pets", "u", [Chunk(0, "Pets. <IMAGE_PLACEHOLDER>[0]<IMAGE_PLACEHOLDER>[1]<IMAGE_PLACEHOLDER>[2]", 9)], imgs)
    sel = select_input(M2RAGQuery("q1", "Which pet?", [page]))
    ans = single_stage(sel, caller("```markdown\nAbove text.\n![cat](images/0.png)\nBelow text.\n```"))

    seen = []

    def judge(text):
        seen.append(text)
        if "Break the answer" in text:
            return '{"statements": ["Cats are pets."]}'
        if "can be inferred directly" in text:
            return '{"verdicts": [{"verdict": 1}]}'
        if "was useful for arriving" in text:
            return '{"verdict": 1}'
        if "coherent the image" in text:
            return "fits\n9"
        if "helps a reader" in text:
            return "helps\n7"
        if "refers to or explains" in text:
            return "no number"
        return "fine\n6"

    stub = ScriptedBackend(judge)
    ev = evaluate_answer(ans, sel, Judges(text=LLMClient(stub), image_vision=True))
    assert ev.fluency.normalised == 0.6 and ev.relevance.normalised == 0.6
    assert ev.context_precision.value == pytest.approx(1.0) and ev.faithfulness.value == 1.0
    assert len(ev.images) == 1
    assert ev.images[0].coherence.normalised == 0.9 and ev.images[0].helpfulness.normalised == 0.7
    assert ev.images[0].reference.error == "unparsable"
    assert ev.image_recall == 0.5 and ev.important_images == 2  # c/0 and c/1 are important, only c/0 shown
    coherence_msgs = next(m.messages for m in stub.calls if "coherent the image" in m)
    parts = coherence_msgs[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image", "text"]
    assert "Above text.\n" in parts[0]["text"] and "Below text." in parts[2]["text"]
    # 2 page contexts would be 1 page + 1 output caption: 2 context-precision calls
    assert sum("was useful for arriving" in t for t in seen) == 2
    run = aggregate([ev])
    assert run.metrics["image_reference"].value is None and run.metrics["image_reference"].failures == 1
    assert run.overall is None and run.missing == ["image_reference"]
