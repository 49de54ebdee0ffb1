"""The LLM layer: every model call of every benchmark goes through it (:class:`~mmir.llm.client.LLMClient`).

Modules: ``messages``, ``backends``, ``cache``, ``prompts``, ``parsers``, ``client``, ``records``/``audit``,
``judged``, ``policy``, ``accounting``, ``offline``. README: "Generative stages".
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
