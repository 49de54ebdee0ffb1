"""The typed config: pydantic models of every section and variant of params.yaml. Each field is a setting's one
definition, one default and one line of documentation; pipeline/schemas/params.schema.yaml is generated from
:class:`Params` (``python -m mmir.config.schema --write``). Parse a dict with :mod:`mmir.config.parse`."""

from mmir.config.models.audit import AuditConfig, AuditReportParams
from mmir.config.models.base import Section, default_of, fill, partial
from mmir.config.models.datasets import (
    BeirDataset,
    BrightDataset,
    Dataset,
    HubDataset,
    IntegrityConfig,
    IrDatasetsDataset,
    LocalDataset,
    SampleConfig,
    TrecDataset,
)
from mmir.config.models.essentiality import EssentialityConfig, EssentialityReportParams
from mmir.config.models.evaluation import (
    AblationsConfig,
    CaptionGrid,
    EncodingConfig,
    EvaluationConfig,
    MlflowConfig,
    PathsConfig,
    ReformulationGrid,
)
from mmir.config.models.generators import (
    Captioner,
    Generator,
    LlamaCppGenerator,
    OCRCaptioner,
    OpenAIGenerator,
    Prices,
    ReformulatorConfig,
    TransformersGenerator,
    VLMCaptioner,
)
from mmir.config.models.m2rag import DevsetConfig, M2RAGConfig, SelectionConfig
from mmir.config.models.mmdr import MMDRConfig
from mmir.config.models.mmdr_evaluator import (
    ControllerConfig,
    EngineConfig,
    FetchConfig,
    FLAEConfig,
    MMDREvaluatorConfig,
    MosaicConfig,
    TraceConfig,
    VEFConfig,
)
from mmir.config.models.mteb import MTEBConfig, MTEBReference
from mmir.config.models.params import Params, ParamsSlice
from mmir.config.models.plugins import PLUGIN_GROUP, PluginFields
from mmir.config.models.rag import RagConfig
from mmir.config.models.reproduction import ReproductionParams
from mmir.config.models.rerank import (
    CrossEncoderReranker,
    ListwiseReranker,
    PluginReranker,
    PointwiseReranker,
    RerankConfig,
    Reranker,
    RerankRun,
    VLMReranker,
)
from mmir.config.models.resources import JobResources, ResourcesConfig
from mmir.config.models.significance import SignificanceConfig
from mmir.config.models.systems import (
    MULTI_IMAGE_ENCODERS,
    BM25System,
    ColBERTSystem,
    ColPaliSystem,
    DensePluginSystem,
    DenseSystem,
    DenseSystemBase,
    EmbeddingsAPISystem,
    HFTextSystem,
    MMPluginSystem,
    MMSystem,
    MTEBSystem,
    MultiVectorPluginSystem,
    MultiVectorSystem,
    MultiVectorSystemBase,
    SentenceTransformersSystem,
    System,
)
from mmir.config.parse import parse


def parse_system(d, key: str = "systems", file: str | None = None) -> System:
    """A ``systems.<name>`` entry as a :data:`System` (BM25System, a dense system, MMSystem, a multivector system)."""
    return parse(System, d, key, file)


def parse_dataset(d, key: str = "datasets", file: str | None = None) -> Dataset:
    """A ``datasets.<name>`` entry as a :data:`Dataset` (one model per ``source``)."""
    return parse(Dataset, d, key, file)


def parse_params(config: dict, file: str | None = None) -> Params:
    """The whole config as :class:`Params` (nulls dropped and presets expanded beforehand)."""
    return parse(Params, config, "", file)


def parse_slice(params: dict) -> ParamsSlice:
    """A job's params slice of whole :class:`Params` sections as a :class:`ParamsSlice` (absent sections ``None``)."""
    return parse(ParamsSlice, params, "")


__all__ = [
    "AblationsConfig", "AuditConfig", "AuditReportParams",
    "BM25System", "Captioner", "CaptionGrid", "ControllerConfig", "Dataset", "default_of",
    "DenseSystem", "DenseSystemBase", "DevsetConfig", "EmbeddingsAPISystem", "EncodingConfig", "EngineConfig",
    "EssentialityConfig", "EssentialityReportParams", "EvaluationConfig", "FetchConfig", "fill", "FLAEConfig",
    "Generator", "HFTextSystem", "HubDataset", "IntegrityConfig", "JobResources", "LlamaCppGenerator", "LocalDataset",
    "M2RAGConfig", "MlflowConfig", "MMDRConfig", "MMDREvaluatorConfig", "MMSystem", "MosaicConfig", "MULTI_IMAGE_ENCODERS", "OCRCaptioner",
    "MTEBConfig", "MTEBReference", "MTEBSystem",
    "OpenAIGenerator", "Params", "ParamsSlice", "parse", "partial", "parse_dataset", "parse_params", "parse_slice", "parse_system",
    "PathsConfig", "Prices", "RagConfig", "ReformulationGrid", "ReformulatorConfig", "ReproductionParams",
    "ResourcesConfig", "SampleConfig", "Section", "SelectionConfig", "SentenceTransformersSystem", "SignificanceConfig",
    "System", "TraceConfig", "TransformersGenerator", "TrecDataset", "VEFConfig", "VLMCaptioner",
    "BeirDataset", "BrightDataset", "IrDatasetsDataset",
    "ColPaliSystem", "MultiVectorSystem", "MultiVectorSystemBase", "ColBERTSystem",
    "CrossEncoderReranker", "ListwiseReranker", "PointwiseReranker", "RerankConfig", "Reranker", "RerankRun", "VLMReranker",
    "DensePluginSystem", "MMPluginSystem", "MultiVectorPluginSystem", "PLUGIN_GROUP", "PluginFields", "PluginReranker",
    "PLUGIN_SYSTEMS",
]

#: the system classes of ``backend: plugin`` (``isinstance(s, PLUGIN_SYSTEMS)``)
PLUGIN_SYSTEMS = (DensePluginSystem, MMPluginSystem, MultiVectorPluginSystem)
