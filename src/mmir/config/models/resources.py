"""``resources``: scheduling resources per rule (threads, mem_mb, runtime in minutes, gpu), read by every rule that
loads a model and used by cluster profiles (pipeline/profiles/)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from mmir.config.models.base import Section, unset


class JobResources(Section):
    """Resources of one job; a key not given falls back to the rule's (or Snakemake's) value."""

    threads: int | None = unset("CPU threads", ge=1)
    mem_mb: int | None = unset("memory in MB", ge=1)
    runtime: int | None = unset("minutes", ge=1)
    gpu: int | None = unset("GPUs", ge=0)


def _job(threads: int, mem_mb: int, runtime: int, gpu: int) -> JobResources:
    return JobResources(threads=threads, mem_mb=mem_mb, runtime=runtime, gpu=gpu)


class ResourcesConfig(Section):
    """Per-rule resources; a system's own ``resources`` override those of its encode and retrieve jobs."""

    default: JobResources = Field(_job(1, 2000, 30, 0), description="every rule not listed here")
    prepare: JobResources = Field(_job(1, 8000, 60, 0), description="prepare one dataset domain")
    caption: JobResources = Field(_job(1, 4000, 120, 0), description="gather one domain's OCR shards, or caption its images "
                                  "with a VLM captioner (a server: its max_concurrency, not threads)")
    ocr: JobResources = Field(_job(2, 4000, 120, 0), description="OCR one shard of a domain's images (one process a thread)")
    encode: JobResources = Field(_job(4, 16000, 60, 1), description="encode one shard")
    retrieve: JobResources = Field(_job(2, 8000, 60, 0), description="search one task, dataset and system")
    reformulate: JobResources = Field(_job(2, 8000, 120, 0), description="reformulate the queries of one domain")
    rag: JobResources = Field(_job(2, 8000, 120, 0), description="RAG answers and judgements")
    m2rag_kb: JobResources = Field(_job(2, 8000, 120, 0), description="M2RAG knowledge bases")
    m2rag_answer: JobResources = Field(_job(2, 8000, 120, 0), description="M2RAG answers and judgements")
    mmdr_reports: JobResources = Field(_job(2, 8000, 120, 0), description="MMDR reports")
    mmdr_score: JobResources = Field(_job(2, 8000, 120, 0), description="MMDR scoring")
    essentiality: JobResources = Field(_job(2, 8000, 120, 0), description="image essentiality labels")
    audit: JobResources = Field(_job(2, 8000, 120, 0), description="quality audit ratings of one domain")
    rerank: JobResources = Field(_job(2, 8000, 120, 0), description="rerank one first-stage run of one domain")

    @model_validator(mode="before")
    @classmethod
    def _keep_rule_defaults(cls, data: Any) -> Any:
        # `encode: {threads: 1}` changes the threads only: the rule's other defaults (a GPU, 16 GB) stay
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, given in data.items():
            field = cls.model_fields.get(name)
            if field is not None and isinstance(given, dict):
                out[name] = {**field.default.model_dump(exclude_none=True), **{k: v for k, v in given.items() if v is not None}}
        return out
