"""transformers text encoders for the embedding models of MM-BRIGHT Table 3 (no sentence-transformers).

One class, :class:`HFTextEncoder`, three poolings chosen by the system's ``backend``:

``hf-last-token``
    Final hidden state of each sequence's last real token (``last_token_pool`` of the e5-mistral /
    SFR-Embedding-Mistral / gte-Qwen2 model cards and of MM-BRIGHT ``src/utils.py``).
``hf-mean``
    Attention-masked mean of the final hidden states (Contriever, MM-BRIGHT ``src/retrievers/task1_text.py``).
``gritlm``
    GritLM's embedding mode (GritLM-7B model card, ``gritlm`` package; also ReasonIR-8B): bidirectional
    attention, mean over the tokens after the instruction (the template before ``{text}``), right padding.

Token truncation equals ``tokenizer(..., truncation=True, max_length=max_length)``; ``append_eos`` adds the EOS
that e5-mistral's ``add_eos_token`` asks for (transformers 5 no longer honours it). Vectors: L2-normalised float32.
"""

from __future__ import annotations

import inspect
import logging

import numpy as np

from mmir.config.models import HFTextSystem
from mmir.encoders.batching import token_batches
from mmir.encoders.fingerprint import resolve_model
from mmir.encoders.text_base import HubTextEncoder, effective_dtype, resolve_device
from mmir.encoders.truncation import (
    CHARS_PER_TOKEN,
    TextLimit,
    Truncations,
    cut_chars,
    default_max_chars,
    silence_length_warning,
)

log = logging.getLogger(__name__)

POOLING = {"hf-last-token": "last-token", "hf-mean": "mean", "gritlm": "mean-after-instruction"}
#: tokenizers without a real limit report ``model_max_length`` around 1e30; below this it is a real limit.
_REAL_LIMIT = 1_000_000


def special_frame(tokenizer, probe: str = "hello world") -> tuple[list[int], list[int]]:
    """The special tokens a tokenizer puts before and after a single sequence, found by tokenising ``probe``.

    Raises:
        ValueError: the content tokens do not appear contiguously inside the special-token version.
    """
    with_sp = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    n = len(bare)
    for i in range(len(with_sp) - n + 1):
        if with_sp[i : i + n] == bare:
            return with_sp[:i], with_sp[i + n :]
    raise ValueError(f"cannot locate the content tokens of {probe!r} inside the tokenizer's special-token framing")


def last_token_pool(hidden, mask):
    """``(b, d)`` hidden state of each row's last attended position; ``hidden`` ``(b, L, d)``, ``mask`` ``(b, L)`` 0/1."""
    import torch

    last = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def mean_pool(hidden, mask):
    """``(b, d)`` mean of ``hidden`` over the positions where ``mask`` is 1 (a row with none gives zeros)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)


class HFTextEncoder(HubTextEncoder):
    """A transformers ``AutoModel`` text embedder (poolings in the module docstring).

    Settings (:class:`~mmir.config.models.HFTextSystem`, documented there): ``model`` (hub id, local directory or
    ``pypi:<package>``), ``revision`` (pin a 40-hex commit; an unpinned one is resolved for the cache key), the
    templates, ``max_length`` / ``query_max_length`` (token limits, special tokens included), ``max_chars``,
    ``dtype``, ``append_eos``, ``bidirectional`` (None = ``backend == "gritlm"``), ``padding_side`` (None = the
    tokenizer's; ``gritlm``: right), ``trust_remote_code``.

    Raises:
        ValueError: a bad template, ``{domain}`` without a domain.
    """

    def __init__(self, system: HFTextSystem, *, domain: str | None = None):
        backend = system.backend
        self.backend, self.pooling = backend, POOLING[backend]
        self.model_name, self.revision = system.model, system.revision
        self.path, self.version = resolve_model(system.model)
        self._set_templates(system.query_template, system.doc_template, domain)
        self.max_length, self.query_max_length = system.max_length, system.query_max_length
        self.max_chars, self.batch_size, self.batch_tokens = system.max_chars, system.batch_size, system.batch_tokens
        self.device = resolve_device(system.device)
        self.dtype = effective_dtype(system.dtype, self.device)
        self.append_eos = system.append_eos
        self.bidirectional = (backend == "gritlm") if system.bidirectional is None else system.bidirectional
        self.padding_side = "right" if (system.padding_side is None and backend == "gritlm") else system.padding_side
        self.trust_remote_code = system.trust_remote_code
        self._model = self._tokenizer = None
        self.calls = 0
        self.truncations = Truncations()

    # --- loading -----------------------------------------------------------------------------------------
    def _load(self):
        if self._model is None:
            import torch
            from transformers import AutoModel

            kw = {"revision": self.revision, "trust_remote_code": self.trust_remote_code}
            tok = self._load_tokenizer()
            self.adopt(AutoModel.from_pretrained(self.path, dtype=getattr(torch, self.dtype), **kw), tok)
        return self._model

    def _load_tokenizer(self):
        """The tokenizer alone (counting cuts and building pair texts need no weights: a warm cache loads none)."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.path, revision=self.revision, trust_remote_code=self.trust_remote_code)
            self._setup_tokenizer(tok)
        return self._tokenizer

    def adopt(self, model, tok) -> None:
        """Use ``model`` (a transformers ``AutoModel``) and its tokenizer ``tok`` as loaded weights: the attention,
        padding, token limits and framing set up as :meth:`_load` does (``bench/gpu_check.py`` hands it randomly
        initialised full-size architectures)."""
        if self.bidirectional:
            model.config.is_causal = False
            for module in model.modules():
                if hasattr(module, "is_causal"):
                    module.is_causal = False
        if tok is not self._tokenizer:
            self._setup_tokenizer(tok)
        self._use_cache_kw = "use_cache" in inspect.signature(model.forward).parameters
        self._model = model.to(self.device).eval()

    def _setup_tokenizer(self, tok) -> None:
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
        if self.padding_side:
            tok.padding_side = self.padding_side
        silence_length_warning(tok)
        limit = self.max_length or tok.model_max_length
        if limit is None or limit >= _REAL_LIMIT:
            raise ValueError(f"{self.model_name}: the tokenizer declares no token limit; set max_length")
        self._limits = {"document": int(limit), "query": int(self.query_max_length or limit)}
        self._head, self._tail = special_frame(tok)
        if self.append_eos:
            if tok.eos_token_id is None:
                raise ValueError(f"{self.model_name}: append_eos but the tokenizer has no eos_token")
            if not self._tail or self._tail[-1] != tok.eos_token_id:
                self._tail = [*self._tail, tok.eos_token_id]
        self._tokenizer = tok

    def cache_spec(self) -> dict:
        """Model, resolved revision (or package version / local fingerprint), rendered templates, pooling, token
        limits, character budget (``"8/token"`` = derived from the limits), EOS, attention, padding side,
        effective dtype, remote code, L2 normalisation."""
        return {"backend": self.backend, "model": self.model_name, "revision": self._resolved_revision(),
                "version": self.version, **self._template_spec(), "pooling": self.pooling,
                "max_length": self.max_length, "query_max_length": self.query_max_length,
                "max_chars": self.max_chars if self.max_chars is not None else f"{CHARS_PER_TOKEN}/token",
                "append_eos": self.append_eos, "bidirectional": self.bidirectional, "padding_side": self.padding_side,
                "dtype": self.dtype, "trust_remote_code": self.trust_remote_code, "normalize": "l2"}

    # --- tokenisation ------------------------------------------------------------------------------------
    def _budget(self, role: str) -> int | None:
        return self.max_chars if self.max_chars is not None else default_max_chars(self._limits[role])

    def _content(self, texts: list[str], role: str) -> tuple[list[list[int]], list[bool], list[int]]:
        """``(content token ids, char-cut flags, token lengths before truncation)`` of ``texts`` (templated)."""
        self._load_tokenizer()
        cut, flags = cut_chars(texts, self._budget(role))
        content = self._tokenizer(self._apply(cut, role), add_special_tokens=False)["input_ids"] if cut else []
        return content, flags, [len(self._head) + len(c) + len(self._tail) for c in content]

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The cuts encoding ``texts`` makes (:class:`~mmir.encoders.truncation.Truncations` keys), without the model."""
        _, flags, lengths = self._content(list(texts), role)
        return Truncations().record(flags, lengths, self._limits[role], what=f"{self.model_name} {role}s",
                                    max_chars=self._budget(role))

    def text_limit(self, role: str) -> TextLimit:
        """The tokenizer, token limit and character budget for texts of ``role`` (template and framing included)."""
        self._load_tokenizer()
        prefix, suffix = self._frame[role]
        return TextLimit(self._tokenizer, self._limits[role], self._budget(role), prefix, suffix,
                         len(self._head) + len(self._tail))

    def tokenize(self, texts: list[str], role: str) -> tuple[list[list[int]], int]:
        """Truncated token ids of each text and the leading tokens ``gritlm`` pooling skips (0 otherwise)."""
        content, flags, lengths = self._content(texts, role)
        tok, limit = self._tokenizer, self._limits[role]
        room = limit - len(self._head) - len(self._tail)
        if room < 1:
            raise ValueError(f"a token limit of {limit} leaves no room for text after the special tokens")
        ids = [self._head + list(c[:room]) + self._tail for c in content]
        self.truncations.record(flags, lengths, limit, what=f"{self.model_name} {role}s", max_chars=self._budget(role))
        skip = 0
        prefix = self._frame[role][0]
        if self.backend == "gritlm" and prefix:  # as the gritlm package: len(tokenizer(instruction)), none if empty
            skip = len(tok(prefix, add_special_tokens=True)["input_ids"])
        return ids, skip

    def _batch(self, ids: list[list[int]]):
        import torch

        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), self._tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        left = self._tokenizer.padding_side == "left"
        for r, x in enumerate(ids):
            sl = slice(width - len(x), width) if left else slice(0, len(x))
            input_ids[r, sl] = torch.tensor(x, dtype=torch.long)
            mask[r, sl] = 1
        return input_ids, mask

    # --- encoding ----------------------------------------------------------------------------------------
    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        self.calls += 1
        model = self._load()
        if not texts:
            return np.zeros((0, int(model.config.hidden_size)), dtype=np.float32)
        ids, skip = self.tokenize(list(texts), role)
        out = [None] * len(ids)
        with torch.inference_mode():  # batches of about one length (less padding); rows restored below
            for rows in token_batches([len(x) for x in ids], self.batch_tokens, self.batch_size):
                input_ids, mask = self._batch([ids[i] for i in rows])
                input_ids, mask = input_ids.to(self.device), mask.to(self.device)
                kw = {"use_cache": False} if self._use_cache_kw else {}
                res = model(input_ids=input_ids, attention_mask=mask, **kw)
                hidden = res.last_hidden_state if hasattr(res, "last_hidden_state") else res[0]
                if self.pooling == "last-token":
                    pooled = last_token_pool(hidden, mask)
                else:
                    pool_mask = mask
                    if skip:
                        start = mask.shape[1] - mask.sum(dim=1, keepdim=True)  # first real position (left padding)
                        if self._tokenizer.padding_side != "left":
                            start = torch.zeros_like(start)
                        pos = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
                        pool_mask = mask * (pos >= start + skip).to(mask.dtype)
                    pooled = mean_pool(hidden.float(), pool_mask)
                vecs = F.normalize(pooled.float(), p=2, dim=-1).cpu().numpy()
                for i, v in zip(rows, vecs):
                    out[i] = v
        return np.stack(out).astype(np.float32, copy=False)

    def encode_queries(self, texts):
        return self._encode(list(texts), "query")

    def encode_documents(self, texts):
        return self._encode(list(texts), "document")
