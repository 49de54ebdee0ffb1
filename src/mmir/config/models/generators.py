"""``generators.<name>`` (LLM/VLM backends by ``backend``), ``captioners.<name>`` (by ``kind``) and
``reformulators.<name>``. A generator's keys are its backend's settings (mmir.llm.backends: the constructor takes the
model): the backend's ``DEFAULTS`` hold their defaults, so a key not given stays out of the filled config."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Tag

from mmir.config.models.base import Number, Section, tagged_by, unset


class Prices(Section):
    """Per-token prices for the cost column (any currency)."""

    prompt_per_token: Number | None = unset("price of one prompt token")
    completion_per_token: Number | None = unset("price of one completion token")


class _Generator(Section):
    prices: Prices | None = unset("per-token prices; null = no cost reported")


class OpenAIGenerator(_Generator):
    """An OpenAI-compatible chat endpoint (mmir.llm.backends.openai)."""

    backend: Literal["openai"] = Field(description="openai = an OpenAI-compatible chat endpoint")
    model: str = Field(description="model name at the endpoint")
    base_url: str | None = unset("endpoint .../v1; null = the OpenAI API")
    api_key_env: str | None = unset("NAME of the environment variable holding the key (never the key); null = an endpoint that "
                                    "needs no key (default OPENAI_API_KEY)")
    revision: str | None = unset("model version recorded with each call (the endpoint's snapshot name)")
    timeout_s: Number | None = unset("per-attempt timeout (default 60.0)")
    max_concurrency: int | None = unset("requests in flight at once (default 4)")
    max_retries: int | None = unset("retries on timeouts, connection errors, 429 and 5xx (default 5)")
    backoff_base_s: Number | None = unset("first retry delay (doubles per retry) (default 1.0)")
    backoff_max_s: Number | None = unset("longest retry delay (default 30.0)")
    max_retry_after_s: Number | None = unset("longest Retry-After honoured; longer fails the call (default 120.0)")
    max_tokens_param: str | None = unset("name of the reply-limit parameter, max_completion_tokens for o-series (default max_tokens)")
    extra_body: dict[str, Any] | None = unset("extra JSON fields of every request")


class LlamaCppGenerator(_Generator):
    """A GGUF model in-process (mmir.llm.backends.llama_cpp)."""

    backend: Literal["llama_cpp"] = Field(description="llama_cpp = a GGUF model through llama-cpp-python")
    model_path: str | None = unset("GGUF file; null = the offline Qwen2.5 0.5B GGUF")
    cache_dir: str | None = unset("where hub downloads go")
    hf_repo: str | None = unset("hub repository of the GGUF file")
    hf_file: str | None = unset("file name in hf_repo")
    n_ctx: int | None = unset("context window in tokens (default 4096)")
    n_threads: int | None = unset("CPU threads; null = the job's threads (resources.<rule>.threads), else llama.cpp's choice")
    n_gpu_layers: int | None = unset("layers offloaded to the GPU (default 0)")
    chat_format: str | None = unset("chat template name; null = the GGUF's")
    model_id: str | None = unset("name recorded with each call; null = the file name")
    verbose: bool | None = unset("llama.cpp's own log (default False)")


class TransformersGenerator(_Generator):
    """A transformers model in-process (mmir.llm.backends.transformers)."""

    backend: Literal["transformers"] = Field(description="transformers = a hub model through transformers")
    model: str = Field(description="hub id or local path")
    revision: str | None = unset("hub revision (pin a commit)")
    gguf_file: str | None = unset("a GGUF file in the repository")
    vision: bool | None = unset("the model takes images; null = detected")
    device: str | None = unset("null = cuda when present, else cpu")
    dtype: str | None = unset("torch dtype name; null = the model's")
    local_files_only: bool | None = unset("never download; null = HF_HUB_OFFLINE decides")
    trust_remote_code: bool | None = unset("run the model repository's own code (default False)")
    model_id: str | None = unset("name recorded with each call; null = model")



Generator = Annotated[
    Annotated[OpenAIGenerator, Tag("backend=openai")] | Annotated[LlamaCppGenerator, Tag("backend=llama_cpp")]
    | Annotated[TransformersGenerator, Tag("backend=transformers")],
    tagged_by("backend", "openai", "llama_cpp", "transformers"),
]


class OCRCaptioner(Section):
    """Image text by OCR (RapidOCR's PP-OCRv4 models on OpenVINO or onnxruntime, or Tesseract; offline), sharded and run
    on the job's threads."""

    kind: Literal["ocr"] = Field(description="ocr = an OCR engine (see engine)")
    min_score: Number = Field(0.5, ge=0, le=1, description="drop OCR lines scored lower")
    engine: Literal["rapidocr", "tesseract"] = Field("rapidocr", description="rapidocr = PP-OCRv4 ONNX models; tesseract = the "
                                                     "tesseract binary through pytesseract (faster, its text differs)")
    device: Literal["cpu", "cuda"] | None = Field(None, description="rapidocr: onnxruntime provider; null = cuda when "
                                                  "onnxruntime offers it, else cpu (cuda asked but absent: cpu, logged)")
    lang: str = Field("eng", description="tesseract: language models, e.g. eng+deu")
    runtime: Literal["openvino", "onnxruntime"] = Field("openvino", description="rapidocr on cpu: what runs its ONNX models; "
                                                        "openvino (float32) reads the same text 1.7x faster (on cuda: onnxruntime)")
    shard_size: int = Field(500, ge=1, description="corpus images per OCR job (query images: one job)")


class VLMCaptioner(Section):
    """Image text by a generator that takes images, with a detailed-description prompt."""

    kind: Literal["vlm"] = Field(description="vlm = a generator that takes images")
    generator: str = Field(description="a key of generators (its backend must take images)")
    prompt: str = Field("caption_v1", description="versioned prompt file in src/mmir/benchmarks/mmbright/prompts")
    max_tokens: int = Field(256, ge=1, description="reply limit of each caption")
    temperature: Number = Field(0.0, ge=0, description="sampling temperature (0 = greedy)")
    seed: int | None = Field(0, description="sampling seed; null = none")



Captioner = Annotated[
    Annotated[OCRCaptioner, Tag("kind=ocr")] | Annotated[VLMCaptioner, Tag("kind=vlm")],
    tagged_by("kind", "ocr", "vlm"),
]


class ReformulatorConfig(Section):
    """An LLM query reformulator (MM-BRIGHT section 5, Figure 14)."""

    generator: str = Field(description="a key of generators")
    prompt: str = Field("reformulate_v1", description="versioned prompt file in src/mmir/benchmarks/mmbright/prompts")
    image_text: str = Field("ocr", description="captioner describing the query images to the LLM")
    max_tokens: int = Field(256, ge=1, description="reply limit of each reformulation")
    temperature: Number = Field(0.0, ge=0, description="sampling temperature (0 = greedy)")
    seed: int | None = Field(0, description="sampling seed; null = none")
