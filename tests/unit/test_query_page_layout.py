"""The query pages (``results/report/queries/<task>/<dataset>/<domain>.html``) laid out by headless Chromium (issue 38
item 9): the query table is no wider than a 1280 or 1400 pixel window with the first run's systems (long labels, a
reranked row), and its header row stays at the top of the window while the reader scrolls down the queries. Measured
from element geometry (``getBoundingClientRect``), not by eye."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pandas as pd
import pytest
import report_results

from mmir.reporting.query_data import DomainFiles
from mmir.reporting.query_pages import page_file, write_query_pages

#: rows of a first-run-sized Task table: long labels, a reranked row (each system's run and per-query values are
#: report_results' three systems', reused)
LABELS = ["bm25", "minilm", "colbert-untrained (untrained)", "clip-untrained (untrained)", "bm25+rr:minilm-ce (untrained)",
          "gme-qwen2-vl-2b-instruct", report_results.NASTY]
WIDTHS = (1280, 1400)


def _chromium() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.fixture(scope="module")
def query_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layout")
    _, pages = report_results.build(tmp)
    p = next(p for p in pages if p.dataset == "os" and p.domain == "stat_1")
    systems = list(p.runs)
    runs = {s: p.runs[systems[i % len(systems)]] for i, s in enumerate(LABELS)}
    perquery = {s: p.perquery[systems[i % len(systems)]] for i, s in enumerate(LABELS)}
    labels = tmp / "labels.parquet"  # essentiality labels: every optional column of the table is shown
    pd.DataFrame({"qid": ["q0", "q1"], "image_index": [0, 0], "image_path": ["a.png", "b.png"],
                  "essentiality": ["Essential", "Redundant"], "image_type": ["Mathematical notation", "Scientific figure"]}
                 ).to_parquet(labels)
    files = DomainFiles("task1", "os", "stat_1", p.prepared, p.qrels, runs, perquery, "nDCG@10", "bm25",
                        first_stage={"bm25+rr:minilm-ce (untrained)": "bm25"}, essentiality=str(labels))
    write_query_pages([files], tmp / "report", tmp / "thumbs")
    return page_file(tmp / "report", "task1", "os", "stat_1")


#: appended to a copy of the page: the geometry after layout and after scrolling the window down, in the title
PROBE = """<script>
window.addEventListener("load", () => {
  const table = document.getElementById("queries"), head = table.querySelector("thead th");
  const rows = table.tBodies[0].rows.length;
  window.scrollTo(0, table.getBoundingClientRect().top + window.scrollY + 600);
  const scrolled = window.scrollY;
  document.title = JSON.stringify({viewport: window.innerWidth, page: document.documentElement.scrollWidth,
    table: table.getBoundingClientRect().right, columns: table.tHead.rows[0].cells.length, rows, scrolled,
    head_top: head.getBoundingClientRect().top, head_bottom: head.getBoundingClientRect().bottom,
    first_row_top: table.tBodies[0].rows[0].getBoundingClientRect().top});
});
</script></body>"""


def _measure(page, tmp_path, width: int) -> dict:
    probe = page.with_name(f"probe-{width}.html")  # beside the page: its thumbnails' relative paths resolve
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE), encoding="utf-8")
    browser = [_chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={tmp_path / f'profile-{width}'}", f"--window-size={width},900", "--hide-scrollbars",
               "--virtual-time-budget=5000"]
    dom = subprocess.run([*browser, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return json.loads(html.unescape(re.search(r"<title>(.*?)</title>", dom.stdout, re.S).group(1)))


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (Debian: apt-get install chromium)")
@pytest.mark.parametrize("width", WIDTHS)
def test_query_table_fits_the_window_and_its_header_sticks(query_page, tmp_path, width):
    m = _measure(query_page, tmp_path, width)
    assert m["viewport"] == width and m["rows"] == 30, m
    assert m["table"] <= width and m["page"] <= width, m  # no sideways scrolling of the table or the page
    # scrolled 600 px past the table's top: the first rows went up out of the window, the header row stayed at its top
    assert m["scrolled"] > 0 and m["first_row_top"] < 0, m
    assert abs(m["head_top"]) <= 1 and m["head_bottom"] > 10, m
    assert m["columns"] == 9 + len(LABELS)  # every optional column shown; a system's score and rank share one
