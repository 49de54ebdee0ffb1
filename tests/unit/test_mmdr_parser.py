"""mmir.benchmarks.mmdr.report_parser: the report protocol as the evaluator reads it (spec §2)."""

from __future__ import annotations

from mmir.benchmarks.mmdr.report_parser import (
    URL_SCHEMES,
    citation_ids,
    count_paragraphs,
    find_references_block,
    looks_like_image_url,
    markdown_headings,
    markdown_image_urls,
    parse_references,
    split_sentences,
    tokenize_words,
)


def test_reference_line_variants():
    report = (
        "Body text [1][2][3].\n\nReferences:\n"
        "[1] https://a.org/x\n"
        "2. https://b.org/y\n"
        "- [3] https://c.org/z\n"
        "* 4 http://d.org/w\n"
        "[5]: https://e.org/v\n"
        "6 - file:///tmp/img.png\n"
        "[7] see https://f.org (text after the URL)\n"
        "[8] ftp://g.org/no-scheme\n"
    )
    refs = parse_references(report)
    assert refs == {
        "1": "https://a.org/x", "2": "https://b.org/y", "3": "https://c.org/z", "4": "http://d.org/w",
        "5": "https://e.org/v", "6": "file:///tmp/img.png",
    }


def test_later_duplicate_overwrites():
    assert parse_references("References\n[1] https://old.org\n[1] https://new.org\n") == {"1": "https://new.org"}


def test_chinese_reference_headers():
    for header in ("参考文献", "参考资料", "引用", "來源", "来源"):
        report = f"正文内容 [1]。\n\n{header}：\n[1] https://example.cn/a\n[2] https://example.cn/b\n"
        assert parse_references(report) == {"1": "https://example.cn/a", "2": "https://example.cn/b"}, header


def test_last_occurrence_rule():
    # a later "reference" (here inside a URL path) moves the block start: [1] is lost
    report = "Text [1][2].\n\nReferences:\n[1] https://a.org/x\n[2] https://docs.org/reference/api\n"
    block = find_references_block(report)
    assert block.startswith("reference/api")
    assert parse_references(report) == {}
    # the header word is case-insensitive; the last of all header words wins
    report2 = "See the REFERENCES below.\n\nSources\nREFERENCES\n[1] https://a.org\n"
    assert parse_references(report2) == {"1": "https://a.org"}


def test_no_header_reads_whole_report():
    report = "Intro.\n[1] https://a.org\n[2] https://b.org\n"
    assert find_references_block(report) == report
    assert parse_references(report) == {"1": "https://a.org", "2": "https://b.org"}


def test_local_scheme_is_opt_in():
    report = "Claim [1].\n\nReferences:\n[1] mmir://openstax/doc-42\n"
    assert parse_references(report) == {}
    assert parse_references(report, URL_SCHEMES + ("mmir",)) == {"1": "mmir://openstax/doc-42"}


def test_citations_sentences_words_headings():
    assert citation_ids("A [1] b [12][1] c [12345] d [x]") == ["1", "12", "1"]
    text = "First sentence. Second one! Third?\nstill third.\n\nNew para 3.5 percent。下一句"
    assert split_sentences(text) == ["First sentence.", "Second one!", "Third?", "still third.", "New para 3.5 percent。下一句"]
    assert tokenize_words("Don't stop 3.5x 中文") == ["Don't", "stop", "3", "5x", "中", "文"]
    md = "# Title\n   ## Sub  \n    # code (4 spaces)\n#nospace\ntext"
    assert markdown_headings(md) == ["Title", "Sub"]
    assert count_paragraphs("a\n\nb\n\n\n\nc\n  \n") == 3


def test_markdown_images_and_image_urls():
    md = "![F1](https://x.org/a.png) ![F1 again](https://x.org/a.png) ![local](file:///a.png) ![F2](http://y.org/p?id=1)"
    assert markdown_image_urls(md) == ["https://x.org/a.png", "https://x.org/a.png", "http://y.org/p?id=1"]
    assert looks_like_image_url("https://x.org/A.JPG?w=300")
    assert not looks_like_image_url("https://x.org/page.html")
