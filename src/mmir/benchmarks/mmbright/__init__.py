"""MM-BRIGHT's generative ablations: caption-augmented and LLM-reformulated queries (paper §5)."""

from pathlib import Path

from mmir.llm.prompts import PromptLibrary

#: The versioned MM-BRIGHT prompts (``prompts/reformulate_v1.txt``, ``prompts/caption_v1.txt``).
MMBRIGHT_PROMPTS = PromptLibrary(Path(__file__).parent / "prompts")
