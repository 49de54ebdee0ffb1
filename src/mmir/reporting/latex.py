"""LaTeX export of the tables (``results/report/tables/<name>.tex``): every pipe table of ``<name>.md`` as a ``table`` float
(``longtable`` when it is long), in plain LaTeX with ``\\hline`` rules, so it compiles with the LaTeX kernel alone
(texlive-latex-base); a long table needs ``\\usepackage{longtable}`` (also in texlive-latex-base), which the
fragment's header says.

Text is escaped for LaTeX: the specials ``\\ { } $ & % # _ ~ ^`` and ``< > |`` (which the OT1 font encoding would
print as other glyphs), the table markers ``†`` / ``‡`` as ``$^\\dagger$`` / ``$^\\ddagger$``, the other symbols the
tables use (``→ × Δ α ± – — ≤ ≥ §`` ...) as their LaTeX commands; accented letters become accent commands and any
other character outside ASCII is dropped (the export then stays compilable; the HTML report keeps the original).
Markdown bold becomes ``\\textbf``, code ``\\texttt``, emphasis ``\\emph``.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from markdown_it.token import Token

from mmir.core.io import write_text
from mmir.reporting.markdown import MdTable, parse_tables, plain_text

#: ASCII characters with a special meaning in LaTeX (or printed as another glyph in OT1).
SPECIALS = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "%": r"\%", "#": r"\#",
            "_": r"\_", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
            "|": r"\textbar{}"}
#: Characters outside ASCII that the tables use.
UNICODE = {"†": r"$^\dagger$", "‡": r"$^\ddagger$", "→": r"$\rightarrow$", "←": r"$\leftarrow$", "×": r"$\times$",
           "Δ": r"$\Delta$", "α": r"$\alpha$", "β": r"$\beta$", "μ": r"$\mu$", "µ": r"$\mu$", "σ": r"$\sigma$",
           "±": r"$\pm$", "≤": r"$\leq$", "≥": r"$\geq$", "≈": r"$\approx$", "≠": r"$\neq$", "−": r"$-$", "·": r"$\cdot$",
           "°": r"$^\circ$", "–": "--", "—": "---", "…": r"\ldots{}", "§": r"\S{}", "¶": r"\P{}", "‘": "`", "’": "'",
           "“": "``", "”": "''", "«": r"<<", "»": r">>", "\u00a0": "~", "✅": "", "❌": "", "🟡": "", "✓": "", "✗": ""}
_ACCENTS = {"\u0301": "'", "\u0300": "`", "\u0302": "^", "\u0308": '"', "\u0303": "~", "\u0304": "=", "\u0327": "c",
            "\u030c": "v", "\u0306": "u", "\u030a": "r", "\u0307": "."}
#: A table with more rows than this is a ``longtable`` (a float cannot break across pages).
LONG_ROWS = 40


def _char(ch: str) -> str:
    if ch in SPECIALS:
        return SPECIALS[ch]
    if ch in UNICODE:
        return UNICODE[ch]
    if ord(ch) < 128:
        return ch
    base, *marks = unicodedata.normalize("NFD", ch)
    if ord(base) < 128 and marks and all(m in _ACCENTS for m in marks):
        out = base if base not in "ij" else "\\" + base  # dotless i/j under an accent
        for m in marks:
            out = f"\\{_ACCENTS[m]}{{{out}}}"
        return out
    ascii_ = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return "".join(_char(c) for c in ascii_)


def escape(text: str) -> str:
    """``text`` as LaTeX source that prints it (see the module docstring for what maps to what)."""
    return "".join(_char(c) for c in str(text))


def inline(children: list[Token] | None) -> str:
    """The LaTeX of an inline markdown token list (text escaped; bold, emphasis and code as commands)."""
    out = []
    for c in children or []:
        if c.type == "text":
            out.append(escape(c.content))
        elif c.type == "code_inline":
            out.append(r"\texttt{" + escape(c.content) + "}")
        elif c.type == "strong_open":
            out.append(r"\textbf{")
        elif c.type == "em_open":
            out.append(r"\emph{")
        elif c.type in ("strong_close", "em_close"):
            out.append("}")
        elif c.type in ("softbreak", "hardbreak"):
            out.append(" ")
    return "".join(out).strip()


def _label(name: str, i: int) -> str:
    return "tab:" + "".join(c if c.isalnum() or c in "-" else "-" for c in name) + f"-{i}"


def table_latex(table: MdTable, name: str, index: int) -> str:
    """One table: ``table`` float with caption and label (``tab:<name>-<index>``), or a ``longtable`` when it has more
    than :data:`LONG_ROWS` rows; its footnotes below it."""
    spec = " ".join(table.align or ["l"] * len(table.header))
    head = " & ".join(inline(c) for c in table.header) + r" \\"
    body = [" & ".join(inline(c) for c in row) + r" \\" for row in table.rows]
    caption = escape(table.caption)
    notes = [r"\par\smallskip{\footnotesize " + inline(n) + "}" for n in table.notes]
    if len(table.rows) > LONG_ROWS:
        return "\n".join([r"{\small", r"\begin{longtable}{" + spec + "}",
                          r"\caption{" + caption + r"}\label{" + _label(name, index) + r"}\\", r"\hline", head, r"\hline",
                          r"\endfirsthead", r"\hline", head, r"\hline", r"\endhead", *body, r"\hline", r"\end{longtable}",
                          "}", *notes, ""])
    return "\n".join([r"\begin{table}[htbp]", r"\centering", r"\small", r"\caption{" + caption + "}",
                      r"\label{" + _label(name, index) + "}", r"\begin{tabular}{" + spec + "}", r"\hline", head, r"\hline",
                      *body, r"\hline", r"\end{tabular}", *notes, r"\end{table}", ""])


def markdown_to_latex(text: str, name: str, source: str | None = None) -> str:
    """Every table of a markdown text as LaTeX (a fragment to ``\\input``; see the module docstring)."""
    tables = parse_tables(text)
    long = any(len(t.rows) > LONG_ROWS for t in tables)
    head = [f"% {name}.tex: LaTeX export of {source or name + '.md'} (mmir.reporting.latex), {len(tables)} table(s).",
            "% Plain LaTeX: \\input{" + name + "} in a document"
            + (" that loads \\usepackage{longtable}." if long else "; no package needed."), ""]
    if not tables:
        head.append(f"% {source or name}: no table in this file.")
    return "\n".join(head + [table_latex(t, name, i + 1) for i, t in enumerate(tables)])


def write_latex(md_file: str | Path, out_tex: str | Path) -> int:
    """Write ``out_tex`` from ``md_file`` atomically; returns the number of tables exported."""
    text = Path(md_file).read_text(encoding="utf-8")
    name = Path(out_tex).stem
    write_text(out_tex, markdown_to_latex(text, name, str(md_file)))
    return len(parse_tables(text))


def latex_document(fragments: list[tuple[str, str]], title: str = "mmir tables") -> str:
    """A whole document (``article``, ``longtable``) holding every fragment ``(title, LaTeX)`` in order, each
    starting on a new page: compile it with ``pdflatex`` to see every table."""
    out = [r"\documentclass{article}", r"\usepackage{longtable}", r"\setlength{\tabcolsep}{3pt}",
           r"\title{" + escape(title) + "}", r"\date{}", r"\begin{document}", r"\maketitle"]
    for t, frag in fragments:
        out += [r"\section*{" + escape(t) + "}", frag, r"\clearpage"]
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


__all__ = ["escape", "inline", "latex_document", "markdown_to_latex", "plain_text", "table_latex", "write_latex"]
