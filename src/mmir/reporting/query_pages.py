"""The query pages of the report: one HTML file per (task, dataset, domain), ``results/report/queries/<task>/<dataset>/
<domain>.html``, beside ``index.html`` and linked from its table cells, so the first page stays small.

A page lists the domain's queries (:mod:`mmir.reporting.query_data`): text, image thumbnails (files in
``queries/thumbs/``, :mod:`mmir.reporting.thumbnails`), gold items, essentiality class, image type, number of images
and per system the primary measure and the rank of the first relevant item; the table sorts by any column and filters
by the difference of two chosen systems, essentiality, image type and number of images (inline vanilla JavaScript,
``templates/queries.js``). A query opens to every system's top 10 with relevance marks, document excerpts, images
(Task 3), pairs (Task 4) and, for a reranked system, each item's rank in its first stage. Above the table, every system
against the baseline and every reranked system against its first stage: wins / ties / losses, the mean difference,
a per-query scatter (:mod:`mmir.reporting.scatter`) and the queries with the largest differences
(:mod:`mmir.evaluation.compare`).

The page loads nothing from the network: style and script are inline, the data is a JSON ``<script>`` block
(``<``, ``>`` and ``&`` escaped as ``\\u003c`` ...), the thumbnails are relative files of the report folder.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mmir.core.io import write_text
from mmir.core.tasks import TASKS
from mmir.evaluation.compare import largest_differences, record
from mmir.reporting.query_data import MAX_GOLD, DomainData, DomainFiles, load_domain
from mmir.reporting.scatter import scatter_svg
from mmir.reporting.thumbnails import Thumbnails

log = logging.getLogger("mmir.reporting.query_pages")

QUERIES_DIR = "queries"
THUMBS_DIR = "thumbs"
#: queries listed with the largest differences of one comparison
LARGEST = 5
#: characters of a query's text in the query table (the whole text is in the opened query)
QUERY_CHARS = 400


def page_href(task: str, dataset: str, domain: str) -> str:
    """The page's path relative to ``index.html`` (URL-quoted)."""
    return "/".join(quote(p, safe="") for p in (QUERIES_DIR, task, dataset, domain)) + ".html"


def page_file(report_dir: str | Path, task: str, dataset: str, domain: str) -> Path:
    return Path(report_dir) / QUERIES_DIR / task / dataset / f"{domain}.html"


@dataclass
class DomainScores:
    """What the summary needs of one page: the per-query values ``{system: {qid: value}}``, the query texts and the
    page's link."""

    files: DomainFiles
    scores: dict[str, dict[str, float]]
    texts: dict[str, str]
    href: str
    queries: int = 0


def pairs_of(files: DomainFiles) -> list[tuple[str, str, str]]:
    """``(A, B, against)`` of a page's comparisons: every other system against the baseline, then every reranked
    system against its first stage (``against``: ``"baseline"`` or ``"first stage"``)."""
    base = files.base
    out = [(s, base, "baseline") for s in files.systems if s != base]
    out += [(rr, fs, "first stage") for rr, fs in files.first_stage.items() if rr in files.runs and fs in files.runs and fs != base]
    return out


def comparison(a: dict, b: dict, name_a: str, name_b: str, against: str, texts: dict, href=None, k: int = LARGEST,
               size: int = 170) -> dict[str, Any]:
    """One comparison's context: names, wins / ties / losses, mean difference over paired queries, scatter, largest
    differences (``href(key)``: the link of a query; keys are qids or ``(domain, qid)``)."""
    from markupsafe import Markup

    rec = record(a, b)
    keys = [q for q in a if q in b]
    mean = sum(a[q] - b[q] for q in keys) / len(keys) if keys else None
    largest = [{"key": d.key, "qid": d.key[-1] if isinstance(d.key, tuple) else d.key,
                "domain": d.key[0] if isinstance(d.key, tuple) else None, "a": d.a, "b": d.b, "diff": d.diff,
                "text": _short(texts.get(d.key, ""), 160), "href": href(d.key) if href else f"#q-{quote(str(d.key), safe='')}"}
               for d in largest_differences(a, b, k)]
    return {"a": name_a, "b": name_b, "against": against, "wins": rec.wins, "ties": rec.ties, "losses": rec.losses,
            "n": rec.n, "mean_diff": mean, "largest": largest,
            "scatter": Markup(scatter_svg(a, b, name_a, name_b, size=size))}  # the heading above names the pair


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def json_block(obj: Any) -> str:
    """``obj`` as JSON safe inside a ``<script type="application/json">`` element (no ``<``, ``>``, ``&``)."""
    from markupsafe import Markup

    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def page_context(data: DomainData, thumbs_href: str) -> dict[str, Any]:
    """What ``queries.html.j2`` shows of one domain (see the module docstring)."""
    f = data.files
    spec = TASKS[f.task]
    label = f.label
    texts = {q.qid: q.text for q in data.queries}

    def thumb(path: str) -> dict[str, Any]:
        name = data.thumbs.get(path)
        return {"path": path, "src": f"{thumbs_href}/{name}" if name else None, "alt": data.alts.get(path, "")}

    comps = [comparison(data.scores(a), data.scores(b), label(a), label(b), against, texts) for a, b, against in pairs_of(f)]
    rows = []
    for q in data.queries:
        gold = []
        for g, rel in q.gold[:MAX_GOLD]:
            it = data.items.get(g, {})
            gold.append({"id": g, "rel": rel, "text": it.get("text", ""),
                         "image": thumb(it["image"]) if it.get("image") else None})
        rows.append({"qid": q.qid, "text": _short(q.text, QUERY_CHARS), "images": [thumb(p) for p in q.images],
                     "gold": gold, "n_gold": len(q.gold), "essentiality": q.essentiality, "image_type": q.image_type,
                     "n_images": q.n_images, "scores": [q.scores.get(s) for s in f.systems],
                     "first": [q.first.get(s) for s in f.systems]})
    items = {}
    for i, it in data.items.items():
        img = it.get("image")
        items[i] = {**it, **({"thumb": f"{thumbs_href}/{data.thumbs[img]}"} if img and data.thumbs.get(img) else {}),
                    **({"alt": _short(data.alts[img], 300)} if img and data.alts.get(img) else {})}
    payload = {"task": f.task, "ranks": spec.ranks, "graded": spec.graded, "measure": f.measure, "systems": f.systems,
               "labels": {s: label(s) for s in f.systems}, "baseline": f.base, "first_stage": f.first_stage,
               "queries": {q.qid: {"text": q.text, "top": q.top, "inputs": q.inputs} for q in data.queries}, "items": items}
    facets = {k: sorted({getattr(q, k) for q in data.queries if getattr(q, k)}) for k in ("essentiality", "image_type", "n_images")}
    return {"title": f"{spec.short} · {f.dataset} · {f.domain}", "task_label": spec.label, "task": f.task,
            "dataset": f.dataset, "domain": f.domain, "measure": f.measure, "index_href": "../../../index.html",
            "systems": [{"name": s, "label": label(s), "baseline": s == f.base, "first_stage": f.first_stage.get(s)}
                        for s in f.systems], "comparisons": comps, "rows": rows, "facets": facets,
            "graded": spec.graded, "ranks": spec.ranks, "data": json_block(payload), "script": script()}


def script() -> str:
    """The page's JavaScript (``templates/queries.js``), inlined as it is (it holds no ``</script``)."""
    from importlib.resources import files

    from markupsafe import Markup

    text = files("mmir.reporting").joinpath("templates/queries.js").read_text(encoding="utf-8")
    if "</script" in text.lower():
        raise ValueError("templates/queries.js must not contain '</script'")
    return Markup(text)


def render_page(data: DomainData, thumbs_href: str = f"../../{THUMBS_DIR}") -> str:
    from mmir.reporting.html import environment

    return environment().get_template("queries.html.j2").render(**page_context(data, thumbs_href))


@dataclass
class PagesResult:
    """The pages written: ``domains`` (one :class:`DomainScores` each, in input order), total bytes, thumbnail counts."""

    domains: list[DomainScores] = field(default_factory=list)
    pages: int = 0
    bytes: int = 0
    queries: int = 0
    thumbnails: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def write_query_pages(units: Sequence[DomainFiles], report_dir: str | Path, thumbnail_cache: str | Path) -> PagesResult:
    """Write the page of every unit into ``report_dir/queries/`` (thumbnails into ``queries/thumbs``) atomically.

    Raises:
        FileNotFoundError, DataError: as :func:`mmir.reporting.query_data.load_domain`.
    """
    t0 = time.perf_counter()
    thumbs = Thumbnails(thumbnail_cache, Path(report_dir) / QUERIES_DIR / THUMBS_DIR)
    out = PagesResult()
    for u in units:
        data = load_domain(u, thumbs)
        html = render_page(data)
        write_text(page_file(report_dir, u.task, u.dataset, u.domain), html)
        out.pages += 1
        out.bytes += len(html.encode("utf-8"))
        out.queries += len(data.queries)
        out.domains.append(DomainScores(u, {s: data.scores(s) for s in u.systems}, {q.qid: q.text for q in data.queries},
                                        page_href(u.task, u.dataset, u.domain), len(data.queries)))
        log.info("query page %s/%s/%s: %d queries, %d systems, %d items shown, %d bytes", u.task, u.dataset, u.domain,
                 len(data.queries), len(u.systems), len(data.items), len(html.encode("utf-8")))
    out.thumbnails, out.failures = thumbs.counts(), list(thumbs.failures)
    out.seconds = time.perf_counter() - t0
    return out
