"""The eight M2RAG metrics (spec §6) on one answer; pooling and Overall are in :mod:`mmir.benchmarks.m2rag.aggregate`.

- 0-10 judges (spec §6.1-6.5): :data:`JUDGED` declarations, parser :data:`~mmir.llm.parsers.LAST_INTEGER`
  (last integer clamped to [0, 10], / 10). A reply with no integer or a failed call is a counted failure,
  never a score (the released code scores it 0; ``released_parse=True``).
- Context precision and faithfulness (spec §6.3-6.4): native RAGAS 0.2.9 definitions with JSON prompts.
  Deviation: an answer with no statement is the failure ``"no_statements"`` (released: NaN -> 1.0).
- Image metrics (spec §6.5): context windows of 256 tokens above/below each image (:func:`image_contexts`);
  default tokenizer :class:`RegexTokenizer` (the released tiktoken ``o200k_base`` needs the network). A
  text-only judge gets the image description instead of pixels.
- Image recall (spec §6.6): important images (``final_score >= 8``) in the output; 1.0 when there are none.

README: "M2RAG: multimodal answers and their eight metrics".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from mmir.benchmarks.m2rag.calls import M2RAG_PROMPTS, prompt, render_around_slot
from mmir.benchmarks.m2rag.media import thumbnail_bytes
from mmir.benchmarks.m2rag.records import PLACEHOLDER, ImageItem, image_description
from mmir.core.errors import DataError
from mmir.llm.client import LLMClient
from mmir.llm.judged import JudgedMetric, judge, single_user_message
from mmir.llm.messages import ImagePart, Segment, user_messages
from mmir.llm.parsers import FIRST_JSON, LAST_INTEGER
from mmir.llm.records import CallRecord

log = logging.getLogger(__name__)

CONTEXT_TOKENS = 256
RECALL_THRESHOLD = 8
EPSILON = 1e-10
TEXT_METRICS = ("fluency", "relevance", "context_precision", "faithfulness")
IMAGE_METRICS = ("image_coherence", "image_helpfulness", "image_reference")
METRICS = (*TEXT_METRICS, *IMAGE_METRICS, "image_recall")

#: The 0-10 judges (spec §6.1, §6.2, §6.5): a prompt file and the last-integer parser each.
JUDGED = {m.name: m for m in (
    JudgedMetric("fluency", "judge_fluency_v1", LAST_INTEGER, divisor=10),
    JudgedMetric("relevance", "judge_relevance_v1", LAST_INTEGER, divisor=10),
    JudgedMetric("image_coherence", "judge_image_coherence_v1", LAST_INTEGER, divisor=10),
    JudgedMetric("image_helpfulness", "judge_image_helpfulness_v1", LAST_INTEGER, divisor=10),
    JudgedMetric("image_reference", "judge_image_reference_v1", LAST_INTEGER, divisor=10),
)}


# ------------------------------------------------------------------------------------------- tokenizers
class Tokenizer(Protocol):
    """Counts and cuts text in tokens: ``encode(text) -> list``, ``decode(tokens) -> str``."""

    def encode(self, text: str) -> list:
        """Tokens of ``text``."""
        ...

    def decode(self, tokens: list) -> str:
        """Text of ``tokens``."""
        ...


class RegexTokenizer:
    """Offline default tokenizer: a token is a word (``\\w+``) or one punctuation mark, each with its
    leading whitespace (trailing whitespace is a token of its own); ``decode(encode(t)) == t``."""

    _RE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+", re.UNICODE)

    def encode(self, text: str) -> list[str]:
        """Tokens of ``text`` (strings)."""
        return self._RE.findall(text)

    def decode(self, tokens: list) -> str:
        """The text of ``tokens``."""
        return "".join(tokens)


class HFTokenizer:
    """Wraps a Hugging Face tokenizer (e.g. the judge model's) as a :class:`Tokenizer`."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """Token ids, no special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, tokens: list) -> str:
        """Text of token ids."""
        return self.tokenizer.decode(tokens)


def tiktoken_tokenizer(encoding: str = "o200k_base") -> Tokenizer:
    """The tiktoken encoding the released code uses (``o200k_base`` for gpt-4o, else ``cl100k_base``).

    Raises:
        ImportError: tiktoken is not installed.
        Exception: whatever tiktoken raises when its encoding file cannot be fetched.
    """
    import tiktoken

    return tiktoken.get_encoding(encoding)


# ----------------------------------------------------------------------------------------- image windows
@dataclass
class ContextWindows:
    """Text above/below each output image (``windows``: ``[(above, below), ...]``) and the placeholder fix-ups (spec §5)."""

    windows: list[tuple[str, str]]
    surplus_placeholders: int = 0
    missing_placeholders: int = 0


def image_contexts(placeholder_response: str, n_images: int, tokenizer: Tokenizer | None = None,
                   max_tokens: int = CONTEXT_TOKENS) -> ContextWindows:
    """The context windows of spec §6.5: the last ``max_tokens`` tokens before image ``i``, the first after it.

    Surplus placeholders' segments are merged into the last one with a space (spec §5); missing ones get empty
    segments. Both are counted and logged.
    """
    tok = tokenizer or RegexTokenizer()
    segs = placeholder_response.split(PLACEHOLDER)
    surplus = missing = 0
    if len(segs) - 1 > n_images:
        surplus = len(segs) - 1 - n_images
        segs = segs[:n_images] + [" ".join(segs[n_images:])]
        log.warning("%d placeholder(s) more than the %d output images; surplus text merged", surplus, n_images)
    elif len(segs) - 1 < n_images:
        missing = n_images - (len(segs) - 1)
        segs = segs + [""] * missing
        log.warning("%d output image(s) without a placeholder", missing)
    windows = []
    for i in range(n_images):
        above = tok.encode("".join(segs[: i + 1]))
        below = tok.encode("".join(segs[i + 1:]))
        windows.append((tok.decode(above[-max_tokens:]) if max_tokens > 0 else "",
                        tok.decode(below[:max_tokens]) if max_tokens > 0 else ""))
    return ContextWindows(windows, surplus, missing)


# ------------------------------------------------------------------------------------------- 0-10 judges
@dataclass
class JudgeScore:
    """One 0-10 judgement (spec §8): ``raw`` int, ``normalised`` = raw / 10, ``reply``; ``None`` values on failure.

    ``error``: ``None``, ``"unparsable"`` or ``"generation_failed: ..."`` (a counted failure).
    """

    raw: int | None
    normalised: float | None
    reply: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """A usable score."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


def parse_judge_score(reply: str, *, released_parse: bool = False) -> int | None:
    """The GPT-4o judge parse (spec §6): last integer clamped to ``[0, 10]``; ``None`` when none (``0`` if ``released_parse``).

    >>> parse_judge_score("blah\\n8"), parse_judge_score("12"), parse_judge_score("no digits", released_parse=True)
    (8, 10, 0)
    """
    value = LAST_INTEGER(reply).value
    if value is None and released_parse:
        return 0
    return value


def _judge(caller: LLMClient, metric: str, fields: dict[str, Any], max_tokens: int, released_parse: bool,
           slot: Segment | None = None) -> JudgeScore:
    def build(tpl, f):
        if slot is None:
            return single_user_message(tpl, f)
        before, after = render_around_slot(tpl, **f)
        return user_messages([before, slot, after])

    v = judge(caller, JUDGED[metric], M2RAG_PROMPTS, fields, build=build, max_tokens=max_tokens)
    r = v.records[-1]
    if r.status == "failed":
        return JudgeScore(None, None, None, f"generation_failed: {r.error}")
    if r.status == "rejected":
        return JudgeScore(0, 0.0, r.text) if released_parse else JudgeScore(None, None, r.text, "unparsable")
    return JudgeScore(v.raw, v.value, r.text)


def fluency(caller: LLMClient, response: str, *, max_tokens: int = 256, released_parse: bool = False) -> JudgeScore:
    """Fluency of the answer text (spec §6.1), 0-10 -> [0, 1]; failures are counted, never scored.

    Args:
        response: the answer with placeholders deleted (:attr:`Answer.response <mmir.benchmarks.m2rag.generate.Answer.response>`).
        max_tokens: reply limit (``m2rag.metric_max_tokens``).
        released_parse: score an integer-free reply as 0 (released behaviour) instead of failing.
    """
    return _judge(caller, "fluency", {"text": response}, max_tokens, released_parse)


def relevance(caller: LLMClient, query: str, response: str, *, max_tokens: int = 256,
              released_parse: bool = False) -> JudgeScore:
    """Relevance of the answer to the query (spec §6.2), 0-10 -> [0, 1]; see :func:`fluency`."""
    return _judge(caller, "relevance", {"query": query, "text": response}, max_tokens, released_parse)


def _image_judge(metric: str, caller: LLMClient, image: ImageItem, above: str, below: str, vision: bool,
                 thumbnail_size: int, max_tokens: int, released_parse: bool) -> JudgeScore:
    try:
        slot: Segment = (ImagePart(thumbnail_bytes(image.load_bytes(), size=thumbnail_size, source=image.cached_image_url))
                         if vision else f"Image description: {image_description(image)}")
    except DataError as e:
        return JudgeScore(None, None, None, f"image_unavailable: {e}")
    return _judge(caller, metric, {"above": above, "below": below}, max_tokens, released_parse, slot)


def image_coherence(caller: LLMClient, image: ImageItem, above: str, below: str, *, vision: bool = True,
                    thumbnail_size: int = 512, max_tokens: int = 256, released_parse: bool = False) -> JudgeScore:
    """Image coherence with the text around it (spec §6.5.1), 0-10 -> [0, 1].

    Args:
        vision: send the image (thumbnail) or, for a text-only judge, its description.

    Returns:
        :class:`JudgeScore`; an unreadable image is the failure ``"image_unavailable: ..."``.
    """
    return _image_judge("image_coherence", caller, image, above, below, vision, thumbnail_size, max_tokens, released_parse)


def image_helpfulness(caller: LLMClient, image: ImageItem, above: str, below: str, *, vision: bool = True,
                      thumbnail_size: int = 512, max_tokens: int = 256, released_parse: bool = False) -> JudgeScore:
    """How much the image helps a reader understand the text around it (spec §6.5.2); see
    :func:`image_coherence`."""
    return _image_judge("image_helpfulness", caller, image, above, below, vision, thumbnail_size, max_tokens,
                        released_parse)


def image_reference(caller: LLMClient, image: ImageItem, above: str, below: str, *, vision: bool = True,
                    thumbnail_size: int = 512, max_tokens: int = 256, released_parse: bool = False) -> JudgeScore:
    """Whether the text refers to / explains the image, and correctly (spec §6.5.3); see
    :func:`image_coherence`."""
    return _image_judge("image_reference", caller, image, above, below, vision, thumbnail_size, max_tokens, released_parse)


# -------------------------------------------------------------------------------------- RAGAS (native)
@dataclass
class RagasScore:
    """A native RAGAS-style score in [0, 1] (``value``, ``None`` on failure) with its ``details``.

    ``error``: ``None``, ``"unparsable: ..."``, ``"generation_failed: ..."``, ``"no_statements"``,
    ``"no_contexts"`` or ``"verdict_count_mismatch"``.
    """

    value: float | None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """A usable score."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


def _verdict(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "yes", "no"):
        return 1 if value.strip().lower() in ("1", "yes") else 0
    return None


def average_precision(verdicts: Sequence[int]) -> float:
    """RAGAS context precision from ordered 0/1 verdicts: ``sum(precision@k * v_k) / (sum(v) + 1e-10)``."""
    hits, total = 0, 0.0
    for k, v in enumerate(verdicts, 1):
        hits += v
        total += (hits / k) * v
    return total / (sum(verdicts) + EPSILON)


def _ragas_call(caller: LLMClient, msgs: list, tpl: Any, label: str, max_tokens: int,
                context: dict[str, Any] | None = None) -> CallRecord:
    return caller.call(msgs, tpl, label=label, parser=FIRST_JSON, context=context, max_tokens=max_tokens)


def context_precision(caller: LLMClient, query: str, response: str, contexts: Sequence[str], *,
                      max_tokens: int = 256) -> RagasScore:
    """Context precision without reference (spec §6.3): one verdict call per context, in order.

    Score ``sum_k(precision@k * v_k) / (sum_k v_k + 1e-10)`` with ``precision@k = sum_{i<=k} v_i / k``.

    Args:
        contexts: page contents, then the detailed captions of the output images.

    Returns:
        :class:`RagasScore` with ``details["verdicts"]``; an unparsable verdict, a failed call or empty
        ``contexts`` fails the metric (counted).
    """
    if not contexts:
        return RagasScore(None, "no_contexts")
    tpl = prompt("ragas_context_precision_v1")
    verdicts: list[int] = []
    for k, ctx in enumerate(contexts):
        msgs = user_messages([tpl.render(question=query, answer=response, context=ctx)])
        r = _ragas_call(caller, msgs, tpl, "context_precision", max_tokens, {"context": k})
        if r.status == "failed":
            return RagasScore(None, f"generation_failed: {r.error}", {"verdicts": verdicts})
        v = _verdict(r.value.get("verdict")) if r.ok and isinstance(r.value, dict) else None
        if v is None:
            caller.reject(r, f"no 0/1 verdict for context {k}")
            return RagasScore(None, f"unparsable: verdict for context {k}", {"verdicts": verdicts, "reply": r.text})
        verdicts.append(v)
    return RagasScore(average_precision(verdicts), None, {"verdicts": verdicts})


def faithfulness(caller: LLMClient, query: str, response: str, contexts: Sequence[str], *,
                 max_tokens: int = 1024) -> RagasScore:
    """Faithfulness (spec §6.4): statements extracted from the answer, each judged against the contexts; supported / all.

    Returns:
        :class:`RagasScore` (``details``: ``statements``, ``verdicts``); failures ``"no_statements"``,
        ``"unparsable: ..."``, ``"verdict_count_mismatch"``, ``"generation_failed: ..."``.
    """
    t_st, t_nli = prompt("ragas_statements_v1"), prompt("ragas_nli_v1")
    r = _ragas_call(caller, user_messages([t_st.render(question=query, answer=response)]), t_st,
                    "faithfulness.statements", max_tokens)
    if r.status == "failed":
        return RagasScore(None, f"generation_failed: {r.error}")
    raw = (r.value.get("statements") if isinstance(r.value, dict) else r.value) if r.ok else None
    if not isinstance(raw, list):
        caller.reject(r, "no statements list")
        return RagasScore(None, "unparsable: statements", {"reply": r.text})
    statements = [s.strip() for s in raw if isinstance(s, str) and s.strip()]
    if not statements:
        return RagasScore(None, "no_statements", {"reply": r.text})
    listing = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(statements))
    r = _ragas_call(caller, user_messages([t_nli.render(context="\n".join(contexts), statements=listing)]), t_nli,
                    "faithfulness.nli", max_tokens)
    if r.status == "failed":
        return RagasScore(None, f"generation_failed: {r.error}", {"statements": statements})
    items = (r.value.get("verdicts") if isinstance(r.value, dict) else r.value) if r.ok else None
    verdicts = [_verdict(it.get("verdict")) if isinstance(it, dict) else _verdict(it) for it in items] \
        if isinstance(items, list) else None
    if verdicts is None or any(v is None for v in verdicts):
        caller.reject(r, "no list of 0/1 verdicts")
        return RagasScore(None, "unparsable: verdicts", {"statements": statements, "reply": r.text})
    if len(verdicts) != len(statements):
        return RagasScore(None, "verdict_count_mismatch",
                          {"statements": statements, "verdicts": verdicts, "reply": r.text})
    return RagasScore(sum(verdicts) / len(verdicts), None, {"statements": statements, "verdicts": verdicts})


# --------------------------------------------------------------------------------------------- recall
def image_recall(important: Iterable[str], output: Iterable[str]) -> float:
    """Image recall (spec §6.6): ``|important ∩ output| / |important|`` over ``cached_image_url`` sets;
    **1.0 when there is no important image**."""
    imp, out = set(important), set(output)
    if not imp:
        return 1.0
    return len(imp & out) / len(imp)


# ------------------------------------------------------------------------------------ one answer, all 8
@dataclass
class ImageEvaluation:
    """The three image-precision judgements of one output image."""

    position: int
    cached_image_url: str
    coherence: JudgeScore
    helpfulness: JudgeScore
    reference: JudgeScore


@dataclass
class QueryEvaluation:
    """All eight metrics of one answer (spec §6); ``images`` has one entry per output image."""

    query_id: str
    fluency: JudgeScore
    relevance: JudgeScore
    context_precision: RagasScore
    faithfulness: RagasScore
    images: list[ImageEvaluation]
    image_recall: float
    important_images: int = 0
    notes: dict[str, int] = field(default_factory=dict)

    def text_value(self, metric: str) -> float | None:
        """The [0, 1] value of a per-answer metric (``None`` = failed)."""
        if metric in ("fluency", "relevance"):
            return getattr(self, metric).normalised
        if metric in ("context_precision", "faithfulness"):
            return getattr(self, metric).value
        if metric == "image_recall":
            return self.image_recall
        raise KeyError(metric)

    def image_values(self, metric: str) -> list[float | None]:
        """The per-image [0, 1] values of an image metric (``None`` = failed judgement)."""
        key = {"image_coherence": "coherence", "image_helpfulness": "helpfulness", "image_reference": "reference"}[metric]
        return [getattr(ie, key).normalised for ie in self.images]

    def failures(self) -> dict[str, int]:
        """Failed judgements per metric."""
        out = {m: int(self.text_value(m) is None) for m in ("fluency", "relevance", "context_precision", "faithfulness")}
        for m in IMAGE_METRICS:
            out[m] = sum(v is None for v in self.image_values(m))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class Judges:
    """Who judges what (spec §6): ``text`` (fluency, relevance), ``ragas`` (default ``text``), ``image`` (default ``text``)."""

    text: LLMClient
    ragas: LLMClient | None = None
    image: LLMClient | None = None
    image_vision: bool = True


def evaluate_answer(answer: Any, selected: Any, judges: Judges, *, tokenizer: Tokenizer | None = None,
                    context_tokens: int = CONTEXT_TOKENS, recall_threshold: float = RECALL_THRESHOLD,
                    released_parse: bool = False, max_tokens: int = 256,
                    faithfulness_max_tokens: int = 1024) -> QueryEvaluation:
    """Evaluate one answer with all eight metrics (spec §6); failures are recorded in the scores, never raised.

    Args:
        selected: its :class:`~mmir.benchmarks.m2rag.selection.SelectedInput` (page contents, input images).
        context_tokens: window length on each side (256).
        recall_threshold: ``final_score`` at or above which an input image is important (8).
        max_tokens: reply limit of the 0-10 judges and verdicts (``m2rag.metric_max_tokens``).
        faithfulness_max_tokens: reply limit of the faithfulness calls (``m2rag.faithfulness_max_tokens``).
    """
    response = answer.response
    query = selected.query
    fl = fluency(judges.text, response, released_parse=released_parse, max_tokens=max_tokens)
    rel = relevance(judges.text, query, response, released_parse=released_parse, max_tokens=max_tokens)
    outputs = list(answer.output_images)
    by_url = {ii.image.cached_image_url: ii.image for ii in selected.images}
    contexts = selected.page_contents() + [o.detailed_image_caption or "" for o in outputs]
    ragas = judges.ragas or judges.text
    cp = context_precision(ragas, query, response, contexts, max_tokens=max_tokens)
    fa = faithfulness(ragas, query, response, contexts, max_tokens=faithfulness_max_tokens)
    windows = image_contexts(answer.placeholder_response, len(outputs), tokenizer, context_tokens)
    judge = judges.image or judges.text
    imgs = []
    for k, (o, (above, below)) in enumerate(zip(outputs, windows.windows, strict=True)):
        item = by_url.get(o.cached_image_url)
        if item is None:
            missing = JudgeScore(None, None, None, "image_unavailable: not among the input images")
            imgs.append(ImageEvaluation(k, o.cached_image_url, missing, missing, missing))
            continue
        kw = dict(vision=judges.image_vision, thumbnail_size=selected.config.thumbnail_size, released_parse=released_parse,
                  max_tokens=max_tokens)
        imgs.append(ImageEvaluation(
            k, o.cached_image_url,
            image_coherence(judge, item, above, below, **kw),
            image_helpfulness(judge, item, above, below, **kw),
            image_reference(judge, item, above, below, **kw)))
    important = selected.important_images(recall_threshold)
    recall = image_recall(important, [o.cached_image_url for o in outputs])
    notes = {"surplus_placeholders": windows.surplus_placeholders, "missing_placeholders": windows.missing_placeholders}
    return QueryEvaluation(query_id=answer.query_id, fluency=fl, relevance=rel, context_precision=cp, faithfulness=fa,
                           images=imgs, image_recall=recall, important_images=len(important),
                           notes={k: v for k, v in notes.items() if v})


from mmir.benchmarks.m2rag.aggregate import (  # noqa: E402  (re-export; no cycle)
    MetricSummary,
    RunSummary,
    aggregate,
)

__all__ = [
    "CONTEXT_TOKENS", "ContextWindows", "HFTokenizer", "IMAGE_METRICS", "ImageEvaluation", "JudgeScore", "Judges",
    "METRICS", "MetricSummary", "QueryEvaluation", "RECALL_THRESHOLD", "RagasScore", "RegexTokenizer", "RunSummary",
    "TEXT_METRICS", "Tokenizer", "aggregate", "average_precision", "context_precision", "evaluate_answer",
    "JUDGED", "faithfulness", "fluency", "image_coherence", "image_contexts", "image_helpfulness", "image_recall",
    "image_reference", "parse_judge_score", "relevance", "tiktoken_tokenizer",
]
