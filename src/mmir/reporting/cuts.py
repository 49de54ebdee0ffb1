"""What a task table says about the image text its text systems' encoders cut (issue 31 item 8): from the retrieve
stats of each row (``encode_<kind>_image_text``, ``_image_text_cut``, ``_image_text_dropped``, counted by
:func:`mmir.encoders.truncation.image_text_cuts`; ``pair_text_cut_images``, the Task 4 pairs whose image text was
longer than its share of the pair text), one sentence per system that cut any: a Task 2 query's captions after its own
text, a Task 3 image's text, a Task 4 pair's image text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: the kinds whose texts end with image text, and how a caption names the cut part of their rows
IMAGE_TEXT_KINDS = {"mm_queries": "the images' text of {cut} of the {n} queries with image text",
                    "images": "the text of {cut} of the {n} images with text",
                    "pairs": "the image text of {cut} of the {n} pairs with image text"}


def image_text_counts(stats: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """``{kind: {"image_text", "image_text_cut", "image_text_dropped"}}`` summed over run stats (a system's domains)."""
    out: dict[str, dict[str, int]] = {}
    for st in stats:
        for kind in IMAGE_TEXT_KINDS:
            if f"encode_{kind}_image_text" in st:
                c = out.setdefault(kind, dict.fromkeys(("image_text", "image_text_cut", "image_text_dropped"), 0))
                for k in c:
                    c[k] += int(st.get(f"encode_{kind}_{k}", 0))
    return out


def image_text_cut_notes(stats: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[str]:
    """``{row label: its run stats, one per domain}`` -> one caption sentence per row whose encoder cut image text,
    e.g. "`colbert-untrained`: the encoder's length limit cut the images' text of 6 of the 6 queries with
    image text (all of it for 2)." Rows that cut none get no sentence."""
    notes = []
    for label, runs in stats.items():
        runs = list(runs)
        parts = []
        counts = image_text_counts(runs)
        for kind, c in counts.items():
            if c["image_text_cut"]:
                dropped = f" (all of it for {c['image_text_dropped']})" if c["image_text_dropped"] else ""
                parts.append(IMAGE_TEXT_KINDS[kind].format(cut=c["image_text_cut"], n=c["image_text"]) + dropped)
        shared = sum(int(st.get("pair_text_cut_images", 0)) for st in runs)
        sentence = f"the encoder's length limit cut {'; '.join(parts)}" if parts else ""
        if shared:  # Task 4: the image text's share of the pair text (pair_image_share), before the encoder
            n = counts.get("pairs", {}).get("image_text")
            sentence += ("; " if sentence else "") + (f"the image text of {shared} of the {n} pairs with image text was "
                                                      if n else f"the image text of {shared} pairs was ") + \
                "cut to its share of the pair text"
        if sentence:
            notes.append(f"`{label}`: {sentence}.")
    return notes
