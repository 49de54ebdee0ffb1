"""Second-stage reranking of a first-stage run: the top ``depth`` items of each query reordered by a cross-encoder,
an LLM (pointwise scores or RankGPT listwise windows) or a VLM, the rest kept in first-stage order below them.

- :mod:`.order`: cutting a ranking at ``depth``, putting the reranked head back, strict scores.
- :mod:`.listwise`: the sliding-window algorithm and the permutation parser.
- :mod:`.llm`: pointwise and listwise calls through :class:`~mmir.llm.client.LLMClient` (cached, audited).
- :mod:`.cross_encoder`: sentence-transformers ``CrossEncoder`` loading and batched scoring.
- :mod:`.candidates`: the text and image of each candidate and the query of a task.
"""

from pathlib import Path

from mmir.llm.prompts import PromptLibrary

#: The versioned rerank prompts (``prompts/rerank_pointwise_v1.txt``, ``prompts/rerank_listwise_v1.txt``).
RERANK_PROMPTS = PromptLibrary(Path(__file__).parent / "prompts")
