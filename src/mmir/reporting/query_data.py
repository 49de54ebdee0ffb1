"""What a query page shows of one (task, dataset, domain), read from the run's own files: the prepared topics, qrels,
corpus, images and pairs (``data/prepared/<dataset>/<domain>/``), every system's run and per-query values
(``results/runs/...``, ``results/metrics/.../<domain>.perquery.tsv``) and, when the essentiality stage labelled the
domain, its labels (``results/essentiality/<dataset>/<domain>/labels.parquet``).

Per query: its text and images, its gold items (qrels label > 0, highest label first), its essentiality class, image
type and number of images (:func:`mmir.reporting.essentiality.query_classes`; the number of images from the topic
when unlabelled), and per system the primary measure (the per-query file's value), the rank of its first relevant
item (in the whole run) and its top :data:`TOP` with their labels; for a reranked system also each top item's rank
in its first stage's run (the reranker's input order). Items are described once per page: a document by its first
:data:`EXCERPT_CHARS` characters, an image by its thumbnail and alt text, a Task 4 pair by both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mmir.core.tasks import TaskSpec
from mmir.core.tasks import task as task_spec
from mmir.reporting.thumbnails import Thumbnails

#: ranked items shown per system and query
TOP = 10
#: characters of a document shown (cut at a word boundary, an ellipsis added)
EXCERPT_CHARS = 300
#: gold items listed per query in the query table (the rest counted)
MAX_GOLD = 8
#: the separator of a Task 4 pair id (``doc_id|||image_path``, ``|||__NO_IMAGE__`` for the text-only pair)
PAIR_SEP, NO_IMAGE = "|||", "__NO_IMAGE__"


@dataclass(frozen=True)
class DomainFiles:
    """The files of one (task, dataset, domain) page.

    Attributes:
        prepared: ``data/prepared/<dataset>/<domain>``.
        qrels: the qrels file the task was scored against (a file name in ``prepared``, or a path).
        runs: ``{system: run file}`` and ``perquery``: ``{system: per-query TSV}``, in table order.
        first_stage: ``{reranked system: its first-stage system}`` (both in ``runs``).
        labels: ``{system: row label}`` where the table's label differs from the name.
        essentiality: the domain's ``labels.parquet``, when the essentiality stage labelled it.
    """

    task: str
    dataset: str
    domain: str
    prepared: Path
    qrels: str
    runs: dict[str, str]
    perquery: dict[str, str]
    measure: str = "nDCG@10"
    baseline: str | None = None
    first_stage: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    essentiality: str | None = None

    @property
    def spec(self) -> TaskSpec:
        return task_spec(self.task)

    @property
    def systems(self) -> list[str]:
        return list(self.runs)

    @property
    def base(self) -> str:
        """The baseline (``baseline`` when it is one of the systems, else the first)."""
        return self.baseline if self.baseline in self.runs else self.systems[0]

    def label(self, system: str) -> str:
        return self.labels.get(system, system)


@dataclass
class QueryRow:
    """One query. ``scores[system]`` = the measure (None when the per-query file lacks the query), ``first[system]`` =
    1-based rank of the first relevant item (None: none retrieved), ``top[system]`` = ``[(item, label), ...]``,
    ``inputs[reranked system]`` = each top item's rank in the first stage's run (None: not in it)."""

    qid: str
    text: str
    images: list[str]
    gold: list[tuple[str, int]]
    essentiality: str | None = None
    image_type: str | None = None
    n_images: str | None = None
    scores: dict[str, float | None] = field(default_factory=dict)
    first: dict[str, int | None] = field(default_factory=dict)
    top: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    inputs: dict[str, list[int | None]] = field(default_factory=dict)


@dataclass
class DomainData:
    """A page's data: the queries (in topic order) and the items and images they show. ``items[id]`` =
    ``{"text": excerpt, "doc": doc id, "image": image path}`` (what applies); ``thumbs[image path]`` = thumbnail file
    name (None: undecodable); ``alts[image path]`` = alt text."""

    files: DomainFiles
    queries: list[QueryRow]
    items: dict[str, dict[str, str]]
    thumbs: dict[str, str | None]
    alts: dict[str, str]

    def scores(self, system: str) -> dict[str, float]:
        """``{qid: value}`` of one system (queries it scores)."""
        return {q.qid: q.scores[system] for q in self.queries if q.scores.get(system) is not None}


def excerpt(text: str, chars: int = EXCERPT_CHARS) -> str:
    """The first ``chars`` characters of ``text`` (whitespace collapsed), cut at a word boundary with ``…``."""
    text = " ".join(str(text).split())
    if len(text) <= chars:
        return text
    cut = text[:chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > chars // 2 else cut).rstrip() + "…"


def split_pair(pair_id: str) -> tuple[str, str]:
    """``(doc_id, image_path)`` of a Task 4 pair id (image ``""`` for the text-only pair)."""
    doc, _, image = pair_id.partition(PAIR_SEP)
    return doc, ("" if image == NO_IMAGE else image)


def read_ranked(path: str | Path) -> pd.DataFrame:
    """A TREC run (``qid Q0 item rank score tag``) as ``qid, item, pos``: ``pos`` = 1-based position in the query's
    ranking ordered by the rank column (the order :func:`mmir.retrieval.runs.read_run` gives); rows sorted by qid then
    ``pos``. Single-space separated runs (mmir's) are read by pyarrow's CSV reader (a 1000-deep run of 100 queries in
    about 0.1 s); anything else (tabs, several spaces, a bad line) by pandas' whitespace parser, which names the line.

    Raises:
        DataError: a line without six fields or with a rank that is not an integer (file and line named).
    """
    from mmir.core.errors import DataError

    cols = ["qid", "q0", "item", "rank", "score", "tag"]
    try:
        import pyarrow as pa
        from pyarrow import csv as pcsv

        table = pcsv.read_csv(path, read_options=pcsv.ReadOptions(column_names=cols),
                              parse_options=pcsv.ParseOptions(delimiter=" "),
                              convert_options=pcsv.ConvertOptions(column_types={"qid": pa.string(), "item": pa.string(),
                                                                                "rank": pa.int64(), "tag": pa.string()},
                                                                  include_columns=["qid", "item", "rank", "tag"]))
        df = table.to_pandas()
        if df["tag"].isna().any() or df["tag"].eq("").any() or df["qid"].eq("").any():
            raise ValueError("empty fields")  # several spaces: the whitespace parser below reads it
        return _positions(df)
    except (pa.ArrowInvalid, ValueError, OSError):
        pass
    try:
        df = pd.read_csv(path, sep=r"\s+", header=None, names=cols, dtype={"qid": str, "q0": str, "item": str, "tag": str},
                         keep_default_na=False, na_values={"rank": [""], "score": [""]})
    except pd.errors.EmptyDataError:
        return pd.DataFrame({"qid": pd.Series(dtype=str), "item": pd.Series(dtype=str), "pos": pd.Series(dtype=int)})
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataError(path, f"not a TREC run ('qid Q0 docid rank score tag'): {exc}") from exc
    rank = pd.to_numeric(df["rank"], errors="coerce")
    bad = df["tag"].isna() | df["tag"].eq("") | rank.isna() | (rank != rank.round())
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise DataError(path, f"line {i + 1}: expected 'qid Q0 docid rank score tag' with an integer rank")
    return _positions(df.assign(rank=rank.astype(int)))


def _positions(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values(["qid", "rank"], kind="stable")
    df["pos"] = df.groupby("qid", sort=False).cumcount() + 1
    return df[["qid", "item", "pos"]].reset_index(drop=True)


def _read_filtered(path: Path, column: str, values: set[str], columns: list[str]) -> pd.DataFrame:
    """Rows of a parquet file whose ``column`` is in ``values`` (pyarrow's filter: only those rows are materialised)."""
    if not values or not path.is_file():
        return pd.DataFrame(columns=columns)
    return pd.read_parquet(path, columns=columns, filters=[(column, "in", sorted(values))])


def _classes(files: DomainFiles, topics: pd.DataFrame) -> dict[str, dict[str, str | None]]:
    from mmir.reporting.essentiality import n_images_class, query_classes

    out = {q: {"essentiality": None, "image_type": None, "n_images": n_images_class(len(imgs))}
           for q, imgs in zip(topics["qid"], topics["image_paths"])}
    if files.essentiality and Path(files.essentiality).is_file():
        for r in query_classes(pd.read_parquet(files.essentiality)).to_dict("records"):
            if r["qid"] in out:
                out[r["qid"]] |= {k: r[k] for k in ("essentiality", "image_type")}
    return out


def load_domain(files: DomainFiles, thumbs: Thumbnails | None = None, top: int = TOP) -> DomainData:
    """Read one page's data (module docstring); thumbnails of every shown image are made or taken from ``thumbs``.

    Raises:
        FileNotFoundError: a prepared file, run or per-query file is missing; DataError: a malformed run or qrels.
    """
    from mmir.data.trec import read_qrels
    from mmir.evaluation.significance import read_perquery

    spec, prep = files.spec, Path(files.prepared)
    topics = pd.read_parquet(prep / spec.queries, columns=["qid", "query", "image_paths"])
    topics["qid"] = topics["qid"].astype(str)
    qrels_path = Path(files.qrels) if Path(files.qrels).is_file() else prep / files.qrels
    qrels = read_qrels(qrels_path)
    scores = {s: read_perquery(p, files.measure) for s, p in files.perquery.items()}
    scored = list(dict.fromkeys(q for s in scores.values() for q in s.index))
    classes = _classes(files, topics)
    texts = dict(zip(topics["qid"], topics["query"]))
    images = dict(zip(topics["qid"], topics["image_paths"]))
    scored_set = set(scored)
    order = [q for q in topics["qid"] if q in scored_set] + [q for q in scored if q not in texts]
    rows = {q: QueryRow(q, str(texts.get(q, "")), [str(p) for p in images.get(q, [])],
                        sorted(((d, r) for d, r in qrels.get(q, {}).items() if r > 0), key=lambda x: -x[1]),
                        **classes.get(q, {})) for q in order}
    gold = pd.DataFrame([(q, d, r) for q, v in qrels.items() for d, r in v.items()], columns=["qid", "item", "rel"])
    first_stage_ranks = {}
    for s, path in files.runs.items():
        ranked = read_ranked(path).merge(gold, on=["qid", "item"], how="left")
        ranked["rel"] = ranked["rel"].fillna(0).astype(int)
        first = ranked[ranked["rel"] > 0].groupby("qid", sort=False)["pos"].min().to_dict()
        tops: dict[str, list[tuple[str, int]]] = {}
        head = ranked[ranked["pos"] <= top]
        for q, d, r in zip(head["qid"], head["item"], head["rel"].tolist()):
            tops.setdefault(q, []).append((d, r))
        for q, row in rows.items():
            v = scores[s].get(q)
            row.scores[s] = None if v is None else float(v)
            row.first[s] = int(first[q]) if q in first else None
            row.top[s] = tops.get(q, [])
        if s in files.first_stage.values():
            first_stage_ranks[s] = ranked[["qid", "item", "pos"]]
    for rr, base in files.first_stage.items():
        shown_top = pd.DataFrame([(q, d, i) for q, row in rows.items() for i, (d, _) in enumerate(row.top.get(rr, []))],
                                 columns=["qid", "item", "i"])
        where = shown_top.merge(first_stage_ranks[base], on=["qid", "item"], how="left") if base in first_stage_ranks else \
            shown_top.assign(pos=None)
        for row in rows.values():
            row.inputs[rr] = [None] * len(row.top.get(rr, []))
        for q, i, pos in zip(where["qid"], where["i"], where["pos"]):
            rows[q].inputs[rr][i] = None if pd.isna(pos) else int(pos)
    shown = {d for r in rows.values() for d in [*(g for g, _ in r.gold[:MAX_GOLD]), *(d for t in r.top.values() for d, _ in t)]}
    items, doc_ids, image_paths = _items(spec, shown)
    corpus = _read_filtered(prep / "corpus.parquet", "doc_id", doc_ids, ["doc_id", "text"])
    text_of = dict(zip(corpus["doc_id"].astype(str), corpus["text"]))
    for it in items.values():
        if "doc" in it:
            it["text"] = excerpt(text_of.get(it["doc"], ""))
    query_images = {p for r in rows.values() for p in r.images}
    thumbs_, alts = _thumbnails(prep, thumbs, image_paths, query_images)
    return DomainData(files, list(rows.values()), items, thumbs_, alts)


def _items(spec: TaskSpec, shown: set[str]) -> tuple[dict[str, dict[str, str]], set[str], set[str]]:
    """``(items, doc ids, image paths)`` of the shown item ids of a task that ranks ``spec.ranks``."""
    items: dict[str, dict[str, str]] = {}
    docs, imgs = set(), set()
    for i in sorted(shown):
        if spec.ranks == "documents":
            items[i] = {"doc": i}
            docs.add(i)
        elif spec.ranks == "images":
            items[i] = {"image": i}
            imgs.add(i)
        else:
            d, im = split_pair(i)
            items[i] = {"doc": d, **({"image": im} if im else {})}
            docs.add(d)
            imgs |= {im} if im else set()
    return items, docs, imgs


def _thumbnails(prep: Path, thumbs: Thumbnails | None, corpus_images: set[str],
                query_images: set[str]) -> tuple[dict[str, str | None], dict[str, str]]:
    """``({image path: thumbnail name or None}, {image path: alt text})``: bytes are read only for images whose
    thumbnail is not in the cache yet."""
    out: dict[str, str | None] = {}
    alts: dict[str, str] = {}
    for name, wanted in (("images.parquet", corpus_images), ("query_images.parquet", query_images)):
        meta = _read_filtered(prep / name, "path", wanted, ["path", "sha256", "alt", "ok"])
        alts |= {str(p): str(a) for p, a in zip(meta["path"], meta["alt"]) if isinstance(a, str) and a}
        if thumbs is None:
            continue
        sha = dict(zip(meta["path"].astype(str), meta["sha256"].astype(str)))
        missing = {p for p, h in sha.items() if not (thumbs.cache / thumbs.name(h)[:2] / thumbs.name(h)).is_file()}
        raw = _read_filtered(prep / name, "path", missing, ["path", "bytes"])
        data = dict(zip(raw["path"].astype(str), raw["bytes"]))
        for p, h in sha.items():
            out[p] = thumbs.get(h, lambda p=p, data=data: data.get(p, b""), f"{prep / name}: {p}")
    return out, alts
