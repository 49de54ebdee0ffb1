"""Query variants for the MM-BRIGHT ablations (paper §5, Appendix B and E): caption-augmented queries and
LLM-reformulated queries, fed to every Task 1 system as ``<system>+cap:<captioner>`` / ``<system>+ref:<name>``.

- Caption augmentation: query text + the captions of its images, in image order (Figure 5, Tables 9–15).
- Reformulation: an LLM first reasons about what the query needs, given its text and its images' descriptions,
  then writes a search query after ``Search query:`` (the prompt in the spirit of Figure 14,
  ``prompts/reformulate_v1.txt``; Figure 7, Tables 24–30).

Reformulation outcomes are counted, never hidden: ``ok`` (the text after the marker), ``no_marker`` (the model
wrote no ``Search query:`` line: its whole output is used, as BRIGHT uses raw LLM reasoning as the query),
``failed`` (the backend call failed or returned nothing after retries: the original query is kept so the
topic still counts, and the failure is reported with its count).
"""

from __future__ import annotations

import logging

import pandas as pd

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


def reformulate(topics: pd.DataFrame, captions: dict[str, str], backend, cache, template, *,
                temperature: float = 0.0, max_tokens: int = 256, seed: int | None = 0) -> tuple[pd.DataFrame, dict]:
    """Reformulate every topic through ``backend`` with the generation ``cache``.

    Returns ``(frame, counts)``: frame ``qid, query, original, raw, status`` (status ok / no_marker / failed),
    counts of each status plus the cache's hits/misses/backend_calls/failures during this call.
    """
    from mmir.llm.cache import parse_marked_answer

    msgs = [reformulation_messages(template, q, [captions.get(p, "") for p in paths])
            for q, paths in zip(topics["query"], topics["image_paths"])]
    before = dict(cache.stats)
    records = cache.cached_generate_many(backend, msgs, template.id, template.text, temperature=temperature,
                                         max_tokens=max_tokens, seed=seed, n=1)
    rows, counts = [], {"ok": 0, "no_marker": 0, "failed": 0}
    for qid, q, rec in zip(topics["qid"], topics["query"], records):
        text = (rec.get("texts") or [""])[0] if rec.get("status") == "ok" else ""
        if not text.strip():
            status, new = "failed", q
        else:
            marked = parse_marked_answer(text)
            status, new = ("ok", marked) if marked else ("no_marker", text.strip())
        counts[status] += 1
        rows.append({"qid": qid, "query": new, "original": q, "raw": text, "status": status})
    after = dict(cache.stats)
    counts |= {f"cache_{k}": after[k] - before[k] for k in after}
    if counts["failed"]:
        log.warning("%d of %d reformulations failed; their original query was kept", counts["failed"], len(rows))
    return pd.DataFrame(rows, columns=["qid", "query", "original", "raw", "status"]), counts
