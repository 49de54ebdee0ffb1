"""``essentiality``: image essentiality and image types (MM-BRIGHT section 3.3-3.4, Figures 3, 4, 6, Appendix Tables
16-23). Absent or null = no essentiality stage."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mmir.config.models.base import MultimodalTask, Number, Section
from mmir.config.models.evaluation import MlflowConfig


class EssentialityConfig(Section):
    """Each query's images labelled Essential / Helpful / Redundant and each image one of eight types, by the
    ``classifier`` (through the generation cache) or from a ``labels`` file; then the per-domain distributions and
    every system's ``task`` score by class."""

    datasets: list[str] | None = Field(None, description="null = every dataset; domains without query images are skipped with a note")
    task: MultimodalTask = Field("task2", description="whose per-query scores are broken down (must be in tasks)")
    systems: list[str] | None = Field(None, description="systems of the table; null = every system of `task`; [] = the stage is off")
    classifier: str | None = Field(None, description="a key of generators (required unless `labels` is set)")
    labels: str | None = Field(None, description="a labels file (.csv, .tsv or .parquet) instead of the classifier: columns "
                               "query_id, essentiality, optional image_path, image_type, dataset, domain")
    prompt: str = Field("essentiality_v1", description="versioned prompt file in src/mmir/benchmarks/mmbright/prompts")
    type_prompt: str = Field("image_type_v1", description="versioned prompt file of the image-type call")
    images: bool = Field(False, description="also attach the image bytes (the classifier must take images); false = OCR + alt text only")
    max_queries: int = Field(0, ge=0, description="label the first N queries with images per domain; 0 = all")
    text_chars: int = Field(1500, ge=50, description="cut of each image's OCR and alt text (the query: twice this)")
    temperature: Number = Field(0.0, ge=0, description="sampling temperature of every labelling call (0 = greedy)")
    max_tokens: int = Field(48, ge=1, description="reply limit of every labelling call")
    seed: int | None = Field(0, description="sampling seed; null = none")


class EssentialityStepConfig(EssentialityConfig):
    """``essentiality`` as the label and report jobs get it: with the captioner whose OCR text the labels read."""

    image_text: str | None = Field(None, description="evaluation.image_text; absent on the labels-file route (no model reads it)")


class EssentialityReportParams(Section):
    """The params slice of the ``essentiality_report`` job (built by :mod:`mmir.workflow.rules.essentiality`)."""

    essentiality: EssentialityStepConfig
    task: MultimodalTask = Field(description="essentiality.task")
    generator: dict[str, Any] | None = Field(description="the classifier's generators entry, logged as it is; None with labels")
    measure: str = Field(description="evaluation.primary_measure")
    units: list[dict[str, str]] = Field(description="[{dataset, domain}] of the label jobs, in order")
    systems: dict[str, list[str]] = Field(description="per dataset, the systems whose per-query scores are broken down")
    skipped: list[str] = Field(description="'<dataset>/<domain>: why' of each domain left out")
    mlflow: MlflowConfig
    untrained: list[str] = Field(description="systems labelled untrained")
