"""``mmdr``: MMDeepResearch-Bench on the project's data (spec shared/specs/mmdr-bench.md). Absent = no MMDR stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mmir.config.models.base import Number, Section, TaskName
from mmir.config.models.mmdr_evaluator import EngineConfig, MMDREvaluatorConfig, MosaicConfig, TraceConfig, VEFConfig

ImageText = Literal["caption", "alt"]


class MMDRConfig(Section):
    """Tasks from queries with images, cited reports by a retrieve-then-write baseline, scored end to end (FLAE, TRACE
    with VEF, MOSAIC) by an LLM judge with every call audited."""

    enabled: bool = Field(True, description="false = the stage is off (as mmdr: null)")
    datasets: list[str] | None = Field(None, description="null = every dataset whose queries can have images")
    max_tasks: int | None = Field(2, ge=1, description="per domain: the first N queries (topic order) with at least one image; null = all")
    task: TaskName = Field("task1", description="whose run gives the baseline's sources")
    system: str = Field("bm25", description="a key of systems: the run of mmdr.task the baseline reads")
    k: int = Field(5, ge=1, description="sources per report: the first k run items")
    generator: str = Field(description="a key of generators: writes the reports")
    judge: str = Field(description="a key of generators: every judge call of the evaluator (may be the generator)")
    image_text: list[ImageText] = Field(["caption"], description="what stands for the question's images in the writer's prompt: "
                                        "caption = the captioner of evaluation.image_text (OCR), alt = the dataset's alt text "
                                        "(also the VEF ground truth: with alt, VEF measures restating, not perception)")
    images: bool = Field(False, description="also attach the question's images as image parts (the generator must take images)")
    evidence_chars: int = Field(6000, ge=200, description="source text budget of the writer's prompt (characters, shared by the sources)")
    report_max_tokens: int = Field(700, ge=1, description="reply limit of each report")
    posthoc_citations: bool = Field(True, description="add post-hoc citations to the model's uncited sentences (best-covering source "
                                    "by stemmed word overlap; Figure i / image cues -> the figure), counted apart")
    posthoc_min_overlap: Number = Field(0.3, ge=0, le=1, description="share of a sentence's content words a source must contain to "
                                        "be attached")
    report_temperature: Number = Field(0.0, ge=0, description="0 = greedy (the spec's agents use 0.7)")
    judge_max_tokens: int = Field(512, ge=1, description="judge output limit per call (the spec's judges: 4096)")
    judge_images: Literal["text", "image"] = Field(
        "text", description="how images reach the judge (MOSAIC engines; VEF when evaluator.vef.attach_images): text = as their "
        "description (judge_image_text), for text-only judges; image = as image parts, for vision judges")
    judge_image_text: list[ImageText] = Field(["caption", "alt"], description="description sources of images shown to a text-only judge")
    seed: int = Field(0, description="sampling seed")
    evaluator: MMDREvaluatorConfig = Field(
        MMDREvaluatorConfig(trace=TraceConfig(schemes=("http", "https", "file", "mmir")), vef=VEFConfig(attach_images=False),
                            mosaic=MosaicConfig(engines=EngineConfig(vqa_mode="text"))),
        description="the evaluator's settings (every constant of the spec, e.g. min_report_chars, gate, trace.max_pairs, "
        "vef.strict, mosaic.routing); trace.schemes must include mmir")
