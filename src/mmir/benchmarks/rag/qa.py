"""RAG QA over a prepared domain (MM-BRIGHT §5 "Retrieval augmentation improves end-to-end QA", Appendix G).

Settings: ``none`` (no evidence), ``oracle`` (the query's gold documents, plus its positive images for a backend
that takes images), ``topk:<system>`` (the first k lines of that system's run for the configured task; a Task 4
pair gives its document and its image, a Task 3 item an image). Evidence is listed with its id. Images reach a
backend that takes images as image parts and are replaced by their captions (image text) otherwise — for the
question's own images too.

Only queries with a reference answer (``gold_answers``) are used, the first ``max_queries`` of them per domain.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from mmir.config.models import RagConfig
from mmir.data.index import DomainIndex, DomainItem
from mmir.llm.client import LLMClient
from mmir.retrieval.runs import read_run

log = logging.getLogger(__name__)


def select_queries(topics: pd.DataFrame, max_queries: int | None) -> pd.DataFrame:
    """Topics with a non-empty reference answer, in topic order, at most ``max_queries``."""
    has = [bool(len(a)) and any(str(x).strip() for x in a) for a in topics["gold_answers"]]
    sel = topics[has]
    return sel.head(max_queries) if max_queries else sel


def evidence_for(setting: str, qid: str, index: DomainIndex, run: dict | None, k: int,
                 takes_images: bool = False) -> list[DomainItem]:
    """The evidence of one query under ``setting`` (see module docstring); oracle = its Task 1 qrels documents."""
    if setting == "none":
        return []
    if setting == "oracle":
        ev = [e for g in index.gold.get(qid, []) for e in index.item(g)]
        if takes_images:
            ev += [e for p in index.positive_images.get(qid, []) if p in index.image_bytes for e in index.item(p)]
        return ev
    items = [d for d, _ in (run or {}).get(qid, [])[:k]]
    return [e for it in items for e in index.item(it)]


def answer_messages(template, question: str, question_images: list[str], evidence: list[DomainItem], index: DomainIndex,
                    takes_images: bool, evidence_chars: int = 6000) -> list[dict]:
    """Chat messages for one answer; images as parts (``takes_images``) or as their text.

    The evidence text is budgeted to ``evidence_chars`` characters in all, shared equally by the pieces (each
    cut at its share), so the prompt fits a small model's context whatever k is.
    """
    lines = []
    share = max(200, evidence_chars // max(1, len(evidence)))
    for e in evidence:
        kind = "image" if e.image is not None else "document"
        body = e.text[:share] if e.text else ("(see attached image)" if takes_images else "(no description)")
        lines.append(f"[{e.id}] ({kind})\n{body}")
    q_imgs = [f"Image {i}: {index.image_text.get(p, '') or '(no description)'}" for i, p in enumerate(question_images, 1)]
    text = template.render(question=question, question_images="\n".join(q_imgs) or "(none)",
                           evidence="\n\n".join(lines) or "(no evidence)")
    if not takes_images:
        return [{"role": "user", "content": text}]
    parts = [{"type": "text", "text": text}]
    parts += [{"type": "image", "image": bytes(index.image_bytes[p])} for p in question_images if p in index.image_bytes]
    parts += [{"type": "image", "image": bytes(e.image)} for e in evidence if e.image is not None]
    return [{"role": "user", "content": parts}]


def run_setting(setting: str, topics: pd.DataFrame, index: DomainIndex, run_file: str | Path | None,
                generator: LLMClient, judge: LLMClient, rag: RagConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate and judge the answers of one setting with the settings of ``rag`` (``k``, ``images``,
    ``judge_repeats``, ``seed``, ``evidence_chars``, ``judge_temperature``, ``judge_repeat_temperature``).

    Args:
        generator: answers (its sampling: ``rag.answer_temperature``, ``rag.answer_max_tokens``, seed ``rag.seed``).
        judge: judges (its ``max_tokens``: ``rag.judge_max_tokens``); repeat ``r`` is seeded ``rag.seed + r``,
            sampled at ``rag.judge_temperature`` for ``r = 0`` and ``rag.judge_repeat_temperature`` after.

    Returns:
        ``(answers, judgments)`` frames: answers ``qid, answer, evidence_ids, status``; judgments
        ``qid, repeat, score, status, raw``.
    """
    from mmir.benchmarks.rag.judge import judge_answer
    from mmir.benchmarks.rag.prompts import RAG_PROMPTS

    k, takes_images, seed = rag.k, rag.images, rag.seed
    tpl = RAG_PROMPTS.get("rag_answer_v1")
    run = read_run(run_file) if run_file else None
    msgs, evid = [], []
    for qid, q, paths in zip(topics["qid"], topics["query"], topics["image_paths"]):
        ev = evidence_for(setting, qid, index, run, k, takes_images)
        evid.append([e.id for e in ev])
        msgs.append(answer_messages(tpl, q, list(paths), ev, index, takes_images, rag.evidence_chars))
    recs = generator.call_many(msgs, tpl, label="rag_answer", contexts=[{"qid": q} for q in topics["qid"]], seed=seed)
    answers, judgments = [], []
    for qid, q, ref, ids, rec in zip(topics["qid"], topics["query"], topics["gold_answers"], evid, recs):
        text = rec.text if rec.ok else ""
        answers.append({"qid": qid, "answer": text, "evidence_ids": ids, "status": "ok" if rec.ok else "failed"})
        for r in range(rag.judge_repeats):
            j = judge_answer(judge, q, "\n".join(map(str, ref)), text, repeat=r, seed=seed + r,
                             temperature=rag.judge_temperature, repeat_temperature=rag.judge_repeat_temperature)
            judgments.append({"qid": qid, "repeat": r, "score": j.value, "status": j.status,
                              "raw": j.records[-1].text or ""})
    return pd.DataFrame(answers), pd.DataFrame(judgments, columns=["qid", "repeat", "score", "status", "raw"])


def summarize(answers: pd.DataFrame, judgments: pd.DataFrame) -> dict:
    """Mean score (valid judgments only; per answer the mean of its repeats), counts and repeat agreement."""
    from mmir.benchmarks.rag.judge import agreement

    valid = judgments[judgments["score"].notna()]
    per_answer = valid.groupby("qid")["score"].apply(list)
    means = [sum(s) / len(s) for s in per_answer]
    return {"queries": int(len(answers)), "answers_failed": int((answers["status"] != "ok").sum()),
            "judgments": int(len(judgments)), "judge_failures": int(judgments["score"].isna().sum()),
            "judge_retried_ok": int((judgments["status"] == "retried_ok").sum()),
            "answers_scored": len(means), "score": (sum(means) / len(means)) if means else None,
            "agreement": agreement(per_answer.tolist())}
