"""LLM / VLM backends behind one interface (:class:`~mmir.llm.backends.base.Backend`).

* :mod:`~mmir.llm.backends.base` -- ``Backend.generate(messages, ...) -> Generation``;
* :mod:`~mmir.llm.backends.openai` -- any OpenAI-compatible endpoint;
* :mod:`~mmir.llm.backends.llama_cpp` -- a local GGUF (default: the offline Qwen2.5-Coder-0.5B);
* :mod:`~mmir.llm.backends.transformers` -- a local Hugging Face LM or VLM;
* :mod:`~mmir.llm.backends.factory` -- ``make_backend(cfg)`` and the config checks.

The message helpers of :mod:`mmir.llm.messages` and the errors of :mod:`mmir.llm.errors` are re-exported here.
"""

from mmir.llm.backends.base import SAMPLING_KEYS, Backend, Generation
from mmir.llm.backends.factory import BACKENDS, as_generator, backend_class, given_settings, make_backend
from mmir.llm.backends.llama_cpp import LlamaCppBackend
from mmir.llm.backends.openai import OpenAIBackend
from mmir.llm.backends.transformers import TransformersBackend
from mmir.llm.errors import GenerationFailure, UnsupportedInputError
from mmir.llm.messages import (
    Message,
    canonical_messages,
    has_images,
    image_to_bytes,
    messages_sha256,
    text_only_messages,
    validate_messages,
)

__all__ = [
    "BACKENDS", "Backend", "Generation", "GenerationFailure", "LlamaCppBackend", "Message", "OpenAIBackend",
    "SAMPLING_KEYS", "TransformersBackend", "UnsupportedInputError", "as_generator", "backend_class", "canonical_messages",
    "given_settings", "has_images", "image_to_bytes", "make_backend", "messages_sha256", "text_only_messages",
    "validate_messages",
]
