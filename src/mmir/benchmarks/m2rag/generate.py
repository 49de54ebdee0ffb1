"""The three M2RAG generation strategies (spec §4) and their common output (spec §5).

:func:`single_stage` (§4.1), :func:`multi_stage` (§4.2) and :func:`separate` (the MuRAR baseline, §4.3) take a
:class:`~mmir.benchmarks.m2rag.selection.SelectedInput` and an :class:`~mmir.llm.client.LLMClient`; ``mode="llm"``
sends images as descriptions, ``mode="mllm"`` as 512 px thumbnails. A
:class:`~mmir.llm.backends.GenerationFailure` propagates: the generation is excluded (spec §6.7), never scored.

Released-code bugs are reproduced only with ``released_quirks=True``: placement parsing ``\\d+`` (so ``-1``
means line 1), and MuRAR numbering every inserted image ``images/0.<ext>``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from mmir.benchmarks.m2rag.calls import prompt, render_around_slot
from mmir.benchmarks.m2rag.media import thumbnail_bytes
from mmir.benchmarks.m2rag.parsing import strip_images, strip_links, unwrap_markdown
from mmir.benchmarks.m2rag.records import (
    INDEXED_PLACEHOLDER_RE,
    PLACEHOLDER,
    image_description,
)
from mmir.benchmarks.m2rag.render import (
    RenderReport,
    render_html,
    render_html_with_report,
)
from mmir.benchmarks.m2rag.selection import InputImage, SelectedInput
from mmir.llm.client import LLMClient
from mmir.llm.messages import ImagePart, Segment, user_messages
from mmir.llm.records import CallRecord

Mode = Literal["llm", "mllm"]
#: ``encoder(texts) -> (len(texts), dim)`` array; rows need not be normalised (cosine is taken).
TextEncoderFn = Callable[[Sequence[str]], np.ndarray]
FIGURE_WIDTH = 60
_OUTPUT_IMAGE = re.compile(r"!\[(.*?)\]\((.*?)(\d+)(.*?)\)")
_SIGNED = re.compile(r"-?\d+")
_DIGITS = re.compile(r"\d+")
_REFUSAL = re.compile(r"^\s*I\s+(can't|cannot|can not|am unable)", re.IGNORECASE)


# ------------------------------------------------------------------------------------------------ output
@dataclass
class OutputImage:
    """One image of an answer, in document order (spec §4 ``output_images[*]``); ``id`` = ``SelectedInput.images`` index."""

    id: int
    image_caption: str
    detailed_image_caption: str | None
    image_url: str
    cached_image_url: str
    ext: str = "png"
    image_width: int = FIGURE_WIDTH

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class Answer:
    """A generated multimodal answer (spec §4-5).

    Attributes:
        processed_response: markdown with a ``<figure>`` block per output image.
        placeholder_response: the same text with one ``<IMAGE_PLACEHOLDER>`` per output image.
        output_images: :class:`OutputImage` s in document order (k-th placeholder = k-th image).
        markdown: ``placeholder_response`` with the k-th placeholder written as ``![caption](images/{id}.{ext})``.
        stats: counters (``rejected_images``, ``refusals``, ``placement_unparsed`` ...).
    """

    strategy: str
    mode: str
    query_id: str
    user_query: str
    processed_response: str
    placeholder_response: str
    output_images: list[OutputImage]
    markdown: str
    calls: list[CallRecord] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def response(self) -> str:
        """``placeholder_response`` with every placeholder deleted: the text the metrics judge (spec §6)."""
        return self.placeholder_response.replace(PLACEHOLDER, "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (calls included)."""
        d = asdict(self)
        d["calls"] = [c.to_dict() for c in self.calls]
        return d


def figure_block(url: str, caption: str, width: int = FIGURE_WIDTH) -> str:
    """An HTML ``<figure>`` block (spec §4.1): centred image at ``width`` percent, with a ``<figcaption>``
    when ``caption`` is not empty. URL and caption are HTML-escaped."""
    cap = f"\n    <figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (f'\n\n<figure align="center">\n    <img src="{html.escape(url, quote=True)}" width="{width}%" />'
            f"{cap}\n</figure>\n\n")


def parse_output_images(text: str, inputs: Sequence[InputImage]) -> tuple[str, str, list[OutputImage], int]:
    """Turn the model's ``![caption](...N...)`` images into figures and placeholders (spec §4.1).

    Regex ``!\\[(.*?)\\]\\((.*?)(\\d+)(.*?)\\)``; an index below ``len(inputs)`` and not used before is accepted,
    others are deleted.

    Returns:
        ``(processed, placeholder_text, output_images, n_rejected)``.
    """
    used: set[int] = set()
    outputs: list[OutputImage] = []
    proc: list[str] = []
    place: list[str] = []
    rejected = 0
    pos = 0
    for m in _OUTPUT_IMAGE.finditer(text):
        proc.append(text[pos:m.start()])
        place.append(text[pos:m.start()])
        pos = m.end()
        caption, idx = m.group(1).strip(), int(m.group(3))
        if idx < len(inputs) and idx not in used:
            used.add(idx)
            ii = inputs[idx]
            proc.append(figure_block(ii.image.image_url, caption))
            place.append(PLACEHOLDER)
            outputs.append(_output_image(ii, caption))
        else:
            rejected += 1
    proc.append(text[pos:])
    place.append(text[pos:])
    return "".join(proc), "".join(place), outputs, rejected


def _output_image(ii: InputImage, caption: str) -> OutputImage:
    im = ii.image
    return OutputImage(id=ii.index, image_caption=caption, detailed_image_caption=im.caption,
                       image_url=im.image_url or im.cached_image_url, cached_image_url=im.cached_image_url, ext=im.ext)


def placeholders_to_markdown(placeholder_text: str, outputs: Sequence[OutputImage]) -> str:
    """``placeholder_text`` with its k-th placeholder written as ``![caption](images/{id}.{ext})`` of
    ``outputs[k]``; surplus placeholders are left as they are (and show up as dangling when rendered)."""
    parts = placeholder_text.split(PLACEHOLDER)
    out = [parts[0]]
    for k, seg in enumerate(parts[1:]):
        if k < len(outputs):
            o = outputs[k]
            cap = o.image_caption.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
            out.append(f"![{cap}](images/{o.id}.{o.ext})")
        else:
            out.append(PLACEHOLDER)
        out.append(seg)
    return "".join(out)


def _answer(strategy: str, mode: str, selected: SelectedInput, caller: LLMClient, mark: int, processed: str,
            placeholder: str, outputs: list[OutputImage], stats: dict[str, int]) -> Answer:
    return Answer(strategy=strategy, mode=mode, query_id=selected.query_id, user_query=selected.query,
                  processed_response=processed, placeholder_response=placeholder, output_images=outputs,
                  markdown=placeholders_to_markdown(placeholder, outputs), calls=caller.records_since(mark),
                  stats={k: v for k, v in stats.items() if v})


# ------------------------------------------------------------------------------------------------ input
def _image_segments(ii: InputImage, mode: Mode, thumbnail_size: int) -> list[Segment]:
    if mode == "mllm":
        data = thumbnail_bytes(ii.image.load_bytes(), size=thumbnail_size, source=ii.image.cached_image_url)
        return ["![", ImagePart(data), f"]({ii.pseudo_url})"]
    return [f"![{image_description(ii.image)}]({ii.pseudo_url})"]


def image_slot(ii: InputImage, mode: Mode, thumbnail_size: int) -> Segment:
    """What fills a prompt's image slot: the thumbnail (``mllm``) or ``"Image description: ..."`` (``llm``).

    Raises:
        mmir.core.errors.DataError: ``mllm`` and the image bytes cannot be read or decoded.
    """
    if mode == "mllm":
        return ImagePart(thumbnail_bytes(ii.image.load_bytes(), size=thumbnail_size, source=ii.image.cached_image_url))
    return f"Image description: {image_description(ii.image)}"


def input_segments(selected: SelectedInput, instruction: str, mode: Mode, *, with_images: bool = True) -> list[Segment]:
    """The generation prompt of spec §3 "Prompt layout" as segments (``with_images=False`` drops image placeholders).

    Raises:
        mmir.core.errors.DataError: ``mllm`` and an image's bytes cannot be read or decoded.
    """
    size = selected.config.thumbnail_size
    by_page: dict[int, list[InputImage]] = {}
    for ii in selected.images:
        if ii.page is not None:
            by_page.setdefault(ii.page, []).append(ii)
    segs: list[Segment] = [instruction]
    for page in selected.pages:
        segs.append(f"## Webpage {page.index}\n```markdown\n")
        parts = page.content.split(PLACEHOLDER)
        imgs = by_page.get(page.index, [])
        for k, part in enumerate(parts):
            segs.append(part)
            if k < len(parts) - 1 and with_images and k < len(imgs):
                segs.extend(_image_segments(imgs[k], mode, size))
        segs.append("\n```\n\n")
    aux = [ii for ii in selected.images if ii.page is None]
    if aux and with_images:
        segs.append("# Auxiliary Images\n")
        for ii in aux:
            segs.extend(_image_segments(ii, mode, size))
            segs.append("\n")
        segs.append("\n")
    segs.append("# Generated Document\n")
    return segs


def _check_mode(mode: str) -> None:
    if mode not in ("llm", "mllm"):
        raise ValueError(f"mode must be 'llm' or 'mllm', got {mode!r}")


# ----------------------------------------------------------------------------------------- single-stage
def single_stage(selected: SelectedInput, caller: LLMClient, *, mode: Mode = "llm", max_tokens: int | None = None) -> Answer:
    """Single-stage joint generation, one call (spec §4.1).

    Returns:
        :class:`Answer` (``stats["rejected_images"]`` = model images out of range or repeated).

    Raises:
        GenerationFailure: the call failed.
        ValueError: unknown ``mode``.
        mmir.core.errors.DataError: ``mllm`` and an input image cannot be read.
    """
    _check_mode(mode)
    mark = caller.mark()
    tpl = prompt(f"single_stage_{mode}_v1")
    segs = input_segments(selected, tpl.render(query=selected.query), mode)
    reply = caller.text(user_messages(segs), tpl, label="single_stage", max_tokens=max_tokens)
    processed, placeholder, outputs, rejected = parse_output_images(unwrap_markdown(reply), selected.images)
    return _answer("single_stage", mode, selected, caller, mark, processed, placeholder, outputs,
                   {"rejected_images": rejected})


# ------------------------------------------------------------------------------------------ multi-stage
def parse_placement(reply: str, n_lines: int, *, released_quirks: bool = False) -> tuple[int, str]:
    """Parse a stage-2 placement reply (spec §4.2): ``(line_id, caption)``.

    Line id: the last (signed) integer of the last line, ``-1`` when none or out of range; caption: the earlier
    lines joined with a space.
    """
    lines = reply.strip().split("\n")
    found = (_DIGITS if released_quirks else _SIGNED).findall(lines[-1])
    caption = " ".join(lines[:-1]).strip()
    if not found:
        return -1, caption
    line_id = int(found[-1])
    return (line_id if 0 <= line_id <= n_lines - 1 else -1), caption


def multi_stage(selected: SelectedInput, caller: LLMClient, *, mode: Mode = "llm", max_tokens: int | None = None,
                place_max_tokens: int = 128, released_quirks: bool = False) -> Answer:
    """Multi-stage joint generation, 1 + N + M calls (spec §4.2): text answer, one placement call per input image,
    one refinement call per placed image's segment (refusals pasted as released, counted ``refusals``).

    Raises:
        GenerationFailure: any call failed (the generation is failed as a whole).
        ValueError: unknown ``mode``.
        mmir.core.errors.DataError: ``mllm`` and an input image cannot be read.
    """
    _check_mode(mode)
    mark = caller.mark()
    size = selected.config.thumbnail_size
    t_text = prompt(f"multi_stage_text_{mode}_v1")
    t_place = prompt("multi_stage_place_v1")
    t_refine = prompt("multi_stage_refine_v1")
    segs = input_segments(selected, t_text.render(query=selected.query), mode)
    summary = unwrap_markdown(caller.text(user_messages(segs), t_text, label="multi_stage.text", max_tokens=max_tokens))
    lines = summary.split("\n")
    numbered = "\n".join(f"[{j}] {line}" for j, line in enumerate(lines))
    stats = {"placement_unplaced": 0, "refusals": 0}
    placed: list[tuple[InputImage, int, str]] = []
    for ii in selected.images:
        before, after = render_around_slot(t_place, query=selected.query, lines=numbered)
        reply = caller.text(user_messages([before, image_slot(ii, mode, size), after]), t_place,
                       label="multi_stage.place", context={"image": ii.index}, max_tokens=place_max_tokens)
        line_id, caption = parse_placement(unwrap_markdown(reply), len(lines), released_quirks=released_quirks)
        if line_id == -1:
            stats["placement_unplaced"] += 1
        else:
            placed.append((ii, line_id, caption))
    placed.sort(key=lambda p: p[1])  # stable: ties keep image order
    if not placed:
        return _answer("multi_stage", mode, selected, caller, mark, summary, summary, [], stats)
    head = "\n".join(lines[: placed[0][1]])
    processed, placeholder = head, head
    outputs: list[OutputImage] = []
    for k, (ii, line_id, caption) in enumerate(placed):
        end = placed[k + 1][1] if k + 1 < len(placed) else None
        piece = "\n".join(lines[line_id:end])
        before, after = render_around_slot(t_refine, query=selected.query, piece=piece)
        reply = caller.text(user_messages([before, image_slot(ii, mode, size), after]), t_refine,
                       label="multi_stage.refine", context={"image": ii.index}, max_tokens=max_tokens)
        refined = strip_links(strip_images(unwrap_markdown(reply)))
        if _REFUSAL.match(refined):
            stats["refusals"] += 1
        processed += figure_block(ii.image.image_url, caption) + refined
        placeholder += f"\n{PLACEHOLDER}\n" + refined
        outputs.append(_output_image(ii, caption))
    return _answer("multi_stage", mode, selected, caller, mark, processed, placeholder, outputs, stats)


# -------------------------------------------------------------------------------------- separate (MuRAR)
def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)


@dataclass
class _Group:
    text: str
    images: list[InputImage]


def _image_groups(selected: SelectedInput) -> list[_Group]:
    """Kept chunks that hold candidate images (with their images), in page and chunk order; a page's
    unanchored images form one group whose context is the whole page text."""
    groups: list[_Group] = []
    for page in selected.pages:
        imgs = [ii for ii in selected.images if ii.page == page.index]
        for chunk in page.chunks:
            held = [ii for ii in imgs if ii.image.anchored and ii.image.split_id == chunk.split_id]
            if held:
                groups.append(_Group(chunk.text, held))
        loose = [ii for ii in imgs if not ii.image.anchored]
        if loose:
            groups.append(_Group(INDEXED_PLACEHOLDER_RE.sub("", page.content).replace(PLACEHOLDER, ""), loose))
    return groups


def match_images_to_lines(lines: Sequence[str], selected: SelectedInput, encoder: TextEncoderFn,
                          threshold: float = 0.1) -> tuple[dict[int, InputImage], dict[str, int]]:
    """MuRAR's embedding match (spec §4.3 step 2): ``{line index: image}`` and counters.

    Line -> most similar chunk with candidate images (cosine >= ``threshold``) -> its most similar image; one
    image per line, a later chunk's replacing an earlier one (``images_replaced``), as released.
    """
    stats = {"lines_below_threshold": 0, "images_replaced": 0}
    groups = _image_groups(selected)
    idx = [j for j, line in enumerate(lines) if line.strip()]
    attach: dict[int, InputImage] = {}
    if not groups or not idx:
        return attach, stats
    line_vecs = _unit_rows(encoder([lines[j] for j in idx]))
    sims = line_vecs @ _unit_rows(encoder([g.text for g in groups])).T
    best = sims.argmax(axis=1)
    ok = sims.max(axis=1) >= threshold
    stats["lines_below_threshold"] = int((~ok).sum())
    for gi, g in enumerate(groups):
        members = [r for r in range(len(idx)) if ok[r] and best[r] == gi]
        if not members:
            continue
        reps = [f"Image caption: {image_description(ii.image)}\nImage context: {g.text}" for ii in g.images]
        m = line_vecs[members] @ _unit_rows(encoder(reps)).T
        pick, pick_sim = m.argmax(axis=1), m.max(axis=1)
        for k, ii in enumerate(g.images):
            pickers = [(pick_sim[r], -r, r) for r in range(len(members)) if pick[r] == k]
            if not pickers:
                continue
            line = idx[members[max(pickers)[2]]]
            if line in attach:
                stats["images_replaced"] += 1
            attach[line] = ii
    return attach, stats


def rebuild_references(text: str, selected: SelectedInput) -> tuple[str, int]:
    """MuRAR's References section (spec §4.3): ``(text, number of references)``; rebuilt as ``"n. title - url"`` lines."""
    splits = text.split("References")
    if len(splits) == 1:
        return text, 0
    indices = sorted({int(x) for x in _DIGITS.findall(splits[-1])})
    refs = [selected.pages[i].webpage for i in indices if i < len(selected.pages)]
    body = "References".join(splits[:-1]).strip()
    body_lines = body.split("\n")
    if body_lines[-1].startswith(("*", "#")):
        body = "\n".join(body_lines[:-1])
    listing = "".join(f"{n}. {p.title} - {p.url}\n" for n, p in enumerate(refs, 1))
    return body + "\n## References\n" + listing, len(refs)


def separate(selected: SelectedInput, caller: LLMClient, encoder: TextEncoderFn, *, threshold: float = 0.1,
             max_tokens: int | None = None, released_quirks: bool = False) -> Answer:
    """The separate (MuRAR) baseline (spec §4.3): text answer, embedding match, one refinement call.

    Args:
        selected: K_In-Doc built with ``SelectionConfig.murar()``.
        encoder: ``texts -> (n, dim)`` embeddings (e.g. ``all-mpnet-base-v2``).
        threshold: minimum line-to-chunk cosine similarity (0.1).

    Raises:
        GenerationFailure: a call failed.
    """
    mark = caller.mark()
    t_text, t_refine = prompt("separate_text_v1"), prompt("separate_refine_v1")
    segs = input_segments(selected, t_text.render(query=selected.query), "llm", with_images=False)
    summary = unwrap_markdown(caller.text(user_messages(segs), t_text, label="separate.text", max_tokens=max_tokens))
    lines = summary.split("\n")
    attach, stats = match_images_to_lines(lines, selected, encoder, threshold)
    chosen: list[InputImage] = []
    out_lines: list[str] = []
    for j, line in enumerate(lines):
        if j in attach:
            ii = attach[j]
            k = 0 if released_quirks else len(chosen)
            chosen.append(ii)
            out_lines.append(f"![{image_description(ii.image)}](images/{k}.{ii.image.ext})")
        out_lines.append(line)
    stats["images_matched"] = len(chosen)
    reply = caller.text(user_messages([t_refine.render(query=selected.query, summary="\n".join(out_lines))]), t_refine,
                   label="separate.refine", max_tokens=max_tokens)
    processed, placeholder, outputs, rejected = parse_output_images(unwrap_markdown(reply), chosen)
    processed, n_refs = rebuild_references(processed, selected)
    stats.update(rejected_images=rejected, references=n_refs)
    return _answer("separate", "llm", selected, caller, mark, processed, placeholder, outputs, stats)


STRATEGIES = ("single_stage", "multi_stage", "separate")

__all__ = [
    "Answer", "FIGURE_WIDTH", "Mode", "OutputImage", "STRATEGIES", "TextEncoderFn", "figure_block", "image_slot",
    "input_segments", "match_images_to_lines", "multi_stage", "parse_output_images", "parse_placement",
    "placeholders_to_markdown", "rebuild_references", "RenderReport", "render_html", "render_html_with_report",
    "separate", "single_stage",
]
