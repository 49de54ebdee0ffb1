"""A local Hugging Face model: a causal LM (tokenizer chat template) or a VLM (``AutoProcessor``), on CUDA or CPU.
Image parts are decoded by the safe decoder (:func:`mmir.llm.messages.decoded_image`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from mmir.config.models import TransformersGenerator
from mmir.llm.backends.base import Backend, Generation, is_empty_text, with_defaults
from mmir.llm.errors import GenerationFailure
from mmir.llm.messages import Message, decoded_image, message_parts, text_only_messages


class TransformersBackend(Backend):
    """A local Hugging Face model: a causal LM (tokenizer chat template) or a VLM (``AutoProcessor`` chat
    template + ``AutoModelForImageTextToText``). Runs on CUDA when available, else CPU.

    Args:
        settings: its ``generators.<name>`` entry (:class:`~mmir.config.models.TransformersGenerator`); a setting it
            leaves out takes the value in :attr:`DEFAULTS`:

            - ``model``: hub id or local directory.
            - ``revision``: hub revision (branch, tag or commit); recorded in cache keys.
            - ``gguf_file``: load this GGUF file from ``model`` (dequantised by transformers; needs ``gguf``).
            - ``vision``: ``True`` = VLM, ``False`` = text LM, ``None`` = decide from the config (``vision_config``).
            - ``device``: ``"cuda"``, ``"cpu"``, ...; default CUDA if available.
            - ``dtype``: torch dtype name (``"bfloat16"``); default float32 on CPU, bfloat16 on CUDA.
            - ``local_files_only``: never reach the hub (default: ``HF_HUB_OFFLINE`` is set).
            - ``trust_remote_code``: passed to ``from_pretrained``.
            - ``model_id``: name used in cache keys; default ``model`` (for a GGUF in a local folder: the file name).

    Use :meth:`from_objects` to wrap an already-built model and tokenizer/processor. The model loads lazily;
    calls are serialised; sample ``i`` of ``n`` is seeded with ``seed + i`` (``torch.manual_seed``).
    """

    name = "transformers"

    #: The value of each setting a generator entry leaves out.
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "revision": None, "gguf_file": None, "vision": None, "device": None, "dtype": None, "local_files_only": None,
        "trust_remote_code": False, "model_id": None,
    }

    def __init__(self, settings: TransformersGenerator):
        super().__init__()
        s = with_defaults(settings, self.DEFAULTS)
        model, revision, gguf_file, vision, device, dtype = s.model, s.revision, s.gguf_file, s.vision, s.device, s.dtype
        local_files_only, trust_remote_code, model_id = s.local_files_only, s.trust_remote_code, s.model_id
        self.source, self._revision, self.gguf_file = str(model), revision, gguf_file
        self.vision, self._device, self.dtype = vision, device, dtype
        if local_files_only is None:
            local_files_only = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
        self.local_files_only, self.trust_remote_code = local_files_only, trust_remote_code
        if model_id is None:
            if gguf_file:  # a local folder's path says nothing about the weights: name the file (sha256 in revision)
                model_id = gguf_file if Path(self.source).is_dir() else f"{self.source}:{gguf_file}"
            else:
                model_id = self.source
        self._model_id = model_id
        self._model = None
        self._proc = None  # tokenizer or processor
        self._lock = threading.Lock()

    @classmethod
    def from_objects(
        cls, model: Any, processor: Any, *, model_id: str, revision: str | None = None, vision: bool | None = None
    ) -> TransformersBackend:
        """Wrap a built ``PreTrainedModel`` and its tokenizer (text LM) or processor (VLM).

        Args:
            model: the model (moved to the backend's device).
            processor: a tokenizer or processor with a chat template.
            model_id, revision: recorded in cache keys (give a weights hash as ``revision`` when known).
            vision: ``None`` = VLM when ``processor`` has an ``image_processor``.
        """
        self = cls(TransformersGenerator(backend="transformers", model=model_id, revision=revision, vision=vision, model_id=model_id))
        if self.vision is None:
            self.vision = hasattr(processor, "image_processor")
        self._model, self._proc = model.to(self.device).eval(), processor
        return self

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model_revision(self) -> str | None:
        if self._revision is not None:
            return self._revision
        if self.gguf_file:
            from mmir.llm.offline import file_sha256

            p = Path(self.source) / self.gguf_file
            if p.is_file():
                self._revision = file_sha256(p)
        return self._revision

    @property
    def device(self) -> str:
        if self._device is None:
            import torch

            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        return self._device

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        import transformers as tf

        kw: dict[str, Any] = {
            "revision": self._revision,
            "local_files_only": self.local_files_only,
            "trust_remote_code": self.trust_remote_code,
        }
        if self.gguf_file:
            kw["gguf_file"] = self.gguf_file
        if self.vision is None:
            cfg = tf.AutoConfig.from_pretrained(self.source, **kw)
            self.vision = hasattr(cfg, "vision_config")
        dtype = getattr(torch, self.dtype) if self.dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        if self.vision:
            self._proc = tf.AutoProcessor.from_pretrained(self.source, **kw)
            model = tf.AutoModelForImageTextToText.from_pretrained(self.source, dtype=dtype, **kw)
        else:
            self._proc = tf.AutoTokenizer.from_pretrained(self.source, **kw)
            model = tf.AutoModelForCausalLM.from_pretrained(self.source, dtype=dtype, **kw)
        self._model = model.to(self.device).eval()
        if self._revision is None:
            self._revision = getattr(model.config, "_commit_hash", None) or self.model_revision

    def _inputs(self, messages: Sequence[Message]) -> Any:
        if not self.vision:
            chat = text_only_messages(messages, f"{self.name} (text model {self._model_id})")
            enc = self._proc.apply_chat_template(
                chat, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
            return enc
        chat = []
        for i, m in enumerate(messages):
            parts = []
            for j, p in enumerate(message_parts(m, i)):
                if p["type"] == "text":
                    parts.append({"type": "text", "text": p["text"]})
                elif p["type"] == "image":
                    parts.append({"type": "image", "image": decoded_image(p["image"], f"message {i}, part {j}")})
                else:
                    parts.append({"type": "image", "url": p["image_url"]["url"]})
            chat.append({"role": m["role"], "content": parts})
        return self._proc.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )

    def _generate(self, messages, *, temperature, max_tokens, seed, n) -> Generation:
        import torch

        t0 = time.monotonic()
        with self._lock:
            self._load()
            enc = self._inputs(messages).to(self.device)
            tok = getattr(self._proc, "tokenizer", self._proc)
            eos = self._model.generation_config.eos_token_id
            eos_ids = set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
            pad = tok.pad_token_id if tok.pad_token_id is not None else (min(eos_ids) if eos_ids else 0)
            prompt_len = int(enc["input_ids"].shape[1])
            texts, reasons, completion_tokens = [], [], 0
            for i in range(n):
                if seed is not None:
                    torch.manual_seed(seed + i)
                kw: dict[str, Any] = {"max_new_tokens": max_tokens, "pad_token_id": pad, "do_sample": temperature > 0}
                if temperature > 0:
                    kw.update(temperature=temperature, top_p=1.0, top_k=0)
                with torch.inference_mode():
                    out = self._model.generate(**enc, **kw)
                new = out[0, prompt_len:].tolist()
                stop_at = next((j for j, t in enumerate(new) if t in eos_ids), None)
                if stop_at is not None:
                    new, reason = new[: stop_at + 1], "stop"
                else:
                    reason = "length"
                completion_tokens += len(new)
                text = tok.decode(new, skip_special_tokens=True)
                if is_empty_text(text):
                    raise GenerationFailure(
                        "empty_content", f"completion {i} decodes to empty text ({len(new)} tokens, {reason})",
                        latency_s=time.monotonic() - t0, history=["empty_content"],
                    )
                texts.append(text)
                reasons.append(reason)
        return Generation(
            texts=texts, prompt_tokens=prompt_len, completion_tokens=completion_tokens,
            latency_s=time.monotonic() - t0, retries=0, finish_reasons=reasons, model=self._model_id,
        )

