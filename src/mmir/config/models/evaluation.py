"""``evaluation``, ``encoding``, ``paths``, ``mlflow`` and ``ablations``: how runs are made, stored, scored and tracked."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mmir.config.models.base import Section


class EvaluationConfig(Section):
    """How runs are scored."""

    protocol: Literal["official", "strict"] = Field(
        "official", description="official = each query's negative_ids are removed from its ranking, as the MM-BRIGHT code does; "
        "strict = they stay in, so hard negatives compete")
    top_k: int = Field(1000, ge=1, description="depth of every run file")
    task4_protocol: Literal["paper", "official"] = Field(
        "paper", description="paper = graded Task 4 labels (2 gold passage + positive image, 1 gold passage alone), MM-BRIGHT "
        "section 4.1; official = the released scripts' binary labels. Pairs with a negative image are removed under both")
    image_text: str = Field("ocr", description="captioner whose image text feeds bm25/dense systems on tasks 2-4 (the OCR route)")
    primary_measure: str = Field("nDCG@10", description="the measure of the tables (one of measures)")
    alt_text: bool = Field(False, description="append corpus images' alt text to their OCR text in the text route (off: the hub's "
                           "document_images has no alt text, so offline numbers mean what they would on the hub)")
    tie_order: Literal["run", "pytrec_eval", "expected"] = Field(
        "pytrec_eval", description="how equal scores are ordered when scoring: pytrec_eval = as trec_eval sorts a run (score "
        "descending, then document id descending in byte order; the field's order, and MM-BRIGHT's released scripts'), so no "
        "value depends on the order of lines in a file; run = the order written in the run file; expected = tie-aware, the "
        "mean over every order of each tied group (McSherry & Najork, ECIR 2008). Task tables show the tie-aware value "
        "beside a cell where it prints differently (the run order's under expected)")
    chunk_size: int = Field(65536, ge=1, description="item rows per exact-search step (bounds memory)")


class EncodingConfig(Section):
    """The encode stage: vector stores of documents, pair texts, images and queries, one job per shard."""

    shard_size: int = Field(20000, ge=1, description="rows a shard (about minutes of one GPU for a 7B encoder)")
    dtype: Literal["float16", "float32"] = Field("float32", description="vectors on disk: float32 keeps them as the encoder "
                                                 "returns them (every measure equals sentence-transformers / MTEB); float16 "
                                                 "halves a full-size store and moves rankings below the top ranks "
                                                 "(docs/own-system.md has its measured effect)")
    batch_rows: int = Field(1024, ge=1, description="rows written per resumable batch of a shard")


class PathsConfig(Section):
    """Content-addressed caches (a key holds everything that changes the cached value), shared by a user's projects
    under ``~/.cache/mmir``; a relative path is relative to the project directory, ``~`` and ``$VARS`` are expanded."""

    embedding_cache: str = Field("~/.cache/mmir/embeddings", description="vectors per text and encoder (the encode stage)")
    caption_cache: str = Field("~/.cache/mmir/captions", description="captions per image and captioner")
    generation_cache: str = Field("~/.cache/mmir/generations.sqlite", description="every LLM call's reply (SQLite)")


class MlflowConfig(Section):
    """Experiment tracking."""

    tracking_uri: str | None = Field(None, description="MLflow store; null = sqlite:///mlflow.db in the project "
                                     "(MLFLOW_TRACKING_URI overrides)")
    experiment: str = Field("mmir", description="experiment name")


class CaptionGrid(Section):
    """Task 1 systems re-run with caption-augmented queries (``<system>+cap:<captioner>``)."""

    systems: list[str] = Field([], description="systems of the grid")
    captioners: list[str] = Field([], description="captioners whose text is appended to the queries")


class ReformulationGrid(Section):
    """Task 1 systems re-run with reformulated queries (``<system>+ref:<reformulator>``)."""

    systems: list[str] = Field([], description="systems of the grid")
    reformulators: list[str] = Field([], description="reformulators rewriting the queries")


class ReasoningGrid(Section):
    """Task 1 systems re-run with BRIGHT's reasoning queries (``<system>+reason:<variant>``, hub config
    ``<variant>_reason``) on the ``bright`` datasets that fetch the variant (``datasets.<name>.reasoning``)."""

    systems: list[str] = Field([], description="systems of the grid")
    variants: list[str] = Field([], description="reasoning-query configs without _reason: gpt4, claude-3-opus, Gemini-1.0, "
                                "llama3-70b, grit")


class AblationsConfig(Section):
    """Task 1 grids: caption and reformulation on the domains whose queries have images; reasoning on BRIGHT."""

    caption: CaptionGrid = Field(CaptionGrid(), description="caption-augmented queries")
    reformulation: ReformulationGrid = Field(ReformulationGrid(), description="reformulated queries")
    reasoning: ReasoningGrid = Field(ReasoningGrid(), description="BRIGHT's reasoning queries (query variants of the hub)")
