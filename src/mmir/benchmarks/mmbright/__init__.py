"""MM-BRIGHT's generative ablations: caption-augmented and LLM-reformulated queries (paper §5)."""

from pathlib import Path

PROMPTS_DIR = Path(__file__).parent / "prompts"


def load_prompt(name: str):
    """The versioned MM-BRIGHT prompt ``prompts/<name>.txt`` (``reformulate_v1``, ``caption_v1``)."""
    from mmir.llm.cache import load_prompt as _load

    return _load(name, PROMPTS_DIR)
