"""LLM and VLM rerankers through the one LLM layer (:class:`~mmir.llm.client.LLMClient`: generation cache, audit).

- pointwise: one call per (query, candidate) with the ``rerank_pointwise_v1`` rubric (0-4, a relevance rubric in the
  spirit of BRIGHT's reasoning rerank prompt: identify the essential problem, then judge usefulness); the score is
  parsed from the reply (``score: reply``) or is the expected grade from the grade tokens' log-probabilities
  (``score: logprobs``, :mod:`.grades`). Candidates sort by score, ties and unscored candidates (failed or rejected
  calls, counted) in first-stage order, unscored ones after every scored one.
- listwise: RankGPT sliding windows (:mod:`.listwise`); a window whose reply holds no permutation keeps its order
  (counted).
- vlm: either prompt, with the query's images after the prompt and each candidate's image (Tasks 3-4) labelled with
  its identifier, as image parts of one user message.

The cache key of every call holds the messages (query, candidate texts and images, in window order), the prompt's id
and text, the backend's model identity and the sampling (:func:`mmir.llm.cache.generation_key_fields`), and with
``score: logprobs`` the ``top_logprobs`` asked for.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mmir.core.errors import ConfigError
from mmir.llm.client import LLMClient
from mmir.llm.messages import ImagePart, Segment, user_messages
from mmir.llm.prompts import PromptTemplate
from mmir.retrieval.rerank.candidates import Candidate, RerankQuery
from mmir.retrieval.rerank.grades import expected_grade
from mmir.retrieval.rerank.listwise import SCORE_0_4, permutation_parser, sliding_windows
from mmir.retrieval.rerank.order import order_by_scores


def _clip(text: str, limit: int, counts: Counter, key: str) -> str:
    """``text`` on one line (newline runs become a space, as BRIGHT's rerank prompt does), cut to ``limit`` characters."""
    text = re.sub(r"\s*\n+\s*", " ", text).strip()
    if len(text) > limit:
        counts[key] += 1
        return text[:limit]
    return text


class LLMReranker:
    """Pointwise or listwise reranking of one query's candidates.

    Args:
        client: the LLM client (its audit gets every call).
        cfg: a ``PointwiseReranker``, ``ListwiseReranker`` or ``VLMReranker`` (mmir.config.models).
        prompt: the loaded prompt template.
        images: send images (a VLM reranker): up to ``cfg.query_images`` query images, and candidates' images when
            ``cfg.candidate_images``.

    Raises:
        ConfigError: ``score: logprobs`` with a backend that gives no log-probabilities.
    """

    def __init__(self, client: LLMClient, cfg: Any, prompt: PromptTemplate, *, images: bool = False):
        self.client, self.cfg, self.prompt, self.images = client, cfg, prompt, images
        mode = getattr(cfg, "mode", None)
        self.listwise = cfg.kind == "llm-listwise" or mode == "listwise"
        self.logprobs = cfg.kind == "llm-pointwise" and cfg.score == "logprobs"
        if self.logprobs and not getattr(client.backend, "supports_logprobs", False):
            raise ConfigError("score", f"score: logprobs needs token log-probabilities, which backend "
                              f"{getattr(client.backend, 'name', type(client.backend).__name__)} does not give: use score: reply")
        self.counts: Counter = Counter()

    # ------------------------------------------------------------------------------------------------ prompt
    def _query_text(self, q: RerankQuery) -> str:
        return _clip(q.text, self.cfg.query_chars, self.counts, "queries_cut")

    def _query_images(self, q: RerankQuery) -> list[Segment]:
        if not self.images or not q.images:
            return []
        keep = q.images[:self.cfg.query_images]
        if len(keep) < len(q.images):
            self.counts["query_images_cut"] += 1
        return [f"\n\nImages of the query ({len(keep)}):"] + [ImagePart(self._thumb(b)) for b in keep] if keep else []

    def _thumb(self, data: bytes) -> bytes:
        import io

        from mmir.data.images import decode_image

        img = decode_image(data, source="rerank image")
        img.thumbnail((self.cfg.image_side, self.cfg.image_side))
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()

    def pointwise_messages(self, q: RerankQuery, c: Candidate) -> list[dict]:
        """The one user message of a pointwise call."""
        segs: list[Segment] = [self.prompt.render(query=self._query_text(q),
                                                  candidate=_clip(c.text, self.cfg.max_chars, self.counts, "candidates_cut"))]
        segs += self._query_images(q)
        if self.images and self.cfg.candidate_images and c.image is not None:
            segs += ["\n\nImage of the document:", ImagePart(self._thumb(c.image))]
        return user_messages(segs)

    def listwise_messages(self, q: RerankQuery, window: Sequence[Candidate]) -> list[dict]:
        """The one user message of a listwise call over ``window`` (identifiers ``[1]..[k]`` in window order)."""
        passages = "\n\n".join(f"[{i}] {_clip(c.text, self.cfg.max_chars, self.counts, 'candidates_cut')}"
                               for i, c in enumerate(window, 1))
        segs: list[Segment] = [self.prompt.render(n=len(window), query=self._query_text(q), passages=passages)]
        segs += self._query_images(q)
        if self.images and self.cfg.candidate_images:
            for i, c in enumerate(window, 1):
                if c.image is not None:
                    segs += [f"\n\nImage of passage [{i}]:", ImagePart(self._thumb(c.image))]
        return user_messages(segs)

    # ------------------------------------------------------------------------------------------------ calls
    def _sampling(self) -> dict:
        return {"temperature": self.cfg.temperature, "max_tokens": self.cfg.max_tokens, "seed": self.cfg.seed}

    def rerank(self, q: RerankQuery, cands: Sequence[Candidate]) -> list[int]:
        """The reranked order of ``cands`` (positions into it)."""
        if len(cands) < 2:
            return list(range(len(cands)))
        return self._listwise(q, cands) if self.listwise else self._pointwise(q, cands)

    def _pointwise(self, q: RerankQuery, cands: Sequence[Candidate]) -> list[int]:
        msgs = [self.pointwise_messages(q, c) for c in cands]
        ctx = [{"qid": q.qid, "candidate": c.id} for c in cands]
        lp = {"top_logprobs": self.cfg.top_logprobs} if self.logprobs else {}
        recs = self.client.call_many(msgs, self.prompt, label="rerank_pointwise", parser=SCORE_0_4, contexts=ctx,
                                     **self._sampling(), **lp)
        if self.logprobs:  # the reply's grade read, now its expectation over the grades (a reply without one is rejected)
            for r in (r for r in recs if r.status == "ok"):
                e = expected_grade(r.text, r.logprobs)
                if e.ok:
                    r.value, r.parse_method = e.value, e.method
                else:
                    self.client.reject(r, f"expected grade: {e.error}")
        scores = [r.value if r.status == "ok" else float("nan") for r in recs]
        self.counts["unscored"] += sum(r.status != "ok" for r in recs)
        return order_by_scores(scores)

    def _listwise(self, q: RerankQuery, cands: Sequence[Candidate]) -> list[int]:
        def permute(part: list[int]) -> list[int] | None:
            window = [cands[i] for i in part]
            rec = self.client.call(self.listwise_messages(q, window), self.prompt, label="rerank_listwise",
                                   parser=permutation_parser(len(window)),
                                   context={"qid": q.qid, "window": [c.id for c in window]}, **self._sampling())
            self.counts["windows"] += 1
            if rec.status != "ok":
                return None
            if rec.parse_method == "partial":
                self.counts["windows_partial"] += 1
            return rec.value

        order, kept = sliding_windows(range(len(cands)), permute, window=self.cfg.window, step=self.cfg.step,
                                      passes=self.cfg.passes)
        self.counts["windows_kept"] += kept
        return order
