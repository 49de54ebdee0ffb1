"""What an encoder encodes for retrieval: the item kinds of a prepared domain and how each is encoded.

A kind's row order is its task's item or query order (:mod:`mmir.retrieval.items`), so a store row is an
item index. Text systems: ``documents``, ``pairs``, ``images`` (as documents), ``queries``, ``mm_queries``.
Multimodal systems: ``documents``, ``images``, ``query_texts``, ``query_images`` (plus :data:`BLANK`) and
``query_stacks`` (``image_mode: stack``, paper §4.1), ``query_image_sets`` (``image_mode: all``: a query's images in
one input, capped at ``max_query_images``); Task 4 pairs are fused at search time
(:class:`mmir.retrieval.fusion.PairMatrix`). Every vector goes through the embedding cache.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mmir.config.models import BM25System, MultiVectorSystemBase, System
from mmir.core.tasks import task as task_spec
from mmir.data.images import blank_image
from mmir.encoders.cache import encoder_key
from mmir.encoders.truncation import image_text_cuts
from mmir.retrieval.items import ImageText, PairBudget, TokenPairBudget, item_texts_at, query_texts_at, ranked_items, read_queries

BLANK = "__BLANK__"  # row id of the blank image in the query_images kind
TEXT_KINDS = ("documents", "pairs", "images", "queries", "mm_queries")
MM_KINDS = ("documents", "images", "query_texts", "query_images", "query_stacks", "query_image_sets")
QUERY_KINDS = ("queries", "mm_queries", "query_texts", "query_images", "query_stacks", "query_image_sets")
#: the query image kind each image mode reads (none: no image kind)
IMAGE_MODE_KINDS = {"first": "query_images", "mean": "query_images", "stack": "query_stacks", "all": "query_image_sets"}
_SET_MAGIC = b"MMIRSET1"


def kinds_of(system: System, task: str) -> list[str]:
    """The kinds a (system, task) reads (none for BM25): the task's :attr:`~mmir.core.tasks.TaskSpec.dense_kinds`,
    or its :attr:`~mmir.core.tasks.TaskSpec.mm_kinds` plus the multimodal system's query kinds.

    Raises:
        KeyError: an unknown task, or a multimodal system on a text-only task.
    """
    if isinstance(system, BM25System):
        return []
    spec = task_spec(task)
    if isinstance(system, MultiVectorSystemBase) and system.backend == "colpali":  # items, then the query texts
        query = "queries" if spec.queries == "topics.parquet" else "query_texts"
        return [spec.ranks, *([query] if len(spec.dense_kinds) > 1 else [])]  # ablation: query variants inline
    if system.kind != "mm":  # a dense or text multi-vector system (an mm plug-in is no MMSystem)
        return list(spec.dense_kinds)
    if spec.mm_kinds is None:
        raise KeyError(f"multimodal systems do not run {task}")
    q = ["query_texts"] + ([IMAGE_MODE_KINDS[system.image_mode]] if system.image_mode in IMAGE_MODE_KINDS else [])
    return [*spec.mm_kinds, *q]


def reads_text(system: System) -> bool:
    """Whether a vector system reads every kind as text (dense systems, ColBERT and plug-in multi-vector systems)."""
    return system.kind == "dense" or (system.kind == "multivector" and system.backend in ("colbert", "plugin"))


def needs_image_text(system: System, kind: str) -> bool:
    """Whether a text system (dense, ColBERT) reads ``kind`` through image text (captions)."""
    return reads_text(system) and kind in ("pairs", "images", "mm_queries")


def png_bytes(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def stack_vertically(images: Sequence) -> object:
    """One RGB image with ``images`` top to bottom, each scaled to the widest one's width (aspect kept), on white.

    The paper's query protocol for single-image models (MM-BRIGHT §4.1: "we concatenate query images
    vertically")."""
    from PIL import Image

    width = max(im.width for im in images)
    scaled = [im if im.width == width else im.resize((width, max(1, round(im.height * width / im.width)))) for im in images]
    out = Image.new("RGB", (width, sum(im.height for im in scaled)), "white")
    y = 0
    for im in scaled:
        out.paste(im.convert("RGB"), (0, y))
        y += im.height
    return out


def pack_images(datas: Sequence[bytes]) -> bytes:
    """One bytes payload holding encoded images in order (the content of a ``query_image_sets`` row, hashed whole
    by the embedding cache): a magic tag, then each image's length (8 bytes, little-endian) and bytes."""
    return _SET_MAGIC + b"".join(struct.pack("<Q", len(d)) + bytes(d) for d in datas)


def unpack_images(payload: bytes) -> list[bytes]:
    """The images of :func:`pack_images`, in order.

    Raises:
        ValueError: not a packed image set (wrong tag or lengths).
    """
    if not payload.startswith(_SET_MAGIC):
        raise ValueError("not a packed image set (no MMIRSET1 tag)")
    out, pos = [], len(_SET_MAGIC)
    while pos < len(payload):
        if pos + 8 > len(payload):
            raise ValueError(f"truncated image set: a length field at byte {pos}")
        (n,) = struct.unpack_from("<Q", payload, pos)
        pos += 8
        if pos + n > len(payload):
            raise ValueError(f"truncated image set: image {len(out)} needs {n} bytes at byte {pos}")
        out.append(payload[pos : pos + n])
        pos += n
    return out


@dataclass(frozen=True)
class KindRows:
    """The rows of one kind: ``ids``, ``payloads`` (texts or encoded image bytes) and whether they are images.

    ``images_cut``: for ``query_image_sets``, per row the usable images left out by ``max_query_images`` (else None).
    ``image_text_start``: for the texts of a text system that end with image text (``mm_queries``, ``images``,
    ``pairs``), per row where its image text starts (None: the row has none); else None.
    """

    kind: str
    ids: list[str]
    payloads: list
    images: bool
    query: bool
    images_cut: list[int] | None = None
    image_text_start: list[int | None] | None = None

    def __len__(self) -> int:
        return len(self.ids)


def kind_rows(kind: str, prep: str | Path, system: System, image_text: ImageText | None = None,
              budget: PairBudget | TokenPairBudget | None = None) -> KindRows:
    """The rows of ``kind`` in a prepared domain for ``system``.

    Raises:
        ValueError: an unknown kind for the system's kind, or image text missing where a text system needs it.
    """
    prep = Path(prep)
    if system.kind == "multivector" and system.backend == "colpali":
        return _colpali_rows(kind, prep)
    if reads_text(system):
        if kind not in TEXT_KINDS:
            raise ValueError(f"kind {kind!r} is not one of a dense system's {TEXT_KINDS}")
        if kind == "queries":
            q = read_queries("topics.parquet", prep)
            return KindRows(kind, q.qids, q.texts, False, True)
        if kind == "mm_queries":
            q = read_queries("topics_mm.parquet", prep)
            texts, starts = query_texts_at(q, image_text)
            return KindRows(kind, q.qids, texts, False, True, image_text_start=starts)
        items = ranked_items(kind, prep)
        texts, starts = item_texts_at(items, prep, image_text, budget)
        return KindRows(kind, items.ids, texts, False, False, image_text_start=starts if kind != "documents" else None)
    if kind not in MM_KINDS:
        raise ValueError(f"kind {kind!r} is not one of a multimodal system's {MM_KINDS}")
    if kind == "documents":
        c = pd.read_parquet(prep / "corpus.parquet")
        return KindRows(kind, c["doc_id"].tolist(), c["text"].tolist(), False, False)
    if kind == "images":
        im = pd.read_parquet(prep / "images.parquet", columns=["path", "bytes", "ok"])
        im = im[im["ok"].astype(bool)]
        return KindRows(kind, im["path"].tolist(), [bytes(b) for b in im["bytes"]], True, False)
    q = read_queries("topics_mm.parquet", prep)
    if kind == "query_texts":
        return KindRows(kind, q.qids, q.texts, False, True)
    qi = pd.read_parquet(prep / "query_images.parquet", columns=["path", "bytes", "ok"])
    usable = {p: bytes(b) for p, b, ok in zip(qi["path"], qi["bytes"], qi["ok"]) if ok}
    blank = png_bytes(blank_image())
    if kind == "query_images":
        paths = list(dict.fromkeys(p for ps in q.image_paths for p in ps if p in usable))
        return KindRows(kind, [*paths, BLANK], [*(usable[p] for p in paths), blank], True, True)
    if kind == "query_image_sets":
        cap = system.max_query_images
        sets = [[usable[p] for p in paths if p in usable] for paths in q.image_paths]
        payloads = [pack_images(s[:cap] or [blank]) for s in sets]
        return KindRows(kind, q.qids, payloads, True, True, images_cut=[max(0, len(s) - cap) for s in sets])
    from mmir.data.images import decode_image

    stacks = []
    for paths in q.image_paths:
        imgs = [decode_image(usable[p], source=p) for p in paths if p in usable]
        stacks.append(png_bytes(stack_vertically(imgs)) if imgs else blank)
    return KindRows(kind, q.qids, stacks, True, True)


def _colpali_rows(kind: str, prep: Path) -> KindRows:
    """A ColPali/ColQwen system's rows: document texts, images (bytes), pairs ((document text, image bytes)) and
    query texts (``queries``: Task 1 topics, ``query_texts``: the multimodal topics)."""
    if kind in ("queries", "query_texts"):
        q = read_queries("topics.parquet" if kind == "queries" else "topics_mm.parquet", prep)
        return KindRows(kind, q.qids, q.texts, False, True)
    if kind not in ("documents", "images", "pairs"):
        raise ValueError(f"kind {kind!r} is not one of a colpali system's (documents, images, pairs, queries, query_texts)")
    items = ranked_items(kind, prep)
    if kind == "documents":
        text = pd.read_parquet(prep / "corpus.parquet", columns=["doc_id", "text"]).set_index("doc_id")["text"]
        return KindRows(kind, items.ids, [text[d] for d in items.doc_ids], False, False)
    im = pd.read_parquet(prep / "images.parquet", columns=["path", "bytes"])
    data = dict(zip(im["path"], im["bytes"]))
    if kind == "images":
        return KindRows(kind, items.ids, [bytes(data[p]) for p in items.image_paths], True, False)
    text = pd.read_parquet(prep / "corpus.parquet", columns=["doc_id", "text"]).set_index("doc_id")["text"]
    # a pair without an image (or with one that does not decode) is its document alone: empty image bytes
    pairs = [(text[d], bytes(data[p]) if p and p in data else b"") for d, p in zip(items.doc_ids, items.image_paths)]
    return KindRows(kind, items.ids, pairs, True, False)


def corpus_texts(prep: str | Path) -> list[str]:
    """The texts of a prepared domain's corpus, in corpus order: what a plug-in's ``fit(documents)`` is given."""
    return pd.read_parquet(Path(prep) / "corpus.parquet", columns=["text"])["text"].tolist()


class KindEncoder:
    """A system's encoder seen per kind: its cache spec and key, the cache ``kind`` and the encode function.

    ``name`` (the key of ``systems``) and ``prep`` (the prepared domain) are for a ``backend: plugin`` system: its errors
    name ``systems.<name>``, and a plug-in with ``fit`` is fitted on ``prep``'s corpus texts."""

    def __init__(self, system: System, encoder=None, domain: str | None = None, *, name: str | None = None,
                 prep: str | Path | None = None):
        self.system = system
        if encoder is None and getattr(system, "backend", None) == "plugin":
            from mmir.encoders.plugins import make_plugin_encoder

            encoder = make_plugin_encoder(system, f"systems.{name}" if name else "system",
                                          (lambda: corpus_texts(prep)) if prep is not None else None)
        if encoder is None:
            if system.kind == "multivector":
                from mmir.encoders.multivector import make_multivector_encoder

                encoder = make_multivector_encoder(system)
            elif system.kind == "dense":
                from mmir.encoders.text import make_text_encoder

                encoder = make_text_encoder(system, domain=domain)
            else:
                from mmir.encoders.multimodal import make_mm_encoder

                encoder = make_mm_encoder(system)
        self.encoder = encoder
        spec = encoder.cache_spec
        self.spec = spec() if callable(spec) else spec
        self.key = encoder_key(self.spec)

    def plugin_stats(self) -> dict[str, str]:
        """``{"plugin": <identity>}`` of a plug-in encoder (what its vectors came from, in the encode stats), else ``{}``."""
        caller = getattr(self.encoder, "caller", None)
        return {"plugin": caller.identity.label} if caller is not None else {}

    def expect_dimension(self, cache) -> None:
        """Tell a plug-in encoder the dimension of the vectors ``cache`` (an open
        :class:`~mmir.encoders.cache.EmbeddingCache`) holds, so that a batch of another dimension stops the job naming
        the system, factory, identity and batch, not only the cache file; a no-op for other encoders."""
        caller = getattr(self.encoder, "caller", None)
        if caller is not None:
            caller.expect(cache.dim, str(cache.path))

    def store_key(self, kind: str) -> str:
        """The encoder key a store of ``kind`` is written and read under."""
        return f"{self.key}#{kind}"

    def cache_kind(self, rows: KindRows) -> str:
        if self.system.kind == "multivector":
            return f"{'query' if rows.query else 'document'}:{rows.kind}"
        if self.system.kind == "dense":
            return "query" if rows.query else "document"
        role = "query" if rows.query else "document"
        modality = "image_set" if rows.kind == "query_image_sets" else "image" if rows.images else "text"
        return self.encoder.cache_kind(modality, role)

    def role(self, rows: KindRows) -> str:
        return "query" if rows.query else "document"

    def truncations(self, rows: KindRows, payloads: Sequence, image_text_start: Sequence[int | None] | None = None) -> dict:
        """The cuts encoding ``payloads`` (texts of ``rows``' kind; the texts of (text, image) pairs) makes, from the
        texts and the model's limits: the same on a cold cache, a warm one and after a resume. Empty for image
        kinds and encoders that do not count. With ``image_text_start`` (the payloads' slice of
        :attr:`KindRows.image_text_start`) also what the cuts left of the image text ending the texts
        (:func:`~mmir.encoders.truncation.image_text_cuts`: ``image_text``, ``image_text_cut``, ``image_text_dropped``)."""
        count = getattr(self.encoder, "count_truncations", None)
        if count is None:
            return {}
        if rows.images:  # a colpali system's pairs: their document texts are cut as documents
            if rows.kind != "pairs":
                return {}
            payloads = [text for text, _ in payloads]
        texts, role = list(payloads), self.role(rows)
        out = dict(count(texts, role))
        kept = getattr(self.encoder, "kept_chars", None)
        if image_text_start is not None and kept is not None:
            with_image = [i for i, s in enumerate(image_text_start) if s is not None]
            sub = [texts[i] for i in with_image]
            out |= image_text_cuts(sub, [image_text_start[i] for i in with_image], kept(sub, role) if sub else [])
        return out

    def fn(self, rows: KindRows) -> Callable[[list], np.ndarray]:
        enc = self.encoder
        if self.system.kind == "multivector":  # a list of (tokens_i, dim) arrays
            if rows.query or not rows.images:
                return enc.encode_queries if rows.query else enc.encode_documents
            return enc.encode_pairs if rows.kind == "pairs" else enc.encode_images
        if self.system.kind == "dense":
            return enc.encode_queries if rows.query else enc.encode_documents
        role = "query" if rows.query else "document"
        if rows.kind == "query_image_sets":
            return lambda payloads: encode_image_sets_bytes(enc, payloads, role, self.system.max_query_images)
        if rows.images:
            return lambda datas: enc.encode_image_bytes(datas, batch_size=self.system.batch_size,
                                                        num_workers=getattr(self.system, "num_workers", 0), role=role,
                                                        on_error="blank" if rows.query else "raise")
        return lambda texts: enc.encode_text(texts, role=role)


def encode_image_sets_bytes(encoder, payloads: Sequence[bytes], role: str, cap: int) -> np.ndarray:
    """Vectors ``(n, d)`` of packed image sets (:func:`pack_images`), each set given to ``encoder`` as one input.

    Every image of a set decoded before (``kind_rows`` keeps usable images only); at most ``cap`` per set.

    Raises:
        ValueError: a set of more than ``cap`` images, or not a packed set.
    """
    from mmir.data.images import decode_image

    sets = []
    for i, payload in enumerate(payloads):
        datas = unpack_images(payload)
        if len(datas) > cap:
            raise ValueError(f"image set {i} holds {len(datas)} images, more than max_query_images={cap}")
        sets.append([decode_image(d, source=f"image set {i}, image {j}") for j, d in enumerate(datas)])
    return encoder.encode_image_sets(sets, role=role)
