"""``rerankers.<name>`` (second-stage models, by ``kind``) and ``rerank`` (which first-stage runs they rerank).

A rerank run ``{system, reranker, depth}`` makes the system ``<system>+rr:<reranker>``: the top ``depth`` items of the
first-stage run reordered, scored and tabulated like any system (:mod:`mmir.retrieval.rerank`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from mmir.config.models.base import Name, Number, Section, SystemName, TaskName, unset
from mmir.config.models.plugins import PluginFields


class CrossEncoderReranker(Section):
    """A sentence-transformers ``CrossEncoder`` scoring each (query, candidate) pair (mmir.retrieval.rerank.cross_encoder)."""

    kind: Literal["cross-encoder"] = Field(description="cross-encoder = sentence-transformers CrossEncoder")
    preset: str | None = unset("the reranker preset this entry expands (src/mmir/config/reranker_presets.yaml)")
    model: str = Field(description="hub id, local path, or pypi:<package> of the cross-encoder (or of its architecture, "
                       "with random_init)")
    backend: Literal["sentence-transformers", "mxbai-rerank"] = Field(
        "sentence-transformers", description="sentence-transformers CrossEncoder, or the mxbai-rerank package (mxbai-rerank "
        "v2: a Qwen2 causal LM scored by its template's '1'/'0' logits)")
    instruction: str | None = unset("instruction put before the query (mxbai-rerank only)")
    revision: str | None = unset("hub revision (pin a commit)")
    max_length: int = Field(512, ge=8, description="tokens of query + candidate; longer pairs are truncated (counted)")
    batch_size: int = Field(32, ge=1, description="pairs per forward pass")
    device: str | None = unset("torch device; null = cuda when present, else cpu")
    fp16: bool = Field(True, description="half precision on CUDA (ignored on CPU)")
    runtime: Literal["torch", "onnx", "openvino"] = Field(
        "torch", description="torch (sentence-transformers CrossEncoder, or mxbai-rerank); onnx (ONNX Runtime) or openvino "
        "(OpenVINO) on the CPU, from the folder's own ONNX file or a cached export of its weights (sentence-transformers "
        "backend; mmir.retrieval.rerank.onnx_cross_encoder)")
    quantization: Literal["int8"] | None = unset("runtime onnx/openvino: int8 = int8 weights (a folder's own int8 ONNX file, "
                                                 "or ONNX Runtime's dynamic int8 quantisation of the export); null = float32")
    trust_remote_code: bool = Field(False, description="run the model repository's own code")
    local_files_only: bool | None = unset("never download; null = HF_HUB_OFFLINE decides")
    random_init: bool = Field(False, description="random weights of the model's architecture (tests; tables say untrained)")
    seed: int = Field(0, description="seed of random_init")

    @model_validator(mode="after")
    def _runtime_keys(self):
        if self.runtime != "torch" and (self.backend != "sentence-transformers" or self.random_init):
            raise ValueError(f"runtime {self.runtime} runs a sentence-transformers cross-encoder's trained weights (not "
                             "backend mxbai-rerank, not random_init)")
        if self.runtime == "torch" and self.quantization:
            raise ValueError("quantization only with runtime onnx or openvino")
        return self


class _LLMReranker(Section):
    generator: str = Field(description="a key of generators")
    max_tokens: int = Field(256, ge=1, description="reply limit of each call")
    temperature: Number = Field(0.0, ge=0, description="sampling temperature (0 = greedy)")
    seed: int | None = Field(0, description="sampling seed; null = none")
    max_chars: int = Field(2000, ge=50, description="characters of a candidate's text in the prompt (cuts counted)")
    query_chars: int = Field(4000, ge=50, description="characters of the query's text in the prompt (cuts counted)")


class _Windows(Section):
    window: int = Field(20, ge=2, description="candidates per listwise call (RankGPT window)")
    step: int = Field(10, ge=1, description="how far the window slides toward the top each time")
    passes: int = Field(1, ge=1, description="bottom-to-top sweeps over the depth")

    @model_validator(mode="after")
    def _step_within_window(self):
        if self.step > self.window:
            raise ValueError(f"step ({self.step}) must not exceed window ({self.window}): candidates would be skipped")
        return self


class PointwiseReranker(_LLMReranker):
    """A relevance score per (query, candidate) from a prompt through the LLM layer."""

    kind: Literal["llm-pointwise"] = Field(description="llm-pointwise = one scored call per candidate")
    prompt: str = Field("rerank_pointwise_v1", description="versioned prompt file in src/mmir/retrieval/rerank/prompts")
    score: Literal["reply", "logprobs"] = Field("reply", description="reply = the grade written in the reply; logprobs = the "
                                                "expected grade sum_g g*p(g) from the grade tokens' probabilities where the "
                                                "grade is written (backends llama_cpp, openai)")
    top_logprobs: int = Field(20, ge=5, le=20, description="alternatives asked for at each reply token (score: logprobs); "
                              "a grade outside them counts as probability 0")


class ListwiseReranker(_LLMReranker, _Windows):
    """RankGPT-style sliding windows: each call returns a permutation of its window."""

    kind: Literal["llm-listwise"] = Field(description="llm-listwise = RankGPT sliding windows")
    prompt: str = Field("rerank_listwise_v1", description="versioned prompt file in src/mmir/retrieval/rerank/prompts")
    max_tokens: int = Field(512, ge=1, description="reply limit of each call")


class VLMReranker(_LLMReranker, _Windows):
    """The pointwise or listwise prompt with the query's images (and a candidate image, Tasks 3-4) through a generator
    that takes images."""

    kind: Literal["vlm"] = Field(description="vlm = pointwise or listwise with images")
    mode: Literal["pointwise", "listwise"] = Field("pointwise", description="pointwise scores or listwise windows")
    prompt: str | None = unset("prompt file; null = rerank_pointwise_v1 / rerank_listwise_v1 by mode")
    query_images: int = Field(4, ge=0, description="most query images sent, in query order (cuts counted)")
    candidate_images: bool = Field(True, description="send a candidate's image (Tasks 3-4)")
    image_side: int = Field(512, ge=32, description="longest side of a sent image in pixels (thumbnailed)")


class PluginReranker(PluginFields):
    """A Python plug-in scoring each query's candidates (mmir.encoders.plugins.RerankerPlugin; mmir.retrieval.rerank.plugin)."""

    kind: Literal["plugin"] = Field("plugin", description="plugin = a Python plug-in (set by backend: plugin; may be left out)")


RERANKER_KINDS = ("cross-encoder", "llm-pointwise", "llm-listwise", "vlm", "plugin")


def _reranker_tag(d: object) -> str | None:
    """``kind=<kind>``; ``backend: plugin`` is the plug-in kind whatever ``kind`` says (its own check names a wrong one)."""
    get = d.get if isinstance(d, dict) else lambda k: getattr(d, k, None)
    if get("backend") == "plugin":
        return "kind=plugin"
    return f"kind={get('kind')}" if get("kind") in RERANKER_KINDS else None


Reranker = Annotated[
    Annotated[CrossEncoderReranker, Tag("kind=cross-encoder")] | Annotated[PointwiseReranker, Tag("kind=llm-pointwise")]
    | Annotated[ListwiseReranker, Tag("kind=llm-listwise")] | Annotated[VLMReranker, Tag("kind=vlm")]
    | Annotated[PluginReranker, Tag("kind=plugin")],
    Discriminator(_reranker_tag, custom_error_type="bad_tag:kind", custom_error_message="kind must be one of: "
                  f"{', '.join(RERANKER_KINDS)} (plugin: give backend: plugin)"),
]


class RerankRun(Section):
    """One second stage: ``reranker`` over the top ``depth`` of ``system``'s runs."""

    system: SystemName = Field(description="the first-stage system (a key of systems, or an ablation system; a reranked one is refused)")
    reranker: Name = Field(description="a key of rerankers")
    depth: int = Field(100, ge=1, description="items of each query's first-stage ranking reranked, at most evaluation.top_k (the rest keep "
                       "their order)")
    tasks: list[TaskName] | None = Field(None, description="tasks reranked; null = every task the system runs (an "
                                         "ablation system takes none: it runs on its grid's Task 1 queries)")
    datasets: list[Name] | None = Field(None, description="datasets reranked; null = every dataset the system runs on")


class RerankConfig(Section):
    """Second-stage reranking (``<system>+rr:<reranker>`` systems)."""

    runs: list[RerankRun] = Field([], description="(system, reranker, depth) triples; each makes <system>+rr:<reranker>")
