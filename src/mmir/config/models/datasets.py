"""``datasets.<name>``: MM-BRIGHT from the hub (``source: hf``), the same parquet files on disk (``local``), a
TREC collection (``trec``), a BEIR-format collection (``beir``), an ir_datasets id (``ir_datasets``), or BRIGHT
(``bright``). Each is prepared per domain into data/prepared/<dataset>/<domain>/."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Tag, model_validator

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
        return (f"sample: {q}; corpus: the items they judge + {self.distractors} other items of each kind it holds "
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
    unjudged_queries: Literal["drop", "keep", "error"] = Field(
        "drop", description="a query no qrels row (or gold_ids entry) judges, in every source: drop leaves it out of the topics "
        "(BEIR's loader does; a BEIR queries file often holds every split's queries), keep ranks it unscored; counted, "
        "first ids named")
    qrels_unknown_query: Policy = Field("error", description="a qrels row naming a query absent from the queries or topics "
                                        "(BEIR's loader raises); warn drops the row, counted")
    qrels_conflicting_grades: Policy = Field("error", description="one (query, document) pair judged twice with different "
                                             "grades; warn keeps the last (as BEIR's and ir_datasets' loaders do), counted")
    no_scorable_queries: Policy = Field("error", description="no query has a relevant document in the corpus; warn writes "
                                        "empty qrels, and prepare.json says scorable_queries: 0 and why (tables show no number)")
    text_whitespace: Literal["strip", "keep"] = Field(
        "strip", description="surrounding whitespace of each document and query text (after joining title and text), in "
        "every source: strip removes it (MTEB's (title + ' ' + text).strip()), counted; TREC SGML always collapses layout")
    max_missing_share: Number = Field(0.5, ge=0, le=1, description="stop when more than this share of a domain's query-image or "
                                     "positive-image references do not resolve, whatever the policy (a wrong root must not pass "
                                     "as warnings); 1 = never")


Domains = Literal["all"] | Annotated[list[Name], Field(min_length=1)]


class _Dataset(Section):
    """What every source takes; each source adds only its own keys (a key of another source is unknown)."""

    domains: Domains = Field("all", description="a list of domain names, or 'all' (local: every documents/*.parquet; hf: every "
                             "domain of the repo; trec, beir, ir_datasets: one domain, named after the dataset unless "
                             "listed)")
    sample: SampleConfig | None = Field(None, description="a deterministic sample for fast runs (mmir.data.sample), named in "
                                        "every table caption; null = the whole domain")
    integrity: IntegrityConfig = Field(IntegrityConfig(), description="how prepare treats known problems of the published data")


class HubDataset(_Dataset):
    """MM-BRIGHT from the Hugging Face hub."""

    source: Literal["hf"] = Field(description="hf = MM-BRIGHT from the hub")
    root: str | None = unset("read by DVC alone: the path its prepare stage lists as a dependency (mmir fetches into "
                             "data/raw/<dataset>)")
    repo_id: str = Field("mm-bright/MM-BRIGHT", description="the hub dataset")
    revision: str = Field("97702ca9ea81cd0a25288e74a9402439550d6bd4", description="hub revision, a 40-hex commit for "
                          "reproducibility (default: the commit the MTEB port of MM-BRIGHT pins); `main` follows the hub")


class LocalDataset(_Dataset):
    """MM-BRIGHT's parquet layout on disk."""

    source: Literal["local"] = Field(description="local = MM-BRIGHT's parquet files on disk")
    root: str = Field(description="directory holding documents/, examples/, ... (relative to the project)")


class TrecDataset(_Dataset):
    """A TREC collection (corpus, topics, qrels files)."""

    source: Literal["trec"] = Field(description="trec = a TREC collection")
    root: str = Field(description="directory holding the corpus, topics and qrels (relative to the project)")
    corpus: str = Field("corpus", description="corpus file or directory, relative to root")
    topics: str = Field("query-text.trec", description="topics file, relative to root")
    qrels: str = Field("qrels", description="qrels file, relative to root")
    topic_field: Literal["title", "desc", "title+desc"] = Field("title", description="topic text")


class BeirDataset(_Dataset):
    """A BEIR-format collection (corpus.jsonl, queries.jsonl, qrels/<split>.tsv; MTEB retrieval sets and ViDoRe's
    BEIR exports share it), on disk (``root``) or from the hub (``repo_id`` at ``revision``); one domain."""

    source: Literal["beir"] = Field(description="beir = BEIR's corpus/queries/qrels layout")
    root: str | None = unset("directory holding corpus, queries and qrels/ (relative to the project); unset = fetch "
                             "repo_id from the hub")
    repo_id: str | None = unset("the hub dataset holding the BEIR files (e.g. mteb/scifact); used when root is unset")
    revision: str | None = unset("hub revision of repo_id: a 40-hex commit (required with repo_id)")
    split: str = Field("test", description="the qrels split: qrels/<split>.tsv (or qrels/<split>*.parquet)")
    title: bool = Field(True, description="prepend a document's title to its text (BEIR's models read 'title text')")
    image_dir: str | None = unset("image files <image_dir>/<corpus-id>.<ext> of an image corpus, relative to root (an "
                                  "'image' column of the corpus is read without it); gives Task 3 qrels")

    @model_validator(mode="after")
    def _where(self) -> BeirDataset:
        if (self.root is None) == (self.repo_id is None):
            raise ValueError("give exactly one of root (files on disk) and repo_id (the hub)")
        if self.repo_id is not None and not self.revision:
            raise ValueError("repo_id needs a pinned revision")
        return self


class IrDatasetsDataset(_Dataset):
    """Any ir_datasets id: documents, queries and qrels through its iterators, downloaded into its own cache; one domain.
    Pinned by the ir_datasets version in pyproject.toml."""

    source: Literal["ir_datasets"] = Field(description="ir_datasets = a dataset id of the ir_datasets catalogue")
    root: str | None = unset("read by DVC alone: the path its prepare stage lists as a dependency (ir_datasets keeps "
                             "its files in cache_dir)")
    dataset_id: str = Field(description="the ir_datasets id, e.g. vaswani or beir/scifact/test")
    doc_fields: list[str] = Field(["text"], min_length=1, description="document fields joined (space) into the text, "
                                  "e.g. [title, text]")
    query_fields: list[str] = Field(["text"], min_length=1, description="query fields joined (space) into the query, "
                                    "e.g. [title] for TREC topics")
    cache_dir: str | None = unset("ir_datasets' download and cache directory (IR_DATASETS_HOME); unset = its default")
    register_module: str | None = unset("a Python module imported first, which registers local datasets with "
                                        "ir_datasets.registry")


BRIGHT_REVISION = "3066d29c9651a576c8aba4832d249807b181ecae"


class BrightDataset(_Dataset):
    """BRIGHT (xlangai/BRIGHT): its 12 tasks as domains, short or long documents, excluded ids, reasoning queries."""

    source: Literal["bright"] = Field(description="bright = BRIGHT from the hub (or a local copy of its files)")
    repo_id: str = Field("xlangai/BRIGHT", description="the hub dataset")
    revision: str = Field(BRIGHT_REVISION, description="hub revision (default: the commit MTEB's BRIGHT tasks pin)")
    root: str | None = unset("a local copy of the hub files (<config>/<task>-00000-of-00001.parquet); unset = fetch")
    long_context: bool = Field(False, description="rank long_documents and judge by gold_ids_long (BRIGHT's --long_context)")
    qrels_from: Literal["hub", "anserini", "anserini-fixed"] = Field(
        "hub", description="hub: the examples' gold_ids; anserini / anserini-fixed: anserini-tools' "
        "qrels.bright-<task>[.fixed].txt under anserini_root")
    anserini_root: str | None = unset("directory with anserini-tools' qrels/ (e.g. ../shared/data/bright-topics)")
    reasoning: list[str] = Field([], description="reasoning-query configs <name>_reason to fetch as query variants "
                                 "(gpt4, claude-3-opus, Gemini-1.0, llama3-70b, grit); run by ablations.reasoning")

    @model_validator(mode="after")
    def _anserini(self) -> BrightDataset:
        if self.qrels_from != "hub" and self.anserini_root is None:
            raise ValueError(f"qrels_from: {self.qrels_from} needs anserini_root")
        if self.long_context and self.qrels_from != "hub":
            raise ValueError("anserini's qrels judge the short documents; long_context needs qrels_from: hub")
        return self


Dataset = Annotated[
    Annotated[HubDataset, Tag("source=hf")] | Annotated[LocalDataset, Tag("source=local")] | Annotated[TrecDataset, Tag("source=trec")]
    | Annotated[BeirDataset, Tag("source=beir")] | Annotated[IrDatasetsDataset, Tag("source=ir_datasets")]
    | Annotated[BrightDataset, Tag("source=bright")],
    tagged_by("source", "hf", "local", "trec", "beir", "ir_datasets", "bright"),
]
