"""The prompt files of the RAG stage (``prompts/<name>.txt``): the answer prompt and the judge's two prompts."""

from pathlib import Path

from mmir.llm.prompts import PromptLibrary

RAG_PROMPTS = PromptLibrary(Path(__file__).parent / "prompts")
