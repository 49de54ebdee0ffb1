"""The answer judge: 0-100 against the reference answer (prompt ``rag_judge_v1``), parsed strictly by the
:data:`~mmir.llm.parsers.SCORE_0_100` parser (JSON ``{"score": n}``, ``Score: 85`` / ``**Score**: 85.``, ``85/100``
or a bare number; in [0, 100], never clipped). An unusable reply is retried once with the stricter
``rag_judge_strict_v1``; a second failure is recorded, excluded from the mean and counted -- never a silent 0 or
NaN (unlike RAGAS's NaN or BRIGHT's silent retries). Repeat 0 samples at ``rag.judge_temperature`` (greedy by
default), later repeats at ``rag.judge_repeat_temperature``.
"""

from __future__ import annotations

import statistics

from mmir.benchmarks.rag.prompts import RAG_PROMPTS
from mmir.llm.client import LLMClient
from mmir.llm.judged import JudgedMetric, JudgedValue, judge
from mmir.llm.parsers import SCORE_0_100

#: The judged metric of Table 7.
ANSWER_SCORE = JudgedMetric("rag_judge", "rag_judge_v1", SCORE_0_100, retry_prompt="rag_judge_strict_v1")


def judge_answer(client: LLMClient, question: str, reference: str, answer: str, *, repeat: int, seed: int,
                 temperature: float = 0.0, repeat_temperature: float = 0.7) -> JudgedValue:
    """Judge one answer once (repeat ``repeat``, seeded ``seed``; ``temperature`` for repeat 0,
    ``repeat_temperature`` after), with the strict retry (see the module docstring).

    Returns:
        :class:`~mmir.llm.judged.JudgedValue`: ``value`` in [0, 100] or ``None``; ``status`` ok / retried_ok / failed.
    """
    fields = {"question": question, "reference": reference, "answer": answer or "(empty answer)"}
    return judge(client, ANSWER_SCORE, RAG_PROMPTS, fields, context={"repeat": repeat}, seed=seed,
                 temperature=temperature if repeat == 0 else repeat_temperature)


def agreement(scores_per_answer: list[list[float]], tolerance: float = 10.0) -> dict:
    """Agreement between repeated judgings of the same answers (answers with >= 2 valid scores).

    Returns ``answers`` (count), ``mean_std`` (mean over answers of the repeats' standard deviation, points),
    ``mean_abs_diff`` (mean absolute difference over all repeat pairs, points) and ``within_tolerance``
    (share of answers whose repeats all lie within ``tolerance`` points).
    """
    multi = [s for s in scores_per_answer if len(s) >= 2]
    if not multi:
        return {"answers": 0, "mean_std": None, "mean_abs_diff": None, "within_tolerance": None}
    diffs = [abs(a - b) for s in multi for i, a in enumerate(s) for b in s[i + 1:]]
    return {"answers": len(multi),
            "mean_std": statistics.fmean(statistics.pstdev(s) for s in multi),
            "mean_abs_diff": statistics.fmean(diffs),
            "within_tolerance": sum(max(s) - min(s) <= tolerance for s in multi) / len(multi)}
