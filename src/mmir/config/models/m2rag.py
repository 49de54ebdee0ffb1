"""``m2rag``: M2RAG (shared/specs/m2rag.md) on the project's data. Absent = no M2RAG stage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mmir.config.models.base import DocumentTask, Number, Section


class SelectionConfig(Section):
    """Thresholds and caps of spec §2.2-3 (defaults = the released configs)."""

    max_pages: int | None = Field(None, ge=1, description="pages kept per knowledge base; null = all")
    min_chunk_score: Number = Field(3, description="passages scored below this are dropped")
    max_chunks_per_page: int | None = Field(20, ge=1, description="passages kept per page; null = all")
    min_image_score: Number = Field(3, description="images scored below this are dropped")
    max_images_per_page: int | None = Field(5, ge=0, description="images kept per page; null = all")
    max_aux_images: int | None = Field(5, ge=0, description="auxiliary images kept; null = all")
    max_images: int | None = Field(10, ge=0, description="images kept per knowledge base; null = all")
    thumbnail_size: int = Field(512, ge=16, description="longest side of an image sent to a model (pixels)")
    min_pixel_area: int = Field(10000, ge=0, description="smaller images are dropped (pixels)")
    max_pixel_area: int = Field(4000000, ge=1, description="larger images are dropped (pixels)")
    min_file_bytes: int = Field(20480, ge=0, description="smaller image files are dropped")
    phash_max_distance: int = Field(10, ge=0, le=64, description="perceptual-hash distance under which images are duplicates")


class DevsetConfig(Section):
    """The M2RAG-Bench dev set (spec §1) as one more knowledge-base source (dataset m2rag-bench, domain dev)."""

    path: str = Field(description="dev_set.jsonl, dev_set.jsonl.tar.gz or a folder holding one")
    image_root: str | None = Field(None, description="folder of the unpacked images")
    levels: list[int] | None = Field([1], description="dev-set levels kept; null = all")


class M2RAGConfig(Section):
    """Per query a multimodal knowledge base from the top documents of a retrieval run, element scoring and selection,
    answers with interleaved images by each strategy, and the eight LLM-judged metrics."""

    enabled: bool = Field(True, description="false = the stage is off (as m2rag: null)")
    datasets: list[str] | None = Field(None, description="null = every dataset whose domains have images")
    sources: list[str] = Field(["bm25"], description="systems whose `task` runs give the knowledge bases (one row group per source)")
    task: DocumentTask = Field("task1", description="the run the knowledge bases come from")
    top_n: int = Field(5, ge=1, description="distinct top-ranked documents whose pages form a knowledge base")
    page_scope: Literal["page", "retrieved"] = Field("page", description="page: every passage of each page (the paper's whole web "
                                                     "page); retrieved: only the retrieved passages")
    anchor_images: bool = Field(True, description="place figures after their passage using meta/<domain>.document_images.tsv of a "
                                "local dataset when it exists (else at the page end)")
    max_page_images: int | None = Field(None, ge=0, description="at most N images per page enter a knowledge base (anchored to its "
                                        "passages first); bounds image-scoring calls; null = all")
    max_queries: int | None = Field(None, ge=1, description="first N topics per domain; null = all")
    strategies: list[Literal["single_stage", "multi_stage", "separate"]] = Field(
        ["single_stage", "multi_stage", "separate"], min_length=1, description="answer strategies (spec §4)")
    generator: str = Field(description="a key of generators")
    judge: str = Field(description="a key of generators: scores elements (spec §2) and judges answers (spec §6)")
    image_text: str | None = Field("ocr", description="captioner whose image text (with the alt text) describes images to "
                                   "text-only models; null = alt text only")
    answer_max_tokens: int = Field(1024, ge=1, description="reply limit of each answer")
    answer_temperature: Number = Field(0.0, ge=0, description="generator temperature of every strategy call (0 = greedy)")
    judge_max_tokens: int = Field(256, ge=1, description="reply limit of the chunk scores and the multi-stage placement calls")
    judge_temperature: Number = Field(0.0, ge=0, description="temperature of every judge call (element scores, metrics; 0 = greedy)")
    image_score_max_tokens: int = Field(16, ge=1, description="reply limit of the image relevance scores (spec §2.2: only the integer)")
    metric_max_tokens: int = Field(256, ge=1, description="reply limit of the 0-10 metric judges and the context-precision verdicts")
    faithfulness_max_tokens: int = Field(1024, ge=1, description="reply limit of the faithfulness statement and verdict calls")
    context_tokens: int = Field(256, ge=0, description="text window above and below each output image (spec §6.5)")
    recall_threshold: Number = Field(8, description="input images scored at or above this are the important ones of image recall "
                                    "(spec §6.6)")
    separate_encoder: str | None = Field(None, description="a dense system whose encoder matches images to answer lines "
                                         "(separate strategy)")
    separate_threshold: Number = Field(0.1, description="minimum line-to-chunk cosine similarity (spec §4.3)")
    released_parse: bool = Field(False, description="score integer-free 0-10 judge replies 0 as the released code (default: a "
                                 "counted failure)")
    seed: int = Field(0, description="sampling seed")
    selection: SelectionConfig = Field(SelectionConfig(), description="thresholds and caps of spec §2.2-3 (defaults = the released "
                                       "configs)")
    devset: DevsetConfig | None = Field(None, description="the M2RAG-Bench dev set as one more knowledge-base source: a local copy "
                                        "of the hub dataset ylwt/M2RAG-Bench")
