"""``Params``: the whole of params.yaml (Snakemake's configfile and DVC's params), one field per section."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, create_model

from mmir.config.models.audit import AuditConfig
from mmir.config.models.base import Name, Section, SystemName, TaskName
from mmir.config.models.datasets import Dataset
from mmir.config.models.essentiality import EssentialityConfig
from mmir.config.models.evaluation import AblationsConfig, EncodingConfig, EvaluationConfig, MlflowConfig, PathsConfig
from mmir.config.models.generators import Captioner, Generator, OCRCaptioner, ReformulatorConfig
from mmir.config.models.m2rag import M2RAGConfig
from mmir.config.models.mmdr import MMDRConfig
from mmir.config.models.mteb import MTEBConfig
from mmir.config.models.rag import RagConfig
from mmir.config.models.rerank import RerankConfig, Reranker
from mmir.config.models.resources import ResourcesConfig
from mmir.config.models.significance import SignificanceConfig
from mmir.config.models.systems import System

Measure = Annotated[str, Field(pattern=r"^(nDCG@[0-9]+|R@[0-9]+|Recall@[0-9]+|P@[0-9]+|MAP|MRR)$")]
MEASURES = ["nDCG@10", "nDCG@1", "nDCG@5", "nDCG@25", "nDCG@50", "nDCG@100", "Recall@1", "Recall@5", "Recall@10", "Recall@25",
            "Recall@50", "Recall@100", "MAP", "P@1", "P@5", "P@10", "MRR"]


class Params(Section):
    """The single config of the project, validated (and defaults filled) by mmir.config before any job starts."""

    datasets: dict[Name, Dataset] = Field(min_length=1, description="named datasets; each is prepared per domain into "
                                          "data/prepared/<dataset>/<domain>/")
    tasks: list[TaskName] = Field(
        ["task1"], min_length=1, description="MM-BRIGHT tasks: task1 text query -> documents; task2 text+image -> documents; task3 "
        "text+image -> corpus images; task4 text+image -> (document, image) pairs (tasks 2-4 on datasets with query images)")
    systems: dict[SystemName, System] = Field(min_length=1, description="named retrieval systems")
    measures: list[Measure] = Field(MEASURES, description="measures by name (nDCG@k, R@k / Recall@k, P@k, MAP, MRR), computed with "
                                    "pytrec_eval")
    evaluation: EvaluationConfig = Field(EvaluationConfig(), description="how runs are scored")
    captioners: dict[Name, Captioner] = Field({"ocr": OCRCaptioner(kind="ocr")}, description="image -> text captioners by name: "
                                              "ocr (rapidocr-onnxruntime, offline) or vlm (a generator that takes images)")
    generators: dict[Name, Generator] = Field({}, description="LLM/VLM backends by name: {backend: openai | llama_cpp | "
                                              "transformers, ...constructor settings}")
    reformulators: dict[Name, ReformulatorConfig] = Field({}, description="LLM query reformulators by name (MM-BRIGHT section 5, "
                                                          "Figure 14)")
    ablations: AblationsConfig = Field(AblationsConfig(), description="Task 1 grids: caption-augmented and reformulated queries")
    rag: RagConfig | None = Field(None, description="end-to-end RAG QA with an LLM judge; absent = no RAG stage")
    m2rag: M2RAGConfig | None = Field(None, description="M2RAG; absent = no M2RAG stage")
    mmdr: MMDRConfig | None = Field(None, description="MMDeepResearch-Bench; absent = no MMDR stage")
    essentiality: EssentialityConfig | None = Field(None, description="image essentiality and image types; absent = no "
                                                    "essentiality stage")
    audit: AuditConfig | None = Field(None, description="the quality audit of queries and their positive documents (MM-BRIGHT "
                                      "section 3); absent = no audit stage")
    encoding: EncodingConfig = Field(EncodingConfig(), description="the encode stage")
    resources: ResourcesConfig = Field(ResourcesConfig(), description="scheduling resources per rule")
    paths: PathsConfig = Field(PathsConfig(), description="caches")
    significance: SignificanceConfig = Field(SignificanceConfig(), description="intervals and tests in every table")
    expected: list[str] = Field([], description="files of expected scores checked by the `reproduction` rule (relative to the "
                                "project directory, else to the package's workflow: expected/mm-bright-paper.yaml holds the "
                                "paper's published values); empty = no reproduction stage")
    mlflow: MlflowConfig = Field(MlflowConfig(), description="experiment tracking")
    rerankers: dict[Name, Reranker] = Field({}, description="second-stage rerankers by name: {kind: cross-encoder | llm-pointwise | "
                                            "llm-listwise | vlm, ...} or {backend: plugin, factory, options}")
    rerank: RerankConfig = Field(RerankConfig(), description="which first-stage runs are reranked (<system>+rr:<reranker> systems)")
    mteb: MTEBConfig = Field(MTEBConfig(), description="MTEB result files: written after scoring, and published ones read into "
                             "the task tables as reference rows")


#: a job's params slice made of whole sections of :class:`Params` (e.g. ``{"rag": ..., "generators": ..., "mlflow":
#: ...}``): each section given is validated as in Params, each other one is ``None``
ParamsSlice = create_model("ParamsSlice", __base__=Section, __doc__="Some sections of Params (a job's params slice).",
                           **{name: (field.annotation | None, None) for name, field in Params.model_fields.items()})
