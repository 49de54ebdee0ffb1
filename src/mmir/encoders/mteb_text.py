"""``backend: mteb``: a dense text encoder that mteb builds, encoded through mteb's encode protocol.

``mteb.get_model(name, revision)`` builds a model of mteb's registry (its loader, prompts and instructions) or a
hub model; a local sentence-transformers directory (or a ``pypi:`` package of one) goes through mteb's
``SentenceTransformerEncoderWrapper``, the wrapper mteb picks for such a model on the hub (``mteb.get_model`` itself
reads only the registry and the hub). Texts are encoded by the model's ``encode(DataLoader, task_metadata=...,
hf_split=..., hf_subset=..., prompt_type=PromptType.query | PromptType.document)`` with the task metadata of the MTEB
port's Task 1 (``MMBrightT2TRetrieval``, :mod:`mmir.core.mteb_port`) whatever the mmir task: a text system reads
images as image text, so every input is text to text. Vectors are L2-normalised (mmir ranks by cosine).

Images: v1 encodes text only (``kind: dense``); a model whose mteb metadata lacks the text modality is refused.
"""

from __future__ import annotations

import importlib.metadata
import logging

import numpy as np

from mmir.config.models import MTEBSystem
from mmir.core import mteb_port
from mmir.encoders.batching import token_batches
from mmir.encoders.fingerprint import hub_commit, resolve_model
from mmir.encoders.text_base import HubTextEncoder, resolve_device
from mmir.encoders.truncation import CHARS_PER_TOKEN, TextLimit, Truncations, cut_chars, default_max_chars, silence_length_warning

log = logging.getLogger(__name__)

#: the mmir role -> mteb's PromptType value
PROMPT_TYPES = {"query": "query", "document": "document"}
#: the loader of a local directory (the key's name of mteb's wrapper class)
ST_WRAPPER = "mteb.models.sentence_transformer_wrapper.SentenceTransformerEncoderWrapper"
_INSTALL = "backend: mteb needs the optional extra mmir[mteb] (pip install 'mteb==2.26.24'; `make setup` installs it)"


def mteb_version() -> str:
    """The installed mteb's version. Raises: ImportError naming the extra to install."""
    try:
        return importlib.metadata.version("mteb")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ImportError(_INSTALL) from exc


def _stable(value):
    """``value`` as JSON-like data that is the same in every process: a function or class by its qualified name (a
    ``functools.partial`` by its function's and arguments), containers element by element, anything else by its
    type and ``repr`` (never a memory address)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_stable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if hasattr(value, "func") and hasattr(value, "keywords"):  # functools.partial
        return {"partial": _stable(value.func), "args": _stable(list(value.args)), "keywords": _stable(value.keywords)}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    text = repr(value)
    return f"{type(value).__qualname__}:{text}" if " at 0x" not in text else type(value).__qualname__


class MTEBTextEncoder(HubTextEncoder):
    """A model mteb builds (registry or hub name at ``revision``, or a local sentence-transformers directory).

    Texts are cut at ``max_chars`` (default 8 per token of the limit), templated, then encoded by mteb with the
    prompt type of their role; ``max_length`` sets the sentence-transformers model's ``max_seq_length``.
    """

    def __init__(self, system: MTEBSystem, *, domain: str | None = None):
        self.version_mteb = mteb_version()
        self.model_name, self.revision = system.model, system.revision
        self.path, self.version = resolve_model(system.model)  # version: a local hash or pypi version, None on the hub
        self._set_templates(system.query_template, system.doc_template, domain)
        self.max_length, self.max_chars, self.batch_size = system.max_length, system.max_chars, system.batch_size
        self.batch_tokens = system.batch_tokens
        self.device = resolve_device(system.device)
        self.trust_remote_code = system.trust_remote_code
        self.hf_subset = domain or "default"
        self._model = None
        self._meta = self._task = None
        self.calls = 0
        self.truncations = Truncations()

    # --- what mteb builds ----------------------------------------------------------------------------------------
    def registry_meta(self):
        """mteb's ``ModelMeta`` of a registry model (None for a local directory or a hub model outside the registry).

        Raises:
            ValueError: a ``revision`` other than the registry's pinned one (mteb's own check).
        """
        if self.version is not None:
            return None
        import mteb
        from mteb.models.model_implementations import MODEL_REGISTRY

        name = self.model_name
        if name not in MODEL_REGISTRY:
            return None
        return mteb.get_model_meta(name, self.revision)

    def _load(self):
        if self._model is None:
            import mteb
            from mteb.models import SentenceTransformerEncoderWrapper

            kw = {"trust_remote_code": True} if self.trust_remote_code else {}
            if self.version is not None:  # a local directory: the wrapper mteb uses for a sentence-transformers model
                model = SentenceTransformerEncoderWrapper(self.path, device=self.device, **kw)
            else:
                model = mteb.get_model(self.model_name, self.revision, device=self.device, **kw)
            if not isinstance(model, mteb.EncoderProtocol):
                raise ValueError(f"{self.model_name}: mteb builds a {type(model).__name__}, not an encoder (EncoderProtocol); "
                                 "backend mteb takes embedding models (a cross-encoder is a reranker)")
            meta = model.mteb_model_meta
            if "text" not in (meta.modalities or ["text"]):
                raise ValueError(f"{self.model_name}: mteb lists its modalities as {meta.modalities}; backend mteb (kind: dense) "
                                 "encodes text only")
            if meta.similarity_fn_name not in (None, "cosine"):
                log.warning("%s: mteb scores it by %s; mmir L2-normalises every dense vector and ranks by cosine",
                            self.model_name, meta.similarity_fn_name)
            st = self._sentence_transformer(model)
            if self.max_length is not None:
                if st is None:
                    raise ValueError(f"{self.model_name}: max_length needs a sentence-transformers model; mteb builds a "
                                     f"{type(model).__name__} (leave max_length null)")
                st.max_seq_length = self.max_length
            self._model, self._meta = model, meta
        return self._model

    @staticmethod
    def _sentence_transformer(model):
        """The sentence-transformers model inside an mteb wrapper (``.model``), else None."""
        from sentence_transformers import SentenceTransformer

        inner = getattr(model, "model", None)
        return inner if isinstance(inner, SentenceTransformer) else None

    def task_metadata(self):
        """The port's Task 1 metadata (``mteb.TaskMetadata``) with this encoder's domain as its one hf_subset."""
        if self._task is None:
            from mteb.abstasks.task_metadata import TaskMetadata

            self._task = TaskMetadata(**mteb_port.task_metadata_fields([self.hf_subset]))
        return self._task

    def prompt(self, role: str) -> str:
        """The text mteb puts before an input of ``role`` for a sentence-transformers based wrapper: an instruction
        model's formatted task instruction (documents: only when it instructs passages), else the model prompt
        mteb selects (task name, task type, then prompt type); ``""`` when none."""
        from mteb.models.abs_encoder import get_prompt_name
        from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
        from mteb.types import PromptType

        model, meta, pt = self._load(), self.task_metadata(), PromptType(PROMPT_TYPES[role])
        if isinstance(model, InstructSentenceTransformerModel):  # as its encode: the formatted task instruction
            if role == "document" and not model.apply_instruction_to_passages:
                return ""
            return model.get_task_instruction(meta, pt) or ""
        prompts = getattr(model, "model_prompts", None) or {}
        name = get_prompt_name(prompts, meta, pt) if prompts else None
        return (prompts.get(name) or "") if name else ""

    # --- cache key, limits, truncations -----------------------------------------------------------------------
    def cache_spec(self) -> dict:
        """mteb's version, the model name, its resolved revision (registry pin, hub commit) or local hash / pypi
        version, mteb's loader and loader arguments (a registry model's prompts and instructions), the task metadata
        and hf_subset it is prompted with, the prompt types, max_length, character budget, rendered templates,
        normalisation, remote code."""
        meta = self.registry_meta()
        if meta is not None:
            revision, loader = meta.revision, _stable(meta.loader)
            loader_kwargs = {k: _stable(v) for k, v in sorted((meta.loader_kwargs or {}).items())}
        else:
            revision = self.revision if self.version is not None else hub_commit(self.model_name, self.revision)
            loader = ST_WRAPPER if self.version is not None else "mteb.get_model (hub)"
            loader_kwargs = {}
        spec = {"backend": "mteb", "mteb": self.version_mteb, "model": self.model_name, "revision": revision,
                "version": self.version, "loader": loader, "loader_kwargs": loader_kwargs,
                "task": mteb_port.TASK_NAMES["task1"], "task_prompt": mteb_port.T2T_QUERY_PROMPT, "hf_split": mteb_port.SPLIT,
                "hf_subset": self.hf_subset, "prompt_types": dict(PROMPT_TYPES), "max_length": self.max_length,
                "normalize": True}
        return spec | self._template_spec() | {
            "max_chars": self.max_chars if self.max_chars is not None else f"{CHARS_PER_TOKEN}/token",
            "trust_remote_code": self.trust_remote_code}

    def _limit(self) -> tuple[object | None, int | None]:
        """``(tokenizer, token limit)`` of a sentence-transformers based model, else ``(None, None)``."""
        st = self._sentence_transformer(self._load())
        return (st.tokenizer, int(st.max_seq_length)) if st is not None else (None, None)

    def _char_budget(self) -> int | None:
        if self.max_chars is not None:
            return self.max_chars
        _, limit = self._limit()
        return default_max_chars(self.max_length or limit) if (self.max_length or limit) else None

    def _cuts(self, texts: list[str], role: str) -> tuple[list[str], list[bool], list[int] | None, int | None, int | None]:
        """``(inputs, char-cut flags, token lengths before truncation or None, token limit, character budget)`` of
        ``texts``: cut, templated, and (a sentence-transformers based model) tokenised with mteb's prompt in front."""
        budget = self._char_budget()
        cut, flags = cut_chars(list(texts), budget)
        inputs = self._apply(cut, role)
        tok, limit = self._limit()
        if tok is None:
            return inputs, flags, None, None, budget
        silence_length_warning(tok)
        prompt = self.prompt(role)
        lengths = [len(ids) for ids in tok([prompt + t for t in inputs], add_special_tokens=True)["input_ids"]] if inputs else []
        return inputs, flags, lengths, limit, budget

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The cuts encoding ``texts`` makes (character cuts; token cuts of the prompted text for a
        sentence-transformers based model), without running the model."""
        _, flags, lengths, limit, budget = self._cuts(texts, role)
        return Truncations().record(flags, lengths, limit, what=f"{self.model_name} {role}s", max_chars=budget)

    @property
    def text_limit(self):
        """:meth:`role_limit` for a sentence-transformers based model; None for another wrapper (Task 4 pair texts then
        take ``pair_chars``, as for encoders without a tokenizer). Loads the model."""
        return self.role_limit if self._limit()[0] is not None else None

    def role_limit(self, role: str) -> TextLimit:
        """Tokenizer, token limit and character budget of ``role`` texts (mteb's prompt and the template included)."""
        tok, limit = self._limit()
        prefix, suffix = self._frame[role]
        specials = len(tok("", add_special_tokens=True)["input_ids"]) - len(tok("", add_special_tokens=False)["input_ids"])
        return TextLimit(tok, limit, self._char_budget(), self.prompt(role) + prefix, suffix, specials)

    # --- encoding ------------------------------------------------------------------------------------------------
    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        import torch
        from datasets import Dataset
        from mteb.types import PromptType
        from torch.utils.data import DataLoader

        model = self._load()
        self.calls += 1
        inputs, flags, lengths, limit, budget = self._cuts(texts, role)
        self.truncations.record(flags, lengths, limit, what=f"{self.model_name} {role}s", max_chars=budget)
        if not inputs:
            st = self._sentence_transformer(model)
            dim = (st.get_embedding_dimension() if st is not None else None) or self._meta.embed_dim or 0
            return np.zeros((0, dim if isinstance(dim, int) else 0), dtype=np.float32)
        if lengths is not None and self.batch_tokens is not None:  # texts of about one length per call, as the st backend
            batches = token_batches([min(n, limit) for n in lengths], self.batch_tokens, self.batch_size)
        else:
            batches = [list(range(i, min(i + self.batch_size, len(inputs)))) for i in range(0, len(inputs), self.batch_size)]
        task, prompt_type = self.task_metadata(), PromptType(PROMPT_TYPES[role])
        out = None
        for rows in batches:  # one mteb encode call per batch: mteb's text dataloader ("text" column) of those rows
            loader = DataLoader(Dataset.from_dict({"text": [inputs[i] for i in rows]}), batch_size=len(rows))
            vecs = model.encode(loader, task_metadata=task, hf_split=mteb_port.SPLIT, hf_subset=self.hf_subset,
                                prompt_type=prompt_type, batch_size=len(rows), show_progress_bar=False)
            # L2 rows as sentence-transformers' normalize_embeddings (torch's normalize): the same bits as that backend
            vecs = torch.nn.functional.normalize(torch.as_tensor(vecs).detach().cpu().float(), p=2, dim=1).numpy()
            if out is None:
                out = np.empty((len(inputs), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        return out

    def encode_queries(self, texts):
        return self._encode(list(texts), "query")

    def encode_documents(self, texts):
        return self._encode(list(texts), "document")
