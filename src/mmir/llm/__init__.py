"""The LLM layer: every model call of every benchmark goes through it.

* :mod:`~mmir.llm.messages` -- chat messages, image payloads, the canonical form hashed into cache keys;
* :mod:`~mmir.llm.backends` -- ``Backend.generate`` for OpenAI-compatible endpoints, llama.cpp and transformers;
* :mod:`~mmir.llm.cache` -- ``GenerationCache`` (SQLite, one committed row per generation);
* :mod:`~mmir.llm.prompts` -- ``PromptLibrary``: every prompt a file with a name and a hash;
* :mod:`~mmir.llm.parsers` -- the named reply parsers (each benchmark's published parse rule);
* :mod:`~mmir.llm.client` -- ``LLMClient``: the one call path (cache, parser, failure policy) -> ``CallRecord``;
* :mod:`~mmir.llm.records` / :mod:`~mmir.llm.audit` -- the one call record and the one audit/counter;
* :mod:`~mmir.llm.judged` -- a judged metric as a declaration (prompt file + parser);
* :mod:`~mmir.llm.policy` -- a stage whose calls all failed stops; ``llm_calls`` / ``llm_failures``;
* :mod:`~mmir.llm.accounting` -- ``Usage``: requests, failures, retries, tokens, latency, cost;
* :mod:`~mmir.llm.offline` -- the offline Qwen2.5 0.5B GGUF.
"""

from mmir.llm.accounting import Usage
from mmir.llm.audit import CallAudit
from mmir.llm.backends import (
    Backend,
    Generation,
    LlamaCppBackend,
    OpenAIBackend,
    TransformersBackend,
    make_backend,
)
from mmir.llm.cache import GenerationCache, generation_key
from mmir.llm.client import LLMClient, Sampling
from mmir.llm.errors import GenerationFailure, LLMStageError, UnsupportedInputError
from mmir.llm.judged import JudgedMetric, JudgedValue, judge
from mmir.llm.parsers import (
    PARSERS,
    Parsed,
    ReplyParser,
    get_parser,
    parse_marked_answer,
)
from mmir.llm.policy import check_stage
from mmir.llm.prompts import PromptLibrary, PromptTemplate, load_prompt
from mmir.llm.records import CallRecord

__all__ = [
    "PARSERS", "Backend", "CallAudit", "CallRecord", "Generation", "GenerationCache", "GenerationFailure",
    "JudgedMetric", "JudgedValue", "LLMClient", "LLMStageError", "LlamaCppBackend", "OpenAIBackend", "Parsed",
    "PromptLibrary", "PromptTemplate", "ReplyParser", "Sampling", "TransformersBackend", "UnsupportedInputError",
    "Usage", "check_stage", "generation_key", "get_parser", "judge", "load_prompt", "make_backend",
    "parse_marked_answer",
]
