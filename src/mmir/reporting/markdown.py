"""The markdown tables the reporting layer writes, read back as structure (one parser for the HTML report and the
LaTeX export).

Every ``results/tables/<name>.md`` is CommonMark with GFM pipe tables: a title (``#``), sections (``##`` per dataset
or benchmark), notes as paragraphs, tables, and footnotes that start with a marker (``†``, ``‡``). markdown-it-py
parses it; raw HTML in the text is never passed through (``html=False``: it is escaped), and images, links and
autolinks are not parsed (their syntax stays text: a report loads and points to nothing outside itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

#: Footnote markers: a paragraph right after a table that starts with one of these belongs to the table ("–": the
#: cells without a number, :func:`mmir.reporting.cells.unscored_note`).
NOTE_MARKERS = ("†", "‡", "*", "–")


def parser() -> MarkdownIt:
    """CommonMark + pipe tables, raw HTML escaped, images and links off (their syntax stays text)."""
    return MarkdownIt("commonmark", {"html": False}).enable("table").disable(["image", "link", "autolink"])


def plain_text(children: list[Token] | None) -> str:
    """The text of an inline token's children (markup dropped, code kept, line breaks as spaces)."""
    out = []
    for c in children or []:
        if c.type in ("text", "code_inline"):
            out.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return "".join(out)


@dataclass
class MdTable:
    """One pipe table of a markdown file.

    Attributes:
        headings: the heading path above it (title, section), plain text.
        lead: the paragraph right before it when that paragraph ends with ``:`` (it introduces the table), else None.
        align: per column ``l``, ``r`` or ``c``.
        header: per column the inline tokens of the header cell.
        rows: per row, per column the inline tokens of the cell (missing cells are empty lists).
        notes: paragraphs right after it that start with a footnote marker (:data:`NOTE_MARKERS`).
    """

    headings: list[str]
    lead: list[Token] | None
    align: list[str]
    header: list[list[Token]]
    rows: list[list[list[Token]]] = field(default_factory=list)
    notes: list[list[Token]] = field(default_factory=list)

    @property
    def caption(self) -> str:
        """Heading path and lead as one line (plain text)."""
        parts = [h for h in self.headings if h]
        if self.lead is not None:
            parts.append(plain_text(self.lead).rstrip(":"))
        return " — ".join(parts)


def _align(tok: Token) -> str:
    style = str(tok.attrs.get("style", ""))
    return {"text-align:right": "r", "text-align:center": "c"}.get(style, "l")


def parse_tables(text: str) -> list[MdTable]:
    """Every pipe table of a markdown text, in order, with its headings, lead paragraph and footnotes."""
    tokens = parser().parse(text)
    heads: dict[int, str] = {}
    tables: list[MdTable] = []
    last_para: list[Token] | None = None  # the paragraph just before the current position, if nothing came between
    after_table: MdTable | None = None
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.type == "heading_open":
            level = int(t.tag[1])
            heads = {k: v for k, v in heads.items() if k < level}
            heads[level] = plain_text(tokens[i + 1].children)
            last_para, after_table = None, None
            i += 3
            continue
        if t.type == "paragraph_open":
            children = tokens[i + 1].children or []
            txt = plain_text(children).strip()
            if after_table is not None and txt.startswith(NOTE_MARKERS):
                after_table.notes.append(children)
            else:
                after_table = None
            last_para = children
            i += 3
            continue
        if t.type == "table_open":
            lead = last_para if last_para is not None and plain_text(last_para).rstrip().endswith(":") else None
            table = MdTable([heads[k] for k in sorted(heads)], lead, [], [])
            row: list[list[Token]] | None = None
            in_head = False
            j = i + 1
            while tokens[j].type != "table_close":
                tj = tokens[j]
                if tj.type == "thead_open":
                    in_head = True
                elif tj.type == "thead_close":
                    in_head = False
                elif tj.type == "tr_open":
                    row = []
                elif tj.type in ("th_open", "td_open"):
                    if in_head:
                        table.align.append(_align(tj))
                    row.append(tokens[j + 1].children or [])
                elif tj.type == "tr_close":
                    if in_head:
                        table.header = row
                    else:
                        table.rows.append(row + [[] for _ in range(len(table.header) - len(row))])
                j += 1
            tables.append(table)
            after_table, last_para = table, None
            i = j + 1
            continue
        last_para = None
        i += 1
    return tables


def title(text: str) -> str | None:
    """The first level-1 heading of a markdown text (plain text), or None."""
    tokens = parser().parse(text)
    for i, t in enumerate(tokens):
        if t.type == "heading_open" and t.tag == "h1":
            return plain_text(tokens[i + 1].children)
    return None
