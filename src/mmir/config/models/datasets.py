"""``datasets.<name>``: MM-BRIGHT from the hub (``source: hf``), the same parquet files on disk (``local``), or a
TREC collection (``trec``). Each is prepared per domain into data/prepared/<dataset>/<domain>/."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Tag

from mmir.config.models.base import Name, Number, Section, tagged_by, unset

Policy = Literal["error", "warn"]


class SampleConfig(Section):
    """A deterministic sample for fast runs (mmir.data.sample), named in every table caption."""

    queries: int | None = Field(None, ge=1, description="the first N topics per domain; null = all")
    corpus: Literal["all", "judged"] = Field("all", description="all, or judged: the documents and images the topics judge plus "
                                             "`distractors`")
    distractors: int = Field(0, ge=0, description="other documents and images of each kind added to a judged corpus")
    seed: int = Field(0, description="seed of the distractor draw")

    @classmethod
    def from_config(cls, section: dict | SampleConfig | None) -> SampleConfig | None:
        """``None`` for no sample (config ``null`` or absent).

        Raises:
            ConfigError: naming ``sample.<key>``.
        """
        from mmir.config.parse import parse

        return parse(cls, section, "sample") if section else None

    def describe(self) -> str:
        """One line for table captions, e.g. ``first 8 queries per domain; corpus: their judged items + 200 others``."""
        q = f"first {self.queries} queries per domain" if self.queries else "all queries"
        if self.corpus == "all":
            return f"sample: {q}; full corpus"
        return (f"sample: {q}; corpus: the items they judge (documents, images) + {self.distractors} others of each kind "
                f"(seed {self.seed})")


class IntegrityConfig(Section):
    """How prepare treats problems the published data is known to contain: error stops with file, row and field;
    warn counts, reports and repairs (README, Data integrity)."""

    missing_gold: Policy = Field("error", description="gold id absent from the corpus; warn drops it from the qrels")
    duplicate_doc_ids: Policy = Field("error", description="warn keeps the first")
    excluded_overlaps_gold: Policy = Field("warn", description="a negative_ids entry that is also gold")
    no_gold: Policy = Field("warn", description="a query without any gold id in the corpus (not scored)")
    null_lists: Policy = Field("error", description="a null cell where a list is required (gold_ids, negative_ids, image_paths, "
                               "positive/negative_images); warn reads it as [] and counts it with the query id")
    missing_query_images: Policy = Field("warn", description="an image_paths entry absent from examples_images; warn leaves it out "
                                         "of the query's images (first few query ids and paths in the message)")
    missing_positive_images: Policy = Field("warn", description="a positive_images entry absent from document_images; warn drops "
                                            "it from the Task 3/4 qrels")
    max_missing_share: Number = Field(0.5, ge=0, le=1, description="stop when more than this share of a domain's query-image or "
                                     "positive-image references do not resolve, whatever the policy (a wrong root must not pass "
                                     "as warnings); 1 = never")


Domains = Literal["all"] | Annotated[list[Name], Field(min_length=1)]


class _Dataset(Section):
    repo_id: str = Field("mm-bright/MM-BRIGHT", description="hf: the hub dataset")
    revision: str = Field("97702ca9ea81cd0a25288e74a9402439550d6bd4", description="hf: hub revision, a 40-hex commit for "
                          "reproducibility (default: the commit the MTEB port of MM-BRIGHT pins); `main` follows the hub")
    domains: Domains = Field("all", description="a list of domain names, or 'all' (local: every documents/*.parquet; hf: every "
                             "domain of the repo)")
    corpus: str = Field("corpus", description="trec: corpus file or directory, relative to root")
    topics: str = Field("query-text.trec", description="trec: topics file, relative to root")
    qrels: str = Field("qrels", description="trec: qrels file, relative to root")
    topic_field: Literal["title", "desc", "title+desc"] = Field("title", description="trec: topic text")
    sample: SampleConfig | None = Field(None, description="a deterministic sample for fast runs (mmir.data.sample), named in "
                                        "every table caption; null = the whole domain")
    integrity: IntegrityConfig = Field(IntegrityConfig(), description="how prepare treats known problems of the published data")


class HubDataset(_Dataset):
    """MM-BRIGHT from the Hugging Face hub."""

    source: Literal["hf"] = Field(description="hf = MM-BRIGHT from the hub")
    root: str | None = unset("local/trec: directory holding the files (relative to the project)")


class LocalDataset(_Dataset):
    """MM-BRIGHT's parquet layout on disk."""

    source: Literal["local"] = Field(description="local = MM-BRIGHT's parquet files on disk")
    root: str = Field(description="directory holding documents/, examples/, ... (relative to the project)")


class TrecDataset(_Dataset):
    """A TREC collection (corpus, topics, qrels files)."""

    source: Literal["trec"] = Field(description="trec = a TREC collection")
    root: str = Field(description="directory holding the corpus, topics and qrels (relative to the project)")



Dataset = Annotated[
    Annotated[HubDataset, Tag("source=hf")] | Annotated[LocalDataset, Tag("source=local")] | Annotated[TrecDataset, Tag("source=trec")],
    tagged_by("source", "hf", "local", "trec"),
]
