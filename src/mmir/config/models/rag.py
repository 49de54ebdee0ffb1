"""``rag``: end-to-end RAG QA with an LLM judge (MM-BRIGHT section 5, Table 7). Absent = no RAG stage."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mmir.config.models.base import Number, Section, TaskName

RagSetting = Annotated[str, Field(pattern=r"^(none|oracle|topk:[A-Za-z0-9][A-Za-z0-9_.+:-]*)$")]


class RagConfig(Section):
    """Answers with no, oracle or retrieved evidence, judged against the reference answer."""

    datasets: list[str] | None = Field(None, description="null = every dataset")
    settings: list[RagSetting] = Field(["none", "oracle"], description="none, oracle, and topk:<system> for any system's run of `task`")
    task: TaskName = Field("task1", description="whose runs give the topk evidence")
    k: int = Field(5, ge=1, description="retrieved items per prompt (topk settings)")
    generator: str = Field(description="a key of generators")
    judge: str = Field(description="a key of generators (may be the generator)")
    judge_repeats: int = Field(1, ge=1, description="judgings per answer")
    max_queries: int | None = Field(None, ge=1, description="per domain; null = all with a reference answer")
    answer_max_tokens: int = Field(256, ge=1, description="reply limit of each answer")
    answer_temperature: Number = Field(0.0, ge=0, description="sampling temperature of the answers (0 = greedy)")
    judge_max_tokens: int = Field(64, ge=1, description="reply limit of each judge call")
    judge_temperature: Number = Field(0.0, ge=0, description="judge temperature of repeat 0 (0 = greedy)")
    judge_repeat_temperature: Number = Field(0.7, ge=0, description="judge temperature of repeats 1, 2, ... (sampled, seeded "
                                            "rag.seed + repeat)")
    evidence_chars: int = Field(6000, ge=200, description="evidence text budget per prompt (characters, shared by the pieces) so it "
                                "fits the context")
    seed: int = Field(0, description="sampling seed")
    images: bool = Field(False, description="send images as image parts (the generator must take images); false = their captions as text")
