"""What a user sees in the report: the Task 1 forest plot (drawn from real per-query scores, one point per system and
column, its intervals the table's), wide tables that fit the page, no glyph that needs an emoji font."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from test_table_significance import _unit

from mmir.core.io import write_json
from mmir.reporting.forest import forest_points, table_order, write_forest
from mmir.reporting.m2rag import write_table as write_m2rag
from mmir.reporting.mmdr import JudgeCalls
from mmir.reporting.mmdr import write_table as write_mmdr
from mmir.reporting.reproduction import write_reproduction
from mmir.workflow import steps
from mmir.workflow.report import report_step

SVG = "{http://www.w3.org/2000/svg}"
#: Code points that need an emoji font (or render as one): pictographs, dingbats, symbols, variation selector 16.
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\uFE0F\u200D]")


@pytest.fixture(scope="module")
def task1(tmp_path_factory):
    """Task 1 tables of two datasets (three systems, two domains each) from per-query scores, and the forest plot."""
    tmp = tmp_path_factory.mktemp("forest")
    rng = np.random.default_rng(3)
    base = {"stat": rng.random(30), "calc": rng.random(24)}
    systems = {"bm25": base, "dense": {d: np.clip(v + 0.3, 0, 1) for d, v in base.items()},
               "noise": {d: np.clip(v + rng.normal(0, 0.01, v.size), 0, 1) for d, v in base.items()}}
    units = [_unit(tmp, ds, d, s, v.tolist()) for ds in ("os", "vx") for s, doms in systems.items() for d, v in doms.items()]
    t = tmp / "tables"
    out = steps.TableFiles(t / "task1.md", t / "task1.csv", t / "task1.metrics.json", t / "task1.significance.json")
    steps.report("task1", [m for m, _ in units], "nDCG@10", "official", out,
                 perquery_files=[p for _, p in units], significance={"resamples": 400, "seed": 1})
    svg = tmp / "plots" / "task1_forest.svg"
    n = write_forest(t / "task1.significance.json", t / "task1.csv", svg)
    return tmp, svg, n


def _points(svg_path):
    """``[(gid, interval x-range or None, marker x)]`` of the drawn points and the description JSON of the SVG."""
    root = ET.parse(svg_path).getroot()
    desc = root.find(f".//{SVG}metadata").iter("{http://purl.org/dc/elements/1.1/}description")
    out = {}
    for g in root.iter(f"{SVG}g"):
        gid = g.get("id", "")
        if not re.fullmatch(r"point-\d+", gid):
            continue
        path = g.find(f"{SVG}path")
        use = g.find(f".//{SVG}use")
        if path is not None and use is None:  # the interval line
            xs = [float(v) for v in re.findall(r"[ML] ?(-?[\d.]+) ", path.get("d") + " ")]
            out.setdefault(gid, {})["ci"] = (min(xs), max(xs))
        if use is not None:  # the marker
            out.setdefault(gid, {})["x"] = float(use.get("x"))
    return out, json.loads(next(desc).text)


def test_forest_plot_has_a_point_per_system_and_column_with_the_tables_intervals(task1):
    tmp, svg, n = task1
    csv = pd.read_csv(tmp / "tables" / "task1.csv")
    cols = ["stat", "calc", "Avg."]
    assert n == len(csv) * len(cols) == 18  # 2 datasets x 3 systems x (2 domains + Avg.)
    drawn, desc = _points(svg)
    assert len(drawn) == n and all("ci" in d and "x" in d for d in drawn.values())
    # the plotted numbers are the table's: mean = the cell, interval = the CSV's ci_low / ci_high
    for p in desc:
        row = csv[(csv["dataset"] == p["dataset"]) & (csv["system"] == p["system"])].iloc[0]
        assert p["mean"] == pytest.approx(row[p["column"]], abs=1e-3)
        assert (p["ci_low"], p["ci_high"]) == (pytest.approx(row[f"{p['column']} ci_low"]), pytest.approx(row[f"{p['column']} ci_high"]))
        assert p["significant"] == bool(row[f"{p['column']} significant"])
    assert sum(p["significant"] for p in desc) >= 3  # dense beats bm25 everywhere: marked
    # ... and drawn where they are: one linear value -> x map per panel puts every interval end and mean in place
    for ds in ("os", "vx"):
        idx = [i for i, p in enumerate(desc) if p["dataset"] == ds]
        vals = [v for i in idx for v in (desc[i]["ci_low"], desc[i]["ci_high"], desc[i]["mean"])]
        xs = [v for i in idx for v in (*drawn[f"point-{i}"]["ci"], drawn[f"point-{i}"]["x"])]
        slope, icpt = np.polyfit(vals, xs, 1)
        assert slope > 0 and np.max(np.abs(np.polyval([slope, icpt], vals) - xs)) < 0.05  # pixels
    marks = re.findall(r'<g id="point-(\d+)-mark"', svg.read_text())
    assert sorted(map(int, marks)) == [i for i, p in enumerate(desc) if p["significant"]]


def test_forest_plot_is_byte_stable_and_points_follow_the_table(task1, tmp_path):
    tmp, svg, _ = task1
    again = tmp_path / "again.svg"
    write_forest(tmp / "tables" / "task1.significance.json", tmp / "tables" / "task1.csv", again)
    assert again.read_bytes() == svg.read_bytes()
    sig = json.loads((tmp / "tables" / "task1.significance.json").read_text())
    pts = forest_points(sig, table_order(tmp / "tables" / "task1.csv"))
    assert [(p["dataset"], p["column"], p["system"]) for p in pts[:4]] == [
        ("os", "stat", "bm25"), ("os", "stat", "dense"), ("os", "stat", "noise"), ("os", "calc", "bm25")]
    assert [p["baseline"] for p in pts[:3]] == [True, False, False]


def test_a_table_without_intervals_gets_a_figure_that_says_so(tmp_path):
    write_json(tmp_path / "s.json", {"task": "task2", "measure": "nDCG@10", "settings": {}, "labels": {}, "datasets": {}})
    (tmp_path / "t.csv").write_text("dataset,system,d,Avg.\nos,bm25,20.0,20.0\n")
    assert write_forest(tmp_path / "s.json", tmp_path / "t.csv", tmp_path / "f.svg") == 0
    assert (tmp_path / "f.svg").read_text().startswith("<?xml")


def text_boxes(fig) -> list[tuple[str, object]]:
    """``(text, window extent)`` of every text artist the figure draws (not the tick labels outside the view or of an
    axes switched off: matplotlib draws neither)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            hidden |= {id(t) for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]
                       if not ax.axison or not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9 for t in (tick.label1, tick.label2)}
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and id(t) not in hidden]


def text_problems(fig) -> list[str]:
    """Pairs of drawn texts whose boxes overlap, and texts reaching outside the figure (none in a readable figure)."""
    import itertools

    boxes = text_boxes(fig)
    out = [f"{a!r} overlaps {b!r}" for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]
    f = fig.bbox
    return out + [f"{a!r} outside the figure" for a, b in boxes
                  if b.x0 < f.x0 - 0.5 or b.y0 < f.y0 - 0.5 or b.x1 > f.x1 + 0.5 or b.y1 > f.y1 + 0.5]


LONG_ROWS = ["bm25", "minilm", "colbert-untrained", "clip-untrained", "gme-2b"]


@pytest.mark.parametrize("task", ["task1", "task2", "task3", "task4"])
def test_forest_plot_text_never_overlaps_and_stays_inside(task, tmp_path):
    """Issue 38 item 9: the Task 2-4 titles ran over the legend's note; every text box of the figure, from its own
    renderer, is apart from every other and inside the figure."""
    import matplotlib.pyplot as plt

    from mmir.reporting.forest import RC, forest_figure

    rng = np.random.default_rng(0)
    base = rng.random(20)
    units = [_unit(tmp_path, "openstax", d, s, np.clip(base + i / 10, 0, 1).tolist())
             for i, s in enumerate(LONG_ROWS) for d in ("statistics", "calculus-1")]
    t = tmp_path / "tables"
    out = steps.TableFiles(t / f"{task}.md", t / f"{task}.csv", t / "m.json", t / "s.json")
    steps.report(task, [m for m, _ in units], "nDCG@10", "official", out, perquery_files=[p for _, p in units],
                 significance={"resamples": 200}, untrained=["colbert-untrained", "clip-untrained"])
    sig = json.loads((t / "s.json").read_text())
    with plt.rc_context(RC):
        fig = forest_figure(sig, forest_points(sig, table_order(t / f"{task}.csv")))
    texts = [x for x, _ in text_boxes(fig)]
    assert "clip-untrained (untrained)" in texts and any(x.startswith("† = differs") for x in texts)
    assert text_problems(fig) == []
    plt.close(fig)


def test_essentiality_figure_labels_never_overlap():
    """Issue 38 item 9: the essentiality figure's system labels overlapped; now none of its texts does."""
    import matplotlib.pyplot as plt

    from mmir.benchmarks.mmbright.essentiality import ESSENTIALITY, IMAGE_TYPES
    from mmir.reporting.essentiality import essentiality_figure

    rows = [{"dataset": ds, "system": f"{s} (untrained)" if "untrained" in s else s, "facet": facet, "class": c,
             "value": 10.0 + i} for ds in ("openstax", "mm-bright") for i, s in enumerate(LONG_ROWS)
            for facet, classes in (("essentiality", ESSENTIALITY), ("image_type", IMAGE_TYPES.values())) for c in classes]
    fig = essentiality_figure(pd.DataFrame(rows), ["openstax", "mm-bright", "empty"], "nDCG@10", plt)
    texts = [x for x, _ in text_boxes(fig)]
    assert "colbert-untrained (untrained)" in texts and "no labelled queries" in texts
    assert text_problems(fig) == []
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ the page
def _wide_tables(tmp):
    """The M2RAG, MMDR and reproduction tables as their writers make them (long labels, many columns)."""
    from mmir.benchmarks.m2rag.aggregate import ALL_METRICS
    from mmir.benchmarks.mmdr.results import TABLE_COLUMNS

    t = tmp / "tables"
    rows = [{"dataset": "m2rag-bench", "source": src, "strategy": s, "generator": "qwen2.5-0.5b-instruct-q4_k_m", "judge": "j",
             **{m: 41.25 for m in ALL_METRICS}, **{f"{m}_n": 12 for m in ALL_METRICS}, **{f"{m}_failures": 1 for m in ALL_METRICS},
             "image_recall_vacuous": 3, "overall": 40.5, "answers": 12, "excluded": 0, "llm_failures": 0, "llm_calls": 40,
             "domains": "biology, chemistry, economics"}
            for src in ("mmbright/biology/bm25", "devset") for s in ("single_stage", "multi_stage", "llm_placement")]
    write_m2rag(rows, t / "m2rag.md", t / "m2rag.csv")
    name = "mmbright-full-name/economics-and-public-policy"
    b = {"n": 5, "complete": 5, **{c: 37.5 for c in TABLE_COLUMNS}}
    base = {"reports": 5, "failed": 0, "under_min_chars": 0, "mean_citation_markers_by_model": 3.2,
            "without_valid_citation": 1, "with_invalid_citations": 0, "posthoc_sources": 2, "posthoc_figures": 1,
            "model_wrote_references": 0, "figures_cited_by_model": 1, "urls_written_by_model": 0,
            "mean_report_chars": 2412.0, "mean_citations_valid": 2.5, "mean_sources_cited": 2.0}
    mods = {m: {"calls": 40, "parse_failures": 2, "fallbacks": 1, "example_copies": 0}
            for m in ("flae", "trace_evi", "trace_vef", "mosaic_sem", "mosaic_acc", "mosaic_vqa")}
    write_mmdr([(name, b), ("All", b)], JudgeCalls({name: mods}), {name: base},
               {"generator": "qwen", "task": "task2", "system": "bm25", "k": 5, "judge_max_tokens": 512},
               {"model": "qwen2.5-0.5b", "backend": "llama_cpp"}, t / "mmdr.md", t / "mmdr.csv")
    frame = pd.DataFrame([{"benchmark": "mmir-offline-regression", "task": "task1", "dataset": "openstax", "system": s,
                           "run_dataset": "openstax", "run_system": s, "domain": "statistics", "measure": "nDCG@10",
                           "expected": 30.0, "observed": 30.0 + d, "diff": d, "tolerance": 0.1, "status": st, "note": "",
                           "source": "regression", "file": "expected/x.yaml"}
                          for s, d, st in (("bm25", 0.0, "OK"), ("dense", 0.15, "OKish"), ("e5", 1.0, "FAIL"))])
    write_reproduction(frame, ["expected/x.yaml"], t / "reproduction.md", t / "reproduction.csv")
    return [str(t / f"{n}.{e}") for n in ("m2rag", "mmdr", "reproduction") for e in ("md", "csv")]


@pytest.fixture(scope="module")
def page(task1):
    tmp, svg, _ = task1
    files = [str(tmp / "tables" / f) for f in ("task1.md", "task1.csv", "task1.significance.json")] + [str(svg)]
    files += _wide_tables(tmp)
    out = tmp / "report" / "index.html"
    counts = report_step({"datasets": {}, "systems": {}}, files, [], out, tmp / "report" / "l.json", tmp / "report" / "t.tex", {})
    return tmp, out, counts


def test_the_page_embeds_the_forest_plot_and_no_emoji(page, task1):
    tmp, out, counts = page
    html = out.read_text(encoding="utf-8")
    svgs = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert [base64.b64decode(s) for s in svgs] == [task1[1].read_bytes()] and counts["figures"] == 1
    assert html.index("data:image/svg+xml") > html.index('id="table-task1"')  # in the Task 1 section
    # the reproduction status is text with a CSS dot, no glyph that needs an emoji font, anywhere
    assert re.findall(r'<td class="status status-(\w+)">(\w+)</td>', html) == [("ok", "OK"), ("okish", "OKish"), ("fail", "FAIL")]
    for f in [out, *(tmp / "tables").glob("*.md"), task1[1]]:
        assert not EMOJI.search(f.read_text(encoding="utf-8")), f


def _chromium() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


MEASURE = """<script>
document.title = JSON.stringify({page: document.documentElement.scrollWidth, viewport: window.innerWidth,
  tables: [...document.querySelectorAll("table.md-table")].map(t => [t.dataset.table, t.scrollWidth, t.parentElement.clientWidth]),
  images: [...document.querySelectorAll("img")].map(i => [i.getBoundingClientRect().right])});
</script></body>"""


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian: apt-get install chromium)")
@pytest.mark.parametrize("width, fitting", [(1280, {"task1", "m2rag", "mmdr", "reproduction"}), (900, {"task1", "m2rag", "mmdr"})])
def test_wide_tables_fit_the_page_in_chromium(page, tmp_path, width, fitting):
    """Headless Chromium lays the page out at ``width``: the page is no wider than the window, the markdown tables
    ``fitting`` (M2RAG and MMDR transposed, text wrapped) fit their box with no sideways scroll (at 900 pixels the
    12 columns of the reproduction table scroll inside their own box), the forest plot fits; a screenshot is taken
    (kept in ``$MMIR_SCREENSHOT_DIR`` when set)."""
    _, out, _ = page
    probe = tmp_path / "probe.html"  # the page itself runs no script; the copy measures its layout
    probe.write_text(out.read_text(encoding="utf-8").replace("</body>", MEASURE), encoding="utf-8")
    browser = [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1400", "--hide-scrollbars"]
    dom = subprocess.run([*browser, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = json.loads(__import__("html").unescape(re.search(r"<title>(.*?)</title>", dom.stdout, re.S).group(1)))
    assert m["viewport"] == width and m["page"] <= width, m
    assert {t for t, _, _ in m["tables"]} >= {"task1", "m2rag", "mmdr", "reproduction"}
    assert [t for t in m["tables"] if t[0] in fitting and t[1] > t[2]] == []  # [table, its width, its box's width]
    assert m["images"] and all(r <= width for (r,) in m["images"]), m["images"]
    shot = tmp_path / f"page-{width}.png"
    p = subprocess.run([*browser, f"--screenshot={shot}", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    if os.environ.get("MMIR_SCREENSHOT_DIR"):
        shutil.copy(shot, os.environ["MMIR_SCREENSHOT_DIR"])
