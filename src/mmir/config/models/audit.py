"""``audit``: the query and evidence quality audit of MM-BRIGHT §3 (an LLM judge rates each query with its positive
documents on four 1-5 Likert criteria; Appendix F). Absent, null or ``enabled: false`` = no audit stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mmir.config.models.base import Number, Section
from mmir.config.models.evaluation import MlflowConfig


class AuditConfig(Section):
    """Each query and its positive (Task 1 qrels) documents rated by the ``judge`` on Readability, Clarity, Evidence
    usefulness and Evidence sufficiency (1-5); per-domain means with t intervals, and the dataset mean."""

    enabled: bool = Field(True, description="false = the stage is off (as audit: null)")
    datasets: list[str] | None = Field(None, description="null = every dataset")
    judge: str = Field(description="a key of generators (the paper: GPT-4o)")
    prompt: str = Field("audit_v1", description="versioned prompt file in src/mmir/benchmarks/mmbright/prompts")
    parser: Literal["audit_likert", "audit_likert_json"] = Field(
        "audit_likert", description="reply parser: audit_likert = a JSON object or '<criterion>: <n>' lines; audit_likert_json = "
        "a JSON object only. Either rejects a reply missing a criterion or rating outside 1-5 (counted, never a default score)")
    max_queries: int = Field(0, ge=0, description="rate the first N queries with a positive document per domain; 0 = all")
    max_documents: int = Field(5, ge=1, description="positive documents shown per query (qrels order); the rest are counted as cut")
    document_chars: int = Field(1500, ge=100, description="cut of each shown document (characters)")
    query_chars: int = Field(4000, ge=100, description="cut of the query text (characters)")
    temperature: Number = Field(0.0, ge=0, description="sampling temperature of every judge call (0 = greedy)")
    max_tokens: int = Field(128, ge=1, description="reply limit of every judge call")
    seed: int | None = Field(0, description="sampling seed; null = none")


class AuditReportParams(Section):
    """The params slice of the ``audit_report`` job (built by :mod:`mmir.workflow.rules.audit`)."""

    audit: AuditConfig
    generator: dict = Field(description="the judge's generators entry, logged as it is")
    confidence: Number = Field(description="significance.confidence: the level of the t intervals")
    units: list[dict[str, str]] = Field(description="[{dataset, domain}] of the rating jobs, in order")
    mlflow: MlflowConfig
