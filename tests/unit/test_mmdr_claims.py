"""mmir.benchmarks.mmdr.claims: claim-URL extraction and enrichment (spec §5.1), incl. the references-block quirk."""

from __future__ import annotations

from mmir.benchmarks.mmdr.claims import (
    NO_CLAIM_TEXT,
    extract_claim_pairs,
    is_image_dependent_claim,
    is_key_claim,
    relevance_weight,
)

REPORT = (
    "# Report\n\n"
    "Solar capacity grew 24% in 2023 because costs fell [1][2]. Wind is cheap [2].\n\n"
    "Figure 1: installed capacity [3]\n"
    "![Figure 1](https://img.org/cap.png)\n\n"
    "See the [IEA summary](https://iea.org/summary) for details.\n\n"
    "References:\n\n"
    "[1] https://a.gov/solar\n\n"
    "[2] https://b.com/wind\n\n"
    "[3] https://img.org/cap.png\n"
)


def test_sentence_citations_markdown_links_and_bare_urls():
    raw, pairs = extract_claim_pairs(REPORT)
    by_source = {}
    for p in pairs:
        by_source.setdefault(p.source, []).append((p.claim, p.url, p.citation_id))
    assert by_source["citation"][:3] == [
        ("Solar capacity grew 24% in 2023 because costs fell .", "https://a.gov/solar", "1"),
        ("Solar capacity grew 24% in 2023 because costs fell .", "https://b.com/wind", "2"),
        ("Wind is cheap .", "https://b.com/wind", "2"),
    ]
    # the figure caption and the markdown image line form one "sentence" (no blank line between them)
    fig = [c for c in by_source["citation"] if c[2] == "3"]
    assert fig and fig[0][1] == "https://img.org/cap.png" and fig[0][0].startswith("Figure 1: installed capacity")
    assert ("See the for details.", "https://iea.org/summary", None) in by_source["markdown_link"]
    # bare URLs, per line: the claim is the line without its URLs (the regex stops before ")")
    assert ("![Figure 1]()", "https://img.org/cap.png", None) in by_source["bare_url"]
    assert ("[1]", "https://a.gov/solar", None) in by_source["bare_url"]
    _, only_url = extract_claim_pairs("Intro line without citations.\n\nhttps://x.org/page\n")
    assert [(p.claim, p.url) for p in only_url] == [(NO_CLAIM_TEXT, "https://x.org/page")]
    assert all(p.sentence_urls is None for p in pairs)  # code: enrichment drops sentence_urls
    assert raw[0].sentence_urls == ["https://a.gov/solar", "https://b.com/wind"]


def test_enrichment_flags():
    _, pairs = extract_claim_pairs(REPORT)
    solar = next(p for p in pairs if p.url == "https://a.gov/solar" and p.source == "citation")
    assert solar.relevance_weight == 1.0 + 0.2 + 0.2  # digit + "because"
    assert solar.is_key_claim and not solar.depends_on_image
    img = next(p for p in pairs if p.url == "https://img.org/cap.png" and p.source == "citation")
    assert img.depends_on_image  # cue word and image URL
    assert relevance_weight("x" * 120) == 1.3
    assert relevance_weight("因此价格下降") == 1.2
    assert is_key_claim("short 12345 with digits long") and not is_key_claim("short")
    assert is_key_claim("The key finding") and is_key_claim("结论")
    assert is_image_dependent_claim("as shown in the chart") and is_image_dependent_claim("见图2")


def test_dedup_and_cap():
    refs = "\n\n".join(f"[{i}] https://s{i}.org" for i in range(1, 61))
    body = "\n\n".join(f"Claim number {i} is here [{i}]." for i in range(1, 61))
    raw, pairs = extract_claim_pairs(body + "\n\nReferences:\n\n" + refs, max_pairs=40)
    assert len(raw) == 40 and len(pairs) == 40
    _, dup = extract_claim_pairs("Same claim [1]. Same claim [1].\n\nReferences:\n\n[1] https://a.org\n")
    # one pair for the repeated sentence, plus the reference line itself (see the pseudo-claim test)
    assert [(p.claim, p.url) for p in dup if p.source == "citation"] == [
        ("Same claim .", "https://a.org"), ("https://a.org", "https://a.org")]


def test_references_block_without_blank_lines_makes_pseudo_claims():
    """Spec §5.1 'likely quirk', verified: a references block with no blank lines is one sentence full of
    [n] markers, so it yields a pseudo-claim (the URL list) paired with every reference; it is a key claim."""
    report = (
        "Solar is growing fast [1]. Wind too [2].\n\n"
        "References:\n[1] https://a.gov/solar\n[2] https://b.com/wind\n[3] https://c.org/unused\n"
    )
    _, pairs = extract_claim_pairs(report)
    pseudo = [p for p in pairs if p.source == "citation" and "https://" in p.claim]
    assert [p.url for p in pseudo] == ["https://a.gov/solar", "https://b.com/wind", "https://c.org/unused"]
    assert pseudo[0].claim == "References: https://a.gov/solar https://b.com/wind https://c.org/unused"
    assert all(p.is_key_claim and not p.depends_on_image for p in pseudo)
    # with blank lines between entries, each "[n] url" line is its own sentence: its claim is the URL
    # itself, paired with that URL (one pseudo-claim per reference; key claim only when the URL is long)
    spaced = report.replace("\n[", "\n\n[")
    _, pairs2 = extract_claim_pairs(spaced)
    pseudo2 = [(p.claim, p.url) for p in pairs2 if p.source == "citation" and "https://" in p.claim]
    assert pseudo2 == [(u, u) for u in ("https://a.gov/solar", "https://b.com/wind", "https://c.org/unused")]


def test_keep_sentence_urls_option():
    _, pairs = extract_claim_pairs(REPORT, keep_sentence_urls=True)
    solar = next(p for p in pairs if p.url == "https://a.gov/solar" and p.source == "citation")
    assert solar.sentence_urls == ["https://a.gov/solar", "https://b.com/wind"]
