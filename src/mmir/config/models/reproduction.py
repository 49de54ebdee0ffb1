"""The params slice of the ``reproduction`` job: the expected files and what each observed number ran under."""

from __future__ import annotations

from pydantic import Field

from mmir.config.models.base import Section
from mmir.config.models.datasets import SampleConfig
from mmir.config.models.evaluation import MlflowConfig


class ReproductionParams(Section):
    """Built by :mod:`mmir.workflow.rules.report` from the whole config."""

    expected: list[str] = Field(description="the expected files as configured (expected)")
    grids: list[str] = Field([], description="the ablation grids with a table")
    presets: dict[str, str | None] = Field(description="{system: its preset or None}")
    datasets: dict[str, str | None] = Field(description="{dataset: its hub repo_id or None}")
    samples: dict[str, SampleConfig | None] = Field(description="{dataset: its sample or None}")
    measure: str = Field(description="evaluation.primary_measure (the ablation grids' measure)")
    mlflow: MlflowConfig
