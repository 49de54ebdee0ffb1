"""The report: one self-contained HTML page (``results/report/index.html``) that opens with a summary of every task
table (:mod:`mmir.reporting.summary`), then shows every table the config produced with its figures and notes, and
ends, folded, with the lineage of its numbers and every CSV cell; a task table's domain columns link to the domain's
query page (:mod:`mmir.reporting.query_pages`, relative files beside the page).

The page loads nothing from outside its folder: no script, stylesheet, font or image URL; figures are embedded as
``data:`` URIs and the style sheet is inline. It is rendered by Jinja2 with autoescape (template
``templates/report.html.j2``): every value from a table or the config is escaped; the only markup passed through is
markdown-it's rendering of the tables' markdown, which escapes raw HTML itself (:mod:`mmir.reporting.markdown`), and
the summary's SVG figures, built with every text escaped (:mod:`mmir.reporting.scatter`, :mod:`mmir.reporting.forest`).

Each table is shown twice: its markdown (title, notes, the table with its significance markers, interval tables,
footnotes; exactly what ``<name>.md`` says; a task table's notes, interval and test tables folded under it) and, folded
at the end, every cell of ``<name>.csv`` as written.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.core.io import write_text
from mmir.core.tasks import TASKS, table_tasks
from mmir.reporting.markdown import parser, plain_text

#: The order of the known tables on the page; any other table follows, by name.
ORDER = (*table_tasks(), "caption_ablation", "reformulation_ablation", "rag", "m2rag", "mmdr",
         "essentiality", "audit", "reproduction")
#: What the navigation calls the known tables when their markdown has no title.
LABELS = {**{t: TASKS[t].short for t in table_tasks()}, "rag": "RAG QA", "m2rag": "M2RAG",
          "mmdr": "MMDeepResearch-Bench", "reproduction": "Reproduction check", "essentiality": "Essentiality", "audit": "Quality audit",
          "caption_ablation": "Caption ablation", "reformulation_ablation": "Reformulation ablation"}
#: Table cells whose whole text is a reproduction status get this class: the style sheet draws a coloured dot before
#: them (CSS, not an emoji: no font needed).
STATUS_CLASSES = {"OK": "status status-ok", "OKish": "status status-okish", "FAIL": "status status-fail",
                  "not run": "status status-not-run"}
IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_SUFFIXES = (".significance.json", ".metrics.json", ".md", ".csv", ".tex")


@dataclass
class ReportTable:
    """The files of one table: ``results/tables/<name>.{md,csv,significance.json}``, its figures
    (``results/plots/<name>*.png``) and its MLflow record (``results/tracking/<name>.json``)."""

    name: str
    md: Path | None = None
    csv: Path | None = None
    significance: Path | None = None
    tracking: Path | None = None
    figures: list[Path] = field(default_factory=list)


def _stem(path: Path) -> str:
    n = path.name
    for s in _SUFFIXES:
        if n.endswith(s):
            return n[: -len(s)]
    return path.stem


def group_tables(files: Sequence[str | Path]) -> list[ReportTable]:
    """The tables among ``files`` (the report rule's inputs), in :data:`ORDER`, then by name.

    A file belongs to table ``<name>`` by its name: ``results/tables/<name>.md`` / ``.csv`` / ``.significance.json``,
    ``results/tracking/<name>.json``, a figure ``results/plots/<name>.png`` or ``<name>_<anything>.png`` (plot data
    CSVs are left out: the figure shows them). A table needs its ``.md`` or its ``.csv``; figures of no table
    become a table of their own (figures only). Other files are ignored.
    """
    tables: dict[str, ReportTable] = {}
    figures: list[Path] = []
    tracking: dict[str, Path] = {}
    for f in map(Path, files):
        parent = f.parent.name
        if parent == "tables" and f.name.endswith((".md", ".csv", ".significance.json")):
            t = tables.setdefault(_stem(f), ReportTable(_stem(f)))
            kind = "significance" if f.name.endswith(".significance.json") else f.suffix[1:]
            setattr(t, kind, f)
        elif parent == "plots" and f.suffix.lower() in IMAGE_TYPES:
            figures.append(f)
        elif parent == "tracking" and f.suffix == ".json":
            tracking[f.stem] = f
    for fig in figures:
        owner = next((n for n in sorted(tables, key=len, reverse=True) if fig.stem == n or fig.stem.startswith(n + "_")), None)
        if owner is None:
            owner = fig.stem.split("_")[0] if fig.stem.split("_")[0] in tables else fig.stem
            tables.setdefault(owner, ReportTable(owner))
        tables[owner].figures.append(fig)
    for name, t in tables.items():
        t.tracking = tracking.get(name)
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(tables.values(), key=lambda t: (rank.get(t.name, len(ORDER)), t.name))


def data_uri(path: str | Path) -> str:
    """The file as a ``data:`` URI (base64), typed by its suffix.

    Raises:
        ValueError: not an image type of :data:`IMAGE_TYPES`.
    """
    p = Path(path)
    kind = IMAGE_TYPES.get(p.suffix.lower())
    if kind is None:
        raise ValueError(f"{p}: not an image the report can embed ({', '.join(IMAGE_TYPES)})")
    return f"data:{kind};base64," + base64.b64encode(p.read_bytes()).decode("ascii")


def sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


#: A markdown table whose cells would need more characters side by side than this (its widest cell per column, plus
#: padding) is shown transposed when it has fewer rows than columns (M2RAG, MMDR: a few rows of many metrics).
WIDE_CHARS = 160


def _table_cells(tokens: list) -> list[list]:
    """The inline token of each cell of one table's tokens, per row (header first)."""
    rows: list[list] = []
    for t in tokens:
        if t.type == "tr_open":
            rows.append([])
        elif t.type == "inline":
            rows[-1].append(t)
    return rows


def _transposed(tokens: list) -> list:
    """One table's tokens (``table_open`` .. ``table_close``) with rows and columns swapped when it is wide (see
    :data:`WIDE_CHARS`), else as they are. The original first column becomes the header row."""
    from markdown_it.token import Token

    rows = _table_cells(tokens)
    ncol = max(len(r) for r in rows)
    chars = sum(max((len(r[c].content) for r in rows if c < len(r)), default=0) + 3 for c in range(ncol))
    if chars <= WIDE_CHARS or len(rows) >= ncol:
        return tokens
    empty = Token("inline", "", 0, content="", children=[])
    grid = [[r[c] if c < len(r) else empty for r in rows] for c in range(ncol)]
    head = Token("table_open", "table", 1, attrs=dict(tokens[0].attrs))
    head.attrSet("data-transposed", "true")
    out = [head, Token("thead_open", "thead", 1)]
    for k, line in enumerate(grid):
        if k == 1:
            out.append(Token("tbody_open", "tbody", 1))
        cell = "th" if k == 0 else "td"
        out.append(Token("tr_open", "tr", 1))
        for inline in line:
            out += [Token(f"{cell}_open", cell, 1), inline, Token(f"{cell}_close", cell, -1)]
        out.append(Token("tr_close", "tr", -1))
        if k == 0:
            out.append(Token("thead_close", "thead", -1))
    return out + [Token("tbody_close", "tbody", -1), Token("table_close", "table", -1)]


def _fit_tables(tokens: list) -> list:
    """``tokens`` with every wide table transposed (:func:`_transposed`) and the text of every table cell marked for
    line-break opportunities after a ``/`` or ``_`` between word characters (long KB sources, model names: see ``render_markdown``)."""
    out, i = [], 0
    while i < len(tokens):
        if tokens[i].type != "table_open":
            out.append(tokens[i])
            i += 1
            continue
        j = next(k for k in range(i, len(tokens)) if tokens[k].type == "table_close")
        for t in tokens[i:j + 1]:
            for c in (t.children or []) if t.type == "inline" else []:
                if c.type == "text":
                    c.meta = {**(c.meta or {}), "wbr": True}
        out += _transposed(tokens[i:j + 1])
        i = j + 1
    return out


def _link_cells(tokens: list, links: Mapping[tuple[str, str], str]) -> None:
    """Wrap, in place, the header cell of every column named in ``links`` (``{(section, column): href}``) and the value
    cells under it in a link to ``href``; only the first table of each section (the task table, not its interval
    and test tables)."""
    from markdown_it.token import Token

    section, seen, header, col, in_table, in_head = "", set(), [], 0, False, False
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            section = tokens[i + 1].content.strip()
        elif t.type == "table_open":
            in_table = section not in seen
            seen.add(section)
            header = []
        elif t.type == "table_close":
            in_table = False
        elif t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "tr_open":
            col = 0
        elif t.type == "inline" and in_table and tokens[i - 1].type in ("th_open", "td_open"):
            if in_head:
                header.append(t.content.strip())
            href = links.get((section, header[col] if col < len(header) else ""))
            if href and col > 0:
                t.children = [Token("link_open", "a", 1, attrs={"href": href}), *(t.children or []),
                              Token("link_close", "a", -1)]
            col += 1


def render_markdown(text: str, name: str, links: Mapping[tuple[str, str], str] | None = None,
                    fold: bool = False) -> tuple[str | None, str]:
    """``(title, html)`` of a table's markdown: the first level-1 heading is the title (left out of the HTML), the
    other headings move one level down (the page's sections are ``h2``), each table gets ``class="md-table"``,
    ``data-table=<name>``, ``data-section=<its nearest heading>`` and ``data-index`` (0-based), inside a scrolling
    ``div``. To fit the page, a cell's text may break after a ``/`` or ``_`` (``<wbr>``) and a wide table with fewer
    rows than columns is shown transposed (:data:`WIDE_CHARS`; ``data-transposed="true"``, with a note saying so).
    A cell that is a reproduction status gets :data:`STATUS_CLASSES`. Raw HTML in the markdown is escaped, image
    syntax stays text. ``links``: ``{(section, column): href}``: that column of the section's first table links to
    ``href`` (header and value cells; the task tables' domain columns link to their query pages). ``fold``: what
    follows a section's first table (notes, interval and test tables) is folded into a ``<details class="stats">``."""
    from markdown_it.common.utils import escapeHtml
    from markdown_it.token import Token

    md = parser()
    tokens = md.parse(text)
    if links:  # before a wide table is transposed: the links move with their cells
        _link_cells(tokens, links)
    tokens = _fit_tables(tokens)
    title, section, index, out = None, "", 0, []
    skip, folded, tables_in_section = 0, False, 0
    for i, t in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        if fold and folded and t.type == "heading_open":
            out.append(Token("fold_close", "details", -1))
            folded = False
        if t.type == "heading_open":
            tables_in_section = 0
            txt = plain_text(tokens[i + 1].children)
            if t.tag == "h1" and title is None:
                title, skip = txt, 2
                continue
            section = txt
            level = min(int(t.tag[1]) + 1, 6)
            t.tag = f"h{level}"
            tokens[i + 2].tag = f"h{level}"
            t.attrSet("id", f"{_slug(name)}-{_slug(txt)}-{i}")
        elif t.type == "td_open" and tokens[i + 1].content.strip() in STATUS_CLASSES:
            t.attrSet("class", STATUS_CLASSES[tokens[i + 1].content.strip()])
        elif t.type == "table_open":
            t.attrSet("class", "md-table")
            t.attrSet("data-table", name)
            t.attrSet("data-section", section)
            t.attrSet("data-index", str(index))
            index += 1
            tables_in_section += 1
        out.append(t)
        if fold and t.type == "table_close" and tables_in_section == 1 and not folded:
            out.append(Token("fold_open", "details", 1))
            folded = True
    if folded:
        out.append(Token("fold_close", "details", -1))

    def fold_open(self, tokens, idx, options, env):
        return '<details class="stats"><summary>Notes, intervals and tests</summary>\n'

    def fold_close(self, tokens, idx, options, env):
        return "</details>\n"

    def table_open(self, tokens, idx, options, env):
        note = ('<p class="transposed-note">Rows and columns swapped to fit the page (the markdown and the CSV keep the '
                "table's own layout).</p>") if tokens[idx].attrGet("data-transposed") else ""
        return note + '<div class="scroll">' + self.renderToken(tokens, idx, options, env)

    def table_close(self, tokens, idx, options, env):
        return self.renderToken(tokens, idx, options, env) + "</div>\n"

    def text(self, tokens, idx, options, env):
        html = escapeHtml(tokens[idx].content)
        return re.sub(r"(?<=\w)([/_])(?=\w)", r"\1<wbr>", html) if (tokens[idx].meta or {}).get("wbr") else html

    md.add_render_rule("fold_open", fold_open)
    md.add_render_rule("fold_close", fold_close)
    md.add_render_rule("text", text)
    md.add_render_rule("table_open", table_open)
    md.add_render_rule("table_close", table_close)
    return title, md.renderer.render(out, md.options, {})


def read_csv(path: str | Path) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` of a CSV, every cell the string as written."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return (rows[0], rows[1:]) if rows else ([], [])


def _values(columns: list[str], rows: list[list[str]], column: str) -> list[str]:
    if column not in columns:
        return []
    i = columns.index(column)
    return list(dict.fromkeys(r[i] for r in rows if i < len(r) and r[i]))


def mlflow_parent(t: ReportTable) -> str | None:
    """The MLflow parent run id in the table's ``results/tracking/<name>.json``, or None."""
    if t.tracking is None:
        return None
    try:
        return json.loads(t.tracking.read_text(encoding="utf-8")).get("parent")
    except (OSError, ValueError):
        return None


def table_context(t: ReportTable, commit: str | None = None, links: Mapping[tuple[str, str], str] | None = None) -> dict[str, Any]:
    """What the template shows of one table (title, markdown HTML, CSV cells, figures, sources with their sha256,
    the MLflow parent run and ``commit``, the code commit that computed it, the datasets and systems its rows name).
    ``links``: as :func:`render_markdown`'s."""
    from markupsafe import Markup

    title, body = (None, "")
    note = None
    if t.md is not None:
        text = t.md.read_text(encoding="utf-8")
        title, body = render_markdown(text, t.name, links, fold=t.name in table_tasks())
        if text.startswith("stage family") or text.startswith("note\n"):
            note = text.strip()
    columns, rows = read_csv(t.csv) if t.csv is not None else ([], [])
    run = mlflow_parent(t)
    sources = [{"path": str(p), "sha256": sha256(p)} for p in (t.md, t.csv, t.significance, *t.figures) if p is not None]
    return {"name": t.name, "anchor": f"table-{_slug(t.name)}", "title": title or LABELS.get(t.name, t.name),
            "nav": LABELS.get(t.name, title or t.name), "body": Markup(body), "note": note,
            "csv": {"columns": columns, "rows": rows, "file": str(t.csv) if t.csv else None},
            "figures": [{"name": f.name, "path": str(f), "uri": data_uri(f)} for f in t.figures],
            "sources": sources, "mlflow_parent": run, "commit": commit,
            "datasets": _values(columns, rows, "dataset"),
            "systems": _values(columns, rows, "system") or _values(columns, rows, "setting")}


def environment():
    """The Jinja2 environment of the report templates (autoescape on for ``.html`` / ``.j2``, undefined is an error)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    return Environment(loader=PackageLoader("mmir.reporting", "templates"), undefined=StrictUndefined,
                       autoescape=select_autoescape(enabled_extensions=("html", "j2"), default_for_string=True,
                                                    default=True), trim_blocks=True, lstrip_blocks=True)


def render_report(tables: Sequence[ReportTable], lineage: Mapping[str, Any], title: str = "mmir results",
                  latex: Sequence[str] = (), commits: Mapping[str, str] | None = None,
                  summary: Sequence[Mapping[str, Any]] = (), links: Mapping[str, Mapping[tuple[str, str], str]] | None = None) -> str:
    """The page's HTML (see the module docstring). ``latex``: the LaTeX files exported beside the tables, listed;
    ``commits``: ``{table name: code commit that computed it}`` (its MLflow run's tag), where known; ``summary``:
    :func:`mmir.reporting.summary.summary_sections`; ``links``: ``{table name: {(dataset, domain): query page}}``."""
    ctx = [table_context(t, (commits or {}).get(t.name), (links or {}).get(t.name)) for t in tables]
    return environment().get_template("report.html.j2").render(title=title, tables=ctx, lineage=lineage,
                                                               latex=list(latex), summary=list(summary))


def write_report(tables: Sequence[ReportTable], lineage: Mapping[str, Any], out_html: str | Path,
                 title: str = "mmir results", latex: Sequence[str] = (), commits: Mapping[str, str] | None = None,
                 summary: Sequence[Mapping[str, Any]] = (), links: Mapping[str, Mapping[tuple[str, str], str]] | None = None) -> int:
    """Render and write the page atomically (:func:`render_report`); returns its size in bytes."""
    html = render_report(tables, lineage, title, latex, commits, summary, links)
    write_text(out_html, html)
    return len(html.encode("utf-8"))


def _remote(ref: str) -> bool:
    """A reference that leaves the report folder: a scheme other than ``data:`` (``http:``, ``file:``, ...), a
    protocol-relative ``//host`` or an absolute path."""
    v = ref.strip()
    return not v.startswith("data:") and (bool(re.match(r"[a-z][a-z0-9+.-]*:", v, re.I)) or v.startswith("/"))


def external_references(html: str) -> list[str]:
    """Every reference in ``html`` a browser would load from outside the report folder (a ``src``/``href``/``url()``/
    ``@import`` that is not a ``data:`` URI, an in-page ``#anchor`` or a relative path such as a query page or a
    thumbnail; any ``<link>``, ``<iframe>``, ``<object>``, ``<embed>``; a ``<script>`` with a ``src`` or a
    ``fetch``/``XMLHttpRequest``/``import()`` in an inline one): empty for a self-contained page."""
    found = []
    for m in re.finditer(r"""\b(src|href|srcset|poster|action|formaction)\s*=\s*(["'])(.*?)\2""", html, re.I | re.S):
        if _remote(m.group(3)):
            found.append(m.group(0)[:120])
    found += [m.group(0)[:120] for m in re.finditer(r"url\(\s*(?!['\"]?data:)[^)]*\)|@import[^;]*", html, re.I)]
    found += [m.group(0) for m in re.finditer(r"<\s*(link|iframe|object|embed)\b", html, re.I)]
    found += [m.group(0)[:120] for m in re.finditer(r"<\s*script\b[^>]*\bsrc\s*=[^>]*>", html, re.I)]
    for body in re.findall(r"<\s*script\b[^>]*>(.*?)</\s*script\s*>", html, re.I | re.S):
        found += [m.group(0) for m in re.finditer(r"\bfetch\s*\(|XMLHttpRequest|\bimport\s*\(|\bWebSocket\b|\bEventSource\b", body)]
    return found


def relative_references(html: str) -> list[str]:
    """The relative paths ``html`` refers to (``src``/``href`` that are neither remote, ``data:`` nor ``#anchors``),
    without their ``#fragment``, URL-unquoted, in order: a test checks each exists beside the page."""
    from urllib.parse import unquote

    out = []
    for m in re.finditer(r"""\b(src|href)\s*=\s*(["'])(.*?)\2""", html, re.I | re.S):
        v = m.group(3).strip()
        if v and not v.startswith(("#", "data:")) and not _remote(v):
            out.append(unquote(v.split("#", 1)[0]))
    return list(dict.fromkeys(out))


__all__ = ["ReportTable", "data_uri", "external_references", "group_tables", "mlflow_parent", "read_csv",
           "relative_references", "render_markdown", "render_report", "table_context", "write_report"]
