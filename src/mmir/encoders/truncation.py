"""Long inputs: a character budget before tokenisation, then the model's token limit, both counted.

MM-BRIGHT documents reach 25,243,826 characters (../shared/data/mm-bright-stats/README.md), so every text
encoder cuts at ``max_chars`` (default :data:`CHARS_PER_TOKEN` = 8 per token of the limit, about twice what
the limit keeps) before tokenising. The cut applies to the raw text, before the instruction template.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: Characters kept per token of the model's limit when ``max_chars`` is not set.
CHARS_PER_TOKEN = 8

#: The counters of :class:`Truncations`, in report order.
TRUNCATION_KEYS = ("texts", "char_cut", "token_cut", "char_cut_binding")


def default_max_chars(max_tokens: int | None) -> int | None:
    """``CHARS_PER_TOKEN * max_tokens`` (None when the token limit is unknown)."""
    return None if max_tokens is None else CHARS_PER_TOKEN * int(max_tokens)


def cut_chars(texts: Sequence[str], max_chars: int | None) -> tuple[list[str], list[bool]]:
    """Each text cut to its first ``max_chars`` characters (Python str indexing: code points).

    Returns:
        ``(texts, was_cut)``: the (possibly shortened) texts and one flag per text.
    """
    if max_chars is None:
        return [str(t) for t in texts], [False] * len(texts)
    out, flags = [], []
    for t in texts:
        t = str(t)
        cut = len(t) > max_chars
        out.append(t[:max_chars] if cut else t)
        flags.append(cut)
    return out, flags


def silence_length_warning(tokenizer) -> None:
    """Mute transformers' one-off "sequence length is longer than the specified maximum" warning of
    ``tokenizer``: the encoders tokenise without truncation on purpose (to count) and truncate themselves."""
    flags = getattr(tokenizer, "deprecation_warnings", None)
    if isinstance(flags, dict):
        flags["sequence-length-is-longer-than-the-specified-maximum"] = True


class Truncations(dict):
    """Counters of one encoder, cumulative over its calls.

    Keys (:data:`TRUNCATION_KEYS`): ``texts`` encoded by the model (not cache hits); ``char_cut``: cut at
    ``max_chars``; ``token_cut``: truncated at the token limit; ``char_cut_binding``: cut at ``max_chars`` and
    then within the token limit (raise ``max_chars`` if not 0). The last two stay 0 for engines that hide
    their tokenisation.
    """

    def __init__(self):
        super().__init__(dict.fromkeys(TRUNCATION_KEYS, 0))

    def record(self, char_cut: Sequence[bool], token_lengths: Sequence[int] | None = None,
               token_limit: int | None = None, *, what: str = "texts", max_chars: int | None = None) -> dict:
        """Add one call's counts and return them; ``token_lengths`` are per input before truncation (or None)."""
        n = len(char_cut)
        call = {"texts": n, "char_cut": int(sum(bool(c) for c in char_cut)), "token_cut": 0, "char_cut_binding": 0}
        if token_lengths is not None and token_limit is not None:
            over = [int(length) > token_limit for length in token_lengths]
            call["token_cut"] = int(sum(over))
            call["char_cut_binding"] = int(sum(1 for c, o in zip(char_cut, over) if c and not o))
        for k, v in call.items():
            self[k] += v
        if call["char_cut"] or call["token_cut"]:
            log.info("%s: %d of %d cut at %s characters (%d of them then fit the token limit), %d truncated at "
                     "%s tokens", what, call["char_cut"], n, max_chars, call["char_cut_binding"], call["token_cut"],
                     token_limit)
        return call


@dataclass(frozen=True)
class TextLimit:
    """What an encoder reads of one text: its tokenizer (a fast transformers tokenizer), the token limit
    (``specials`` special tokens and the template included), the character budget applied before tokenising,
    and the template around the text."""

    tokenizer: Any
    max_tokens: int
    max_chars: int | None
    prefix: str = ""
    suffix: str = ""
    specials: int = 0

    def length(self, text: str) -> int:
        """Tokens the model is given for ``text`` before truncation (template and special tokens included)."""
        silence_length_warning(self.tokenizer)
        return len(self.tokenizer(self.prefix + text + self.suffix, add_special_tokens=False)["input_ids"]) + self.specials

    def kept(self, text: str) -> int:
        """Characters of ``text`` the model reads: its first ``max_chars``, then the tokens within the limit (template
        and special tokens counted); ``len(text)`` when nothing is cut."""
        cut = text if self.max_chars is None else text[: self.max_chars]
        if self.length(cut) <= self.max_tokens:
            return len(cut)
        room = self.max_tokens - self.length("")
        if room <= 0:
            return 0
        ends = self.token_ends(cut)
        return ends[room - 1] if len(ends) >= room else len(cut)

    def token_ends(self, text: str) -> list[int]:
        """The character end of each token of ``text`` alone (no template, no special tokens): ``text[:ends[k-1]]``
        holds its first ``k`` tokens."""
        silence_length_warning(self.tokenizer)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [int(e) for _, e in enc["offset_mapping"]]


#: the counters of :func:`image_text_cuts`, added to a kind's truncations where its texts end with image text
IMAGE_TEXT_KEYS = ("image_text", "image_text_cut", "image_text_dropped")


def image_text_cuts(texts: Sequence[str], starts: Sequence[int | None], kept: Sequence[int]) -> dict[str, int]:
    """What the encoder's cut left of the image text that ends each text (a Task 2 query's captions, a Task 3 image's
    text, a Task 4 pair's image text): ``image_text`` texts with image text (``starts[i]`` not None: where it
    begins); ``image_text_cut`` those the model does not read whole (``kept[i]``, the characters it reads, ends
    before the text does); ``image_text_dropped`` those of which it reads no character."""
    rows = [(len(t), s, k) for t, s, k in zip(texts, starts, kept) if s is not None]
    return {"image_text": len(rows), "image_text_cut": sum(k < n for n, _, k in rows),
            "image_text_dropped": sum(k <= s for _, s, k in rows)}
