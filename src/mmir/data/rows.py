"""The row checks of the documents and query tables, whatever source they were read from (:mod:`mmir.data.frames`):
ids, texts, lists, judgements and image references, each problem named at its file, line or row, and field, each
policy of ``datasets.<name>.integrity`` applied (:mod:`mmir.data.prepare` lists them)."""

from __future__ import annotations

import pandas as pd

from mmir.core.errors import DataError
from mmir.data.checks import Checks, NearMiss
from mmir.data.frames import line_of
from mmir.data.images import check_relative
from mmir.data.lines import field_break
from mmir.data.parquet import as_answers, as_id, as_ref_list, as_text, norm_ref


def trec_safe(ident: str, what: str, file: str, row: int, field: str, line: int | None) -> None:
    """Check that a TREC run or qrels line can hold ``ident`` (:func:`mmir.data.lines.field_break`).

    Raises:
        DataError: naming file, place and field: the id holds a space, tab or line break.
    """
    brk = field_break(ident)
    if brk:
        raise DataError(file, f"{what} {ident!r} holds a {brk}: TREC run and qrels files split their fields at spaces "
                        "and tabs, so no run could be scored against it; rename the id in the source", row, field, line)


def check_corpus(docs: pd.DataFrame, checks: Checks) -> pd.DataFrame:
    """The ``documents`` table (``id``, ``content``, ``_file``, ``_row``, optional ``_line`` and ``_id_field``: the
    source's name of the id) checked, as ``doc_id, text`` (str): ids normalised (:func:`~mmir.data.parquet.norm_ref`)
    when ``checks.windows_ids``, else kept as written, texts stripped under ``integrity.text_whitespace: strip``
    (counted), a duplicate id per ``integrity.duplicate_doc_ids``.

    Raises:
        DataError: an empty id or one a TREC file cannot hold (:func:`trec_safe`), a missing or non-text content, a
            duplicate id under ``error`` (file, place, field).
    """
    strip = checks.policy["text_whitespace"] == "strip"
    seen: dict[str, tuple[str, str]] = {}
    ids, texts = [], []
    lines = docs["_line"] if "_line" in docs.columns else [None] * len(docs)
    keys = docs["_id_field"] if "_id_field" in docs.columns else [None] * len(docs)
    for did, text, f, r, n, key in zip(docs["id"], docs["content"], docs["_file"], docs["_row"], lines, keys):
        n, key = line_of(n), key or "id"
        try:
            raw = as_id(did, f, r, key)
            text = as_text(text, f, r, "content", f"the content of document {raw!r}")
        except DataError as exc:
            raise exc.at_line(n) from None
        if raw is None:
            raise DataError(f, "empty or missing document id", r, key, n)
        trec_safe(raw, "document id", f, r, key, n)
        did = norm_ref(raw) if checks.windows_ids else raw
        if did != raw:
            checks.counts["backslash_refs"] = checks.counts.get("backslash_refs", 0) + 1
        if text is None:
            raise DataError(f, f"missing content for document {raw!r}", r, "content", n)
        if strip and text != text.strip():
            text = text.strip()
            checks.stripped["documents"] += 1
        if did in seen:
            first, first_raw = seen[did]
            same = "" if first_raw == raw else f", written {first_raw!r} there: this layout reads a backslash in an id as /"
            checks.problem(
                "duplicate_doc_ids",
                DataError(f, f"duplicate document id {raw!r} (first at {first}{same})", r, key, n),
            )
            continue
        seen[did] = (f"line {n}" if n is not None else f"row {r}", raw)
        ids.append(did)
        texts.append(text)
    return pd.DataFrame({"doc_id": ids, "text": texts})


_LISTS = ("gold_ids", "negative_ids", "image_paths", "positive_images", "negative_images")
#: the lists of document ids (the others hold image paths, always read with / as separator)
_ID_LISTS = ("gold_ids", "negative_ids")


def read_queries(ex: pd.DataFrame, config: str, doc_ids: set[str], checks: Checks,
                 query_images: pd.DataFrame | None = None, images: pd.DataFrame | None = None) -> list[dict]:
    """Check one query config (``examples`` or ``examples_multimodal``, with ``_file``/``_row``, optionally
    ``_line``, ``_judged``, ``_gold_at``: :mod:`mmir.data.frames`) and return one record per query kept: ``qid,
    query, gold`` (ids in the corpus), ``negatives`` (in the corpus), ``gold_answers``, ``image_paths`` and, for the
    multimodal config, ``positive_images`` and ``negative_images``.

    A query is judged when the source's qrels name it (``_judged``) or, without qrels, when its ``gold_ids`` list is
    not empty; the others follow ``integrity.unjudged_queries``. ``query_images`` (checked ``examples_images``)
    resolves ``image_paths``: an absent or undecodable image is left out of the query's images. ``images`` (checked
    ``document_images``) resolves ``positive_images``. Both are None when the domain has no such table (the
    references are kept as they are).

    Raises:
        DataError: naming file, line or row, and field (see the module docstring for every rule and policy).
    """
    prefix = "mm_" if config == "examples_multimodal" else ""
    wanted = _LISTS if prefix else _LISTS[:3]
    if len(ex):
        f0 = ex["_file"].iloc[0]
        if "negative_ids" not in ex.columns and "excluded_ids" in ex.columns:
            raise DataError(f0, "this is BRIGHT's layout (excluded_ids, no negative_ids): read it with `source: bright` "
                                "(and `root:` for a local copy), which removes each query's excluded_ids from its ranking; "
                                "`source: local` would keep them", field="negative_ids")
        for col in wanted:
            if col not in ex.columns:
                checks.note(f"{prefix}column_missing", f"{f0}, field '{col}': column absent; read as [] for every query"
                            + (" (no Task 3 qrels)" if col == "positive_images" else ""))
    qimg_ok = None if query_images is None else dict(zip(query_images["path"], query_images["ok"]))
    img_paths = None if images is None else set(images["path"])
    unjudged, strip, near = checks.policy["unjudged_queries"], checks.policy["text_whitespace"] == "strip", NearMiss(doc_ids)
    out, seen = [], {}
    missing_q, missing_p, n_qrefs, n_prefs = [], [], 0, 0
    for rec in ex.to_dict("records"):
        f, r, n = rec["_file"], rec["_row"], line_of(rec.get("_line"))
        if not prefix:
            checks.read("topics")
        key = rec.get("_id_field") or "id"
        try:
            qid = as_id(rec["id"], f, r, key)
        except DataError as exc:
            raise exc.at_line(n) from None
        if qid is None:
            raise DataError(f, "empty or missing query id", r, key, n)
        trec_safe(qid, "query id", f, r, key, n)
        lists = {}
        for col in wanted:
            if col not in rec:
                lists[col] = []
                continue
            try:
                value = as_ref_list(rec[col], f, r, col, checks.counts, norm=checks.windows_ids or col not in _ID_LISTS)
            except DataError as exc:
                raise exc.at_line(n) from None
            if value is None:
                checks.problem("null_lists", DataError(
                    f, f"null {col} for query {qid!r}: a list is required (integrity.null_lists: warn reads it as [])",
                    r, col, n), prefix)
                value = []
            lists[col] = value
        gold_at = rec.get("_gold_at") if "_gold_at" in rec else None
        judged = bool(rec["_judged"]) if "_judged" in rec else bool(lists["gold_ids"])
        if not judged:
            if unjudged == "error":
                raise DataError(f, f"query {qid!r} has no judgement (integrity.unjudged_queries: drop leaves it out, "
                                   "keep ranks it unscored)", r, "id", n)
            checks.note(f"{prefix}unjudged_queries", f"{f}, {'line ' + str(n) if n is not None else 'row ' + str(r)}: "
                        f"query {qid!r} has no judgement ({'dropped' if unjudged == 'drop' else 'kept, not scored'})")
            if unjudged == "drop":
                if not prefix:
                    checks.drop("topics", "unjudged", ident=qid)
                continue
        if qid in seen:
            raise DataError(f, f"duplicate query id {qid!r} (first at {seen[qid]})", r, key, n)
        seen[qid] = f"line {n}" if n is not None else f"row {r}"
        field_name = rec.get("_query_field") or "query"
        try:
            query = as_text(rec["query"], f, r, field_name, f"the text of query {qid!r}")
        except DataError as exc:
            raise exc.at_line(n) from None
        if query is None or not query.strip():
            raise DataError(f, f"empty query text for query {qid!r}", r, field_name, n)
        if strip and query != query.strip():
            query = query.strip()
            key = f"{prefix}queries"
            checks.stripped[key] = checks.stripped.get(key, 0) + 1
        gold_ok = _gold(qid, lists["gold_ids"], gold_at, doc_ids, near, checks, prefix, (f, r, n))
        negatives = lists["negative_ids"]
        overlap = [x for x in negatives if x in set(gold_ok)]
        if overlap:
            checks.problem("excluded_overlaps_gold", DataError(
                f, f"query {qid!r}: {len(overlap)} excluded id(s) are also gold, e.g. {overlap[0]!r}", r, "negative_ids", n), prefix)
        excl = [x for x in dict.fromkeys(negatives) if x in doc_ids]
        key = f"{prefix}excluded_not_in_corpus"
        checks.counts[key] = checks.counts.get(key, 0) + len(set(negatives)) - len(excl)
        if not gold_ok and judged:
            checks.problem("no_gold", DataError(f, f"query {qid!r} has no gold id in the corpus; it is not scored",
                                                r, "gold_ids", n), prefix)
        paths = []
        for p in lists["image_paths"]:
            try:
                check_relative(p, checks.root)
            except DataError as exc:
                raise DataError(f, f"unsafe image path: {exc}", r, "image_paths", n) from exc
            if qimg_ok is None:
                paths.append(p)
                continue
            n_qrefs += 1
            if p not in qimg_ok:
                missing_q.append((f, r, "image_paths", qid, p))
            elif qimg_ok[p]:
                paths.append(p)  # an undecodable query image (counted as query_images_corrupt) is left out
        q = {"qid": qid, "query": query, "gold": gold_ok, "negatives": excl, "image_paths": paths,
             "gold_answers": as_answers(rec.get("gold_answers"), f, r) if "gold_answers" in rec else []}
        if prefix:
            pos = list(dict.fromkeys(lists["positive_images"]))
            if img_paths is not None:
                n_prefs += len(pos)
                missing_p += [(f, r, "positive_images", qid, p) for p in pos if p not in img_paths]
                pos = [p for p in pos if p in img_paths]
            q |= {"positive_images": pos, "negative_images": lists["negative_images"]}
        out.append(q)
    checks.unresolved("missing_query_images", missing_q, n_qrefs, "query image references",
                      "examples_images", prefix)
    checks.unresolved("missing_positive_images", missing_p, n_prefs, "positive image references",
                      "document_images", prefix)
    return out


def _gold(qid: str, gold_ids: list[str], gold_at: list | None, doc_ids: set[str], near: NearMiss, checks: Checks,
          prefix: str, at: tuple) -> list[str]:
    """The gold ids of one query found in the corpus, each once; a missing one follows ``integrity.missing_gold``,
    named at its qrels line (``gold_at``: the source's qrels, :mod:`mmir.data.judgements`) or at the query's row.
    Task 1's judgement ledger counts the entries of a ``gold_ids`` list (a qrels source counted its rows)."""
    ledger = not prefix
    if ledger and gold_at is None:
        checks.read("qrels", len(gold_ids))
    out, seen = [], set()
    for i, g in enumerate(gold_ids):
        if g in seen:
            if ledger:
                checks.drop("qrels", "duplicate", ident=qid)
            continue
        seen.add(g)
        if g in doc_ids:
            out.append(g)
            continue
        if gold_at is not None:
            file, row, line = gold_at[i]
            err = DataError(file, f"document {g!r} judged for query {qid!r} is not in the corpus{near(g, 'the corpus')}",
                            row, "corpus-id", line)
        else:
            err = DataError(at[0], f"gold id {g!r} of query {qid!r} is not in the corpus{near(g, 'the corpus')}",
                            at[1], "gold_ids", at[2])
        checks.problem("missing_gold", err, prefix)
        if ledger:
            checks.drop("qrels", "missing_gold", ident=qid)
    return out
