"""Query variants for the MM-BRIGHT ablations (paper §5, Appendix B and E): caption-augmented queries and
LLM-reformulated queries, fed to every Task 1 system as ``<system>+cap:<captioner>`` / ``<system>+ref:<name>``.

- Caption augmentation: query text + the captions of its images, in image order (Figure 5, Tables 9–15).
- Reformulation: an LLM first reasons about what the query needs, given its text and its images' descriptions,
  then writes a search query after ``Search query:`` (the prompt in the spirit of Figure 14,
  ``prompts/reformulate_v1.txt``; Figure 7, Tables 24–30).

Reformulation outcomes are counted, never hidden: ``ok`` (the text after the marker, parser
:data:`~mmir.llm.parsers.SEARCH_QUERY`), ``no_marker`` (the model wrote no ``Search query:`` line: its whole
output is used, as BRIGHT uses raw LLM reasoning as the query), ``failed`` (the backend call failed or returned
nothing after retries: the original query is kept so the topic still counts, the failure is reported with its
count and retried on the next run).
"""

from __future__ import annotations

import logging

import pandas as pd

from mmir.llm.client import LLMClient
from mmir.llm.parsers import SEARCH_QUERY
from mmir.llm.prompts import PromptTemplate

log = logging.getLogger(__name__)


def caption_augmented(topics: pd.DataFrame, captions: dict[str, str]) -> pd.DataFrame:
    """``qid, query`` with each query followed by its images' captions (in image order, empty ones skipped)."""
    rows = []
    for qid, q, paths in zip(topics["qid"], topics["query"], topics["image_paths"]):
        caps = [captions[p] for p in paths if captions.get(p)]
        rows.append({"qid": qid, "query": "\n\n".join([q, *caps])})
    return pd.DataFrame(rows, columns=["qid", "query"])


def reformulation_messages(template, query: str, image_texts: list[str]) -> list[dict]:
    """Chat messages of the reformulation prompt for one query (images given as text descriptions)."""
    desc = "\n".join(f"Image {i}: {t}" for i, t in enumerate(image_texts, 1) if t) or "(no images)"
    return [{"role": "user", "content": template.render(query=query, image_descriptions=desc)}]


def reformulate(topics: pd.DataFrame, captions: dict[str, str], client: LLMClient, template: PromptTemplate, *,
                temperature: float = 0.0, max_tokens: int = 256, seed: int | None = 0) -> tuple[pd.DataFrame, dict]:
    """Reformulate every topic through ``client`` (backend + generation cache).

    Returns ``(frame, counts)``: frame ``qid, query, original, raw, status`` (status ok / no_marker / failed) and
    the count of each status.
    """
    msgs = [reformulation_messages(template, q, [captions.get(p, "") for p in paths])
            for q, paths in zip(topics["query"], topics["image_paths"])]
    records = client.call_many(msgs, template, label="reformulate", contexts=[{"qid": q} for q in topics["qid"]],
                               temperature=temperature, max_tokens=max_tokens, seed=seed)
    rows, counts = [], {"ok": 0, "no_marker": 0, "failed": 0}
    for qid, q, r in zip(topics["qid"], topics["query"], records):
        if not r.ok:
            status, new, text = "failed", q, ""
        else:
            text = r.text
            marked = SEARCH_QUERY(text)
            status, new = ("ok", marked.value) if marked.ok else ("no_marker", text.strip())
        counts[status] += 1
        rows.append({"qid": qid, "query": new, "original": q, "raw": text, "status": status})
    if counts["failed"]:
        log.warning("%d of %d reformulations failed; their original query was kept", counts["failed"], len(rows))
    return pd.DataFrame(rows, columns=["qid", "query", "original", "raw", "status"]), counts
