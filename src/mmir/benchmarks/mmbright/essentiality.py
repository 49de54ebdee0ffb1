"""Image essentiality and image types of the queries (MM-BRIGHT §3.3-3.4, Figures 3-4 and 6, Appendix C-D,
Tables 16-23).

Each query's images are labelled **Essential / Helpful / Redundant** (one label per query, the paper's D.1 criteria:
"If I removed all images, could I still understand what the user is asking and retrieve relevant documents?") and
each image gets one of eight **types** (:data:`IMAGE_TYPES`). Labels come from one of two sources:

* an LLM/VLM through :class:`~mmir.llm.client.LLMClient` (generation cache, versioned prompt files
  ``prompts/essentiality_v1.txt`` and ``prompts/image_type_v1.txt``, the named parsers :data:`ESSENTIALITY_PARSER`
  and :data:`IMAGE_TYPE_PARSER`). A text-only model sees each image as its OCR text plus its alt text, never the
  pixels. A call that failed, or whose reply names no label, leaves the unit **unlabelled** (status ``failed`` /
  ``rejected``, counted, retried on the next run): no default label ever stands in;
* a labels file the user supplies (CSV or parquet: ``query_id``, optional ``image_path``, ``essentiality``,
  ``image_type``; optional ``dataset`` and ``domain``), validated by :func:`read_labels_file` with errors naming the
  file, row and field.

The label frame (:data:`LABEL_COLUMNS`) has one row per query image; the essentiality of the query is repeated on
each of its rows.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from mmir.config.models import EssentialityConfig
from mmir.core.errors import DataError
from mmir.llm.client import LLMClient
from mmir.llm.parsers import Parsed, ReplyParser
from mmir.llm.prompts import PromptTemplate

log = logging.getLogger(__name__)

#: The three essentiality classes (paper §3.4), in table order.
ESSENTIALITY = ("Essential", "Helpful", "Redundant")

#: The eight image types (paper §3.3, Appendix C.1): canonical key -> display name, in table order.
IMAGE_TYPES = {
    "photo": "Photo",
    "diagram": "Diagram",
    "chart": "Chart/Graph",
    "screenshot": "Screenshot",
    "scientific_figure": "Scientific figure",
    "math_notation": "Mathematical notation",
    "mixed": "Mixed",
    "other": "Other",
}

#: Spellings of each type a reply or a labels file may use (matched case-insensitively, longest first).
TYPE_ALIASES = {
    "photo": ("photograph", "photos", "photo"),
    "diagram": ("diagrams", "diagram", "schematic"),
    "chart": ("chart/graph", "charts/graphs", "chart", "graph", "plot"),
    "screenshot": ("screenshots", "screenshot", "screen shot"),
    "scientific_figure": ("scientific figure", "scientific image", "scientific_figure"),
    "math_notation": ("mathematical notation", "math notation", "math_notation", "mathematical", "equation", "formula"),
    "mixed": ("mixed",),
    "other": ("others", "other"),
}

#: Columns of the label frame, one row per query image.
LABEL_COLUMNS = ["qid", "image_path", "image_index", "essentiality", "essentiality_status", "image_type",
                 "image_type_status", "essentiality_raw", "image_type_raw"]


# ------------------------------------------------------------------------------------------------ parsers
def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().strip("*_`\"'<>[]().:").strip()).lower()


def essentiality_label(value: str | None) -> str | None:
    """The class of ``value`` (``"essential"``, ``" Helpful. "``, ``"**Redundant**"``) or ``None``."""
    v = _norm(value or "")
    return next((c for c in ESSENTIALITY if v == c.lower()), None)


def image_type_key(value: str | None) -> str | None:
    """The canonical type key of ``value`` (``"Chart/Graph"`` -> ``"chart"``, ``"scientific figure"`` ->
    ``"scientific_figure"``; display names, keys and :data:`TYPE_ALIASES` are accepted) or ``None``."""
    v = _norm(value or "")
    if not v:
        return None
    for key, name in IMAGE_TYPES.items():
        if v in (key, name.lower()):
            return key
    aliases = sorted(((a, k) for k, al in TYPE_ALIASES.items() for a in al), key=lambda x: -len(x[0]))
    for a, k in aliases:
        if v == a or re.match(rf"{re.escape(a)}\b", v):
            return k
    return None


def _prefix_label(value: str, resolve) -> str | None:
    """The label the first 3, 2 or 1 words of ``value`` name (``"Scientific figure of ..."``, ``"Helpful. The ..."``)."""
    words = re.findall(r"[A-Za-z][A-Za-z/_-]*", value)
    for n in (3, 2, 1):
        if len(words) >= n and (label := resolve(" ".join(words[:n]))) is not None:
            return label
    return None


def _labelled(text: str, keys: Sequence[str], resolve, what: str, json_keys: Sequence[str]) -> Parsed:
    """Shared rule of the two label parsers, in order: a JSON object's label key; every ``<key>: <label>`` line (all
    must agree; a line listing options with ``|``, as the prompt's format line, is ignored); a reply whose first
    line starts with a label. Anything else is rejected (the unit stays unlabelled)."""
    m = re.search(r"\{[^{}]*\}", text, re.S)
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            for k in json_keys:
                if isinstance(obj.get(k), str) and resolve(obj[k]):
                    return Parsed(resolve(obj[k]), True, "json")
    pat = re.compile(rf"(?:^|[^A-Za-z])(?:{'|'.join(keys)})[*_ ]*[:=]\s*(.*)", re.I)
    found = []
    for line in text.splitlines():
        hit = pat.search(line)
        if hit is None or "|" in hit.group(1):
            continue
        label = _prefix_label(hit.group(1), resolve)
        if label is not None:
            found.append(label)
    if found:
        if len(set(found)) > 1:
            return Parsed(None, False, None, f"conflicting {what} labels: {', '.join(dict.fromkeys(found))}")
        return Parsed(found[0], True, "labelled")
    lines = [x for x in text.strip().splitlines() if x.strip()]
    label = _prefix_label(lines[0], resolve) if lines else None
    if label is not None:
        return Parsed(label, True, "first_words")
    return Parsed(None, False, None, f"no {what} label in the reply")


def _parse_essentiality(text: str) -> Parsed:
    return _labelled(text, ("essentiality", "classification", "category", "label", "answer"), essentiality_label,
                     "Essential/Helpful/Redundant", ("essentiality", "classification", "label", "category"))


def _parse_image_type(text: str) -> Parsed:
    return _labelled(text, ("image type", "image_type", "type", "category", "classification", "answer"), image_type_key,
                     "image type", ("image_type", "type", "category", "classification"))


#: Reply parser of the essentiality prompt: value = ``"Essential" | "Helpful" | "Redundant"``.
ESSENTIALITY_PARSER = ReplyParser("essentiality_label", "MM-BRIGHT §3.4, Appendix D.1 (one of three classes)",
                                  _parse_essentiality)
#: Reply parser of the image-type prompt: value = a key of :data:`IMAGE_TYPES`.
IMAGE_TYPE_PARSER = ReplyParser("image_type_label", "MM-BRIGHT §3.3, Appendix C.1 (one of eight types)", _parse_image_type)


# --------------------------------------------------------------------------------------------- the inputs
def image_note(use_images: bool) -> str:
    """What the prompts say about how the images are given (it is part of the rendered input, so of the cache key)."""
    if use_images:
        return ("The images are attached in order; for each, the text an OCR engine read from it and its alt text "
                "are given below too.")
    return ("You cannot see the images: each is given as the text an OCR engine read from it and its alt text "
            "(a written description by the author).")


def describe_image(ocr: str | None, alt: str | None, chars: int) -> str:
    """``OCR text: ... / Alt text: ...`` of one image, each part cut at ``chars`` characters; ``(no text)`` parts
    say so."""
    def cut(s: str | None) -> str:
        s = " ".join((s or "").split())
        return (s[:chars].rstrip() + " ...") if len(s) > chars else (s or "(none)")

    return f"OCR text: {cut(ocr)}\nAlt text: {cut(alt)}"


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars].rstrip() + " ..."


def select_queries(topics: pd.DataFrame, max_queries: int) -> pd.DataFrame:
    """The topics to label: those with at least one (usable) image, in file order, the first ``max_queries``
    (0 = all)."""
    has = topics[[len(p) > 0 for p in topics["image_paths"]]]
    return has if not max_queries else has.head(max_queries)


def classify(topics: pd.DataFrame, images: pd.DataFrame, captions: Mapping[str, str], client: LLMClient,
             essentiality_prompt: PromptTemplate, type_prompt: PromptTemplate, cfg: EssentialityConfig) -> tuple[pd.DataFrame, dict]:
    """Label the queries of ``topics`` with ``client`` (one essentiality call per query, one type call per image).

    Args:
        topics: ``qid, query, image_paths`` (already :func:`select_queries`).
        images: the domain's ``query_images.parquet`` (``path, alt, bytes, ok``).
        captions: image path -> OCR text (the captioner ``evaluation.image_text``).
        client: the classifier (its audit gets every call).
        essentiality_prompt, type_prompt: the templates (fields ``image_note, query, images`` / ``image_note, query,
            image``).
        cfg: ``images`` (also attach the image bytes, a VLM; False = text only: OCR + alt text), ``text_chars`` (cut of
            the query text (×2) and of each image's OCR and alt text), ``temperature``, ``max_tokens``, ``seed``
            (sampling of every call).

    Returns:
        ``(frame, counts)``: frame with :data:`LABEL_COLUMNS` (statuses ``ok`` / ``failed`` / ``rejected``; labels
        ``None`` unless ok), counts ``queries``, ``images``, ``essentiality_failed``, ``image_type_failed``.

    Raises:
        UnsupportedInputError: ``cfg.images`` with a backend that takes no images.
    """
    use_images, text_chars = cfg.images, cfg.text_chars
    alt = dict(zip(images["path"], images["alt"].fillna("") if "alt" in images else [""] * len(images)))
    data = dict(zip(images["path"], images["bytes"])) if use_images else {}
    note = image_note(use_images)

    def parts(text: str, paths: Sequence[str]) -> list[dict] | str:
        if not use_images:
            return text
        return [{"type": "text", "text": text}, *({"type": "image", "image": bytes(data[p])} for p in paths if p in data)]

    ess_msgs, type_msgs, type_ctx = [], [], []
    for qid, query, paths in zip(topics["qid"], topics["query"], topics["image_paths"]):
        desc = "\n\n".join(f"Image {i}:\n{describe_image(captions.get(p), alt.get(p), text_chars)}" for i, p in enumerate(paths, 1))
        q = _cut(str(query), 2 * text_chars)
        ess_msgs.append([{"role": "user", "content": parts(essentiality_prompt.render(image_note=note, query=q, images=desc), paths)}])
        for i, p in enumerate(paths):
            text = type_prompt.render(image_note=note, query=_cut(str(query), text_chars),
                                      image=describe_image(captions.get(p), alt.get(p), text_chars))
            type_msgs.append([{"role": "user", "content": parts(text, [p])}])
            type_ctx.append({"qid": qid, "path": p, "index": i})
    sampling = {"temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "seed": cfg.seed}
    ess = client.call_many(ess_msgs, essentiality_prompt, label="essentiality", parser=ESSENTIALITY_PARSER,
                           contexts=[{"qid": q} for q in topics["qid"]], **sampling)
    typ = client.call_many(type_msgs, type_prompt, label="image_type", parser=IMAGE_TYPE_PARSER, contexts=type_ctx, **sampling)
    by_q = {q: r for q, r in zip(topics["qid"], ess)}
    rows = []
    for ctx, r in zip(type_ctx, typ):
        e = by_q[ctx["qid"]]
        rows.append({"qid": ctx["qid"], "image_path": ctx["path"], "image_index": ctx["index"],
                     "essentiality": e.value if e.ok else None, "essentiality_status": e.status,
                     "image_type": r.value if r.ok else None, "image_type_status": r.status,
                     "essentiality_raw": e.text or "", "image_type_raw": r.text or ""})
    counts = {"queries": len(topics), "images": len(rows), "essentiality_failed": sum(not r.ok for r in ess),
              "image_type_failed": sum(not r.ok for r in typ)}
    for kind, recs in (("essentiality", ess), ("image type", typ)):
        bad = [r for r in recs if not r.ok]
        if bad:
            log.warning("%d of %d %s calls gave no label (left unlabelled, retried on the next run); e.g. %s", len(bad),
                        len(recs), kind, bad[0].error)
    return pd.DataFrame(rows, columns=LABEL_COLUMNS), counts


# ------------------------------------------------------------------------------------------- labels file
LABEL_FILE_COLUMNS = ("query_id", "essentiality")  # required; optional: image_path, image_type, dataset, domain


def read_labels_file(path: str | Path) -> pd.DataFrame:
    """Read and check a user's labels file (``.csv``, ``.tsv`` or ``.parquet``).

    Columns: ``query_id`` and ``essentiality`` (required, one of :data:`ESSENTIALITY`, any case), ``image_type``
    (optional, blank = no type; a type name or key of :data:`IMAGE_TYPES` or an alias), ``image_path`` (optional:
    then rows are per image, else per query and the type is the query's), ``dataset``, ``domain`` (optional).

    Returns:
        The rows with ``query_id, image_path ("" when absent), essentiality (canonical), image_type (key or None),
        dataset, domain ("" when absent), row`` (0-based data row of the file).

    Raises:
        DataError: naming the file, row and field: unreadable file, a missing column, an empty ``query_id``, an
            unknown essentiality or image type, a duplicate (query, image) row, or one query with two essentiality
            labels.
    """
    p = Path(path)
    try:
        if p.suffix == ".parquet":
            df = pd.read_parquet(p)
        elif p.suffix in (".csv", ".tsv"):
            df = pd.read_csv(p, sep="\t" if p.suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
        else:
            raise DataError(str(p), "labels file must be .csv, .tsv or .parquet")
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(str(p), f"cannot read the labels file: {exc}") from exc
    missing = [c for c in LABEL_FILE_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(str(p), f"missing column(s) {', '.join(missing)} (has: {', '.join(map(str, df.columns))})",
                        field=missing[0])
    rows, first_label, seen = [], {}, set()
    def cell(r: dict, c: str) -> str:
        v = r.get(c)
        return "" if v is None or (isinstance(v, float) and v != v) else str(v).strip()

    for i, r in enumerate(df.to_dict("records")):
        def val(c, r=r):
            return cell(r, c)

        qid = val("query_id")
        if not qid:
            raise DataError(str(p), "empty query_id", row=i, field="query_id")
        ess = essentiality_label(val("essentiality"))
        if ess is None:
            raise DataError(str(p), f"essentiality {val('essentiality')!r} is not one of {', '.join(ESSENTIALITY)}",
                            row=i, field="essentiality")
        t_raw = val("image_type")
        typ = image_type_key(t_raw) if t_raw else None
        if t_raw and typ is None:
            raise DataError(str(p), f"image_type {t_raw!r} is not one of {', '.join(IMAGE_TYPES.values())}", row=i,
                            field="image_type")
        ds, dom, img = val("dataset"), val("domain"), val("image_path")
        key = (ds, dom, qid, img)
        if key in seen:
            raise DataError(str(p), f"duplicate row for query {qid!r}" + (f" image {img!r}" if img else ""), row=i,
                            field="image_path" if img else "query_id")
        seen.add(key)
        q = (ds, dom, qid)
        if q in first_label and first_label[q][0] != ess:
            raise DataError(str(p), f"query {qid!r} is labelled {first_label[q][0]} in row {first_label[q][1]} and {ess} "
                            "here (essentiality is one label per query)", row=i, field="essentiality")
        first_label.setdefault(q, (ess, i))
        rows.append({"query_id": qid, "image_path": img, "essentiality": ess, "image_type": typ, "dataset": ds,
                     "domain": dom, "row": i})
    return pd.DataFrame(rows, columns=["query_id", "image_path", "essentiality", "image_type", "dataset", "domain", "row"])


def labels_from_file(file_rows: pd.DataFrame, topics: pd.DataFrame, dataset: str, domain: str,
                     source: str | Path) -> tuple[pd.DataFrame, dict]:
    """The label frame of one domain from :func:`read_labels_file` rows.

    Rows whose ``dataset`` / ``domain`` are set and differ are other units' (ignored). Rows naming this domain (or
    naming none) are matched by ``query_id`` to ``topics`` (``qid, image_paths``); a per-image row (``image_path``)
    types that image, a per-query row types every image of the query. Queries of ``topics`` the file does not label
    stay out of the frame (counted ``unlabelled_queries``).

    Raises:
        DataError: a row that names this domain (``dataset``/``domain`` columns) but a query it does not have, or an
            image that is not among its query's images (file, row, field).
    """
    src = str(source)
    mine = file_rows[((file_rows["dataset"] == "") | (file_rows["dataset"] == dataset))
                     & ((file_rows["domain"] == "") | (file_rows["domain"] == domain))]
    images_of = {q: list(p) for q, p in zip(topics["qid"], topics["image_paths"])}
    rows, matched, unmatched = [], set(), 0
    by_query: dict[str, list[dict]] = {}
    for r in mine.to_dict("records"):
        if r["query_id"] not in images_of:
            if r["domain"]:
                raise DataError(src, f"query {r['query_id']!r} is not a query of {dataset}/{domain}", row=r["row"],
                                field="query_id")
            unmatched += 1
            continue
        if r["image_path"] and r["image_path"] not in images_of[r["query_id"]]:
            raise DataError(src, f"image {r['image_path']!r} is not an image of query {r['query_id']!r} (its images: "
                            f"{', '.join(images_of[r['query_id']]) or 'none'})", row=r["row"], field="image_path")
        by_query.setdefault(r["query_id"], []).append(r)
    for qid, paths in images_of.items():
        got = by_query.get(qid)
        if not got or not paths:
            continue
        matched.add(qid)
        per_image = {r["image_path"]: r for r in got if r["image_path"]}
        whole = next((r for r in got if not r["image_path"]), None)
        for i, p in enumerate(paths):
            r = per_image.get(p) or whole
            typ = r["image_type"] if r is not None and isinstance(r["image_type"], str) else None
            rows.append({"qid": qid, "image_path": p, "image_index": i, "essentiality": got[0]["essentiality"],
                         "essentiality_status": "file", "image_type": typ,
                         "image_type_status": "file" if typ is not None else "unlabelled",
                         "essentiality_raw": "", "image_type_raw": ""})
    with_images = sum(1 for p in images_of.values() if p)
    counts = {"queries": len(matched), "images": len(rows), "file_rows": len(mine), "file_rows_unmatched": unmatched,
              "unlabelled_queries": with_images - len(matched), "essentiality_failed": 0, "image_type_failed": 0}
    return pd.DataFrame(rows, columns=LABEL_COLUMNS), counts


def class_counts(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """``{"essentiality": {class: queries, "unlabelled": n}, "image_type": {type key: images, "unlabelled": n}}`` of
    a label frame (every class listed, 0 when absent)."""
    q = frame.drop_duplicates("qid")
    ess = {c: int((q["essentiality"] == c).sum()) for c in ESSENTIALITY}
    ess["unlabelled"] = int(q["essentiality"].isna().sum())
    typ = {k: int((frame["image_type"] == k).sum()) for k in IMAGE_TYPES}
    typ["unlabelled"] = int(frame["image_type"].isna().sum())
    return {"essentiality": ess, "image_type": typ}
