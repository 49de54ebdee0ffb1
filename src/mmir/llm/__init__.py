"""The LLM layer: LLM/VLM backends behind one interface, a durable generation cache, prompt templates
and usage accounting.

* :mod:`mmir.llm.backends` -- ``Backend.generate(messages, ...) -> Generation`` for an
  OpenAI-compatible endpoint, a local GGUF via llama-cpp-python and a local Hugging Face model; ``make_backend``.
* :mod:`mmir.llm.cache` -- ``GenerationCache`` (SQLite, one committed row per generation),
  ``load_prompt`` for the versioned templates in ``prompts/``.
* :mod:`mmir.llm.accounting` -- ``Usage``: requests, failures, retries, tokens, latency, cost.
"""

from mmir.llm.accounting import Usage
from mmir.llm.backends import (
    Backend,
    Generation,
    GenerationFailure,
    LlamaCppBackend,
    OpenAIBackend,
    TransformersBackend,
    UnsupportedInputError,
    make_backend,
)
from mmir.llm.cache import (
    GenerationCache,
    PromptTemplate,
    generation_key,
    load_prompt,
    parse_marked_answer,
)

__all__ = [
    "Backend",
    "Generation",
    "GenerationCache",
    "GenerationFailure",
    "LlamaCppBackend",
    "OpenAIBackend",
    "PromptTemplate",
    "TransformersBackend",
    "UnsupportedInputError",
    "Usage",
    "generation_key",
    "load_prompt",
    "make_backend",
    "parse_marked_answer",
]
