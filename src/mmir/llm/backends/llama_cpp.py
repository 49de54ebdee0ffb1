"""A local GGUF chat model through llama-cpp-python (default: the offline Qwen2.5-Coder-0.5B-Instruct of
:mod:`mmir.llm.offline`). Text only."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from mmir.config.models import LlamaCppGenerator
from mmir.core.errors import ConfigError, MmirError
from mmir.core.threads import job_threads
from mmir.llm.backends.base import Backend, Generation, is_empty_text, token_logprobs, with_defaults
from mmir.llm.errors import GenerationFailure
from mmir.llm.messages import text_only_messages

#: /proc/cpuinfo flags each instruction-set feature of llama.cpp's CPU build needs (``llama_print_system_info``)
BUILD_FEATURE_FLAGS: Mapping[str, tuple[str, ...]] = {
    "AVX": ("avx",), "AVX2": ("avx2",), "F16C": ("f16c",), "FMA": ("fma",), "BMI2": ("bmi2",),
    "AVX512": ("avx512f", "avx512bw", "avx512vl", "avx512dq"), "AVX512_VBMI": ("avx512vbmi",),
    "AVX512_VNNI": ("avx512_vnni",), "AVX512_BF16": ("avx512_bf16",), "AVX_VNNI": ("avx_vnni",),
    "AMX_INT8": ("amx_int8",),
}


def missing_cpu_flags(system_info: str, cpu_flags: set[str]) -> list[str]:
    """The CPU flags that llama.cpp's build uses (``FEATURE = 1`` in ``system_info``) and ``cpu_flags`` lacks."""
    built = re.findall(r"\b([A-Z0-9_]+) = 1\b", system_info)
    return [flag for feature in built for flag in BUILD_FEATURE_FLAGS.get(feature, ()) if flag not in cpu_flags]


def check_cpu_supports_build(llama_cpp, cpuinfo: Path = Path("/proc/cpuinfo")) -> None:
    """Raises :class:`MmirError` when llama-cpp-python was compiled for instructions this CPU lacks (a wheel built on
    another machine, e.g. an AVX-512 build from a pip cache shared by a cluster's nodes), which would otherwise stop
    the process with SIGILL at the first token. No check where ``cpuinfo`` is unreadable (not Linux)."""
    try:
        flags = set(re.search(r"^flags\s*:(.*)$", cpuinfo.read_text(), re.M).group(1).split())
    except (OSError, AttributeError):
        return
    missing = missing_cpu_flags(llama_cpp.llama_print_system_info().decode(), flags)
    if missing:
        raise MmirError(f"llama-cpp-python {llama_cpp.__version__} was built for CPU instructions this machine lacks "
                        f"({', '.join(missing)}; its CPU flags in {cpuinfo}): rebuild it here, e.g. `make setup` after "
                        "`pip uninstall -y llama-cpp-python && pip cache remove llama_cpp_python`")


class LlamaCppBackend(Backend):
    """A local GGUF chat model through llama-cpp-python (CPU here). Text only.

    Args:
        settings: its ``generators.<name>`` entry (:class:`~mmir.config.models.LlamaCppGenerator`); a setting it
            leaves out takes the value in :attr:`DEFAULTS`:

            - ``model_path``: GGUF file. ``None`` (and no ``hf_repo``) = the offline Qwen2.5-Coder-0.5B-Instruct
              Q4_K_M assembled by :func:`mmir.llm.offline.qwen05b_gguf_path`.
            - ``cache_dir``: where that file is assembled (see ``qwen05b_gguf_path``).
            - ``hf_repo``, ``hf_file``: load from the Hugging Face hub instead (``Llama.from_pretrained``; needs network).
            - ``n_ctx``: context length.
            - ``n_threads``: CPU threads; ``None`` = the job's threads (:func:`mmir.core.threads.job_threads`), else
              llama.cpp's default.
            - ``n_gpu_layers``: layers offloaded to a GPU if llama.cpp was built with one.
            - ``chat_format``: llama-cpp chat format; ``None`` = the template stored in the GGUF.
            - ``model_id``: name used in cache keys; default the hub id for the offline model, else the file name.
            - ``verbose``: llama.cpp's own log.

    The model loads lazily on the first call, so a run served entirely from a cache never loads it. Calls
    are serialised (a ``Llama`` object is not thread-safe); sample ``i`` of ``n`` uses ``seed + i``.

    Log-probabilities (``generate(..., top_logprobs=k)``): llama-cpp-python's ``create_chat_completion(logprobs=True,
    top_logprobs=k)``, the log-softmax of the raw logits at each reply position (before temperature). It needs the
    model loaded with ``logits_all=True`` (logits kept for every position: ``n_ctx x n_vocab`` floats), so the model
    is (re)loaded that way on the first such call.
    """

    name = "llama_cpp"
    supports_logprobs = True

    #: The value of each setting a generator entry leaves out.
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "model_path": None, "cache_dir": None, "hf_repo": None, "hf_file": None, "n_ctx": 4096, "n_threads": None,
        "n_gpu_layers": 0, "chat_format": None, "model_id": None, "verbose": False,
    }

    def __init__(self, settings: LlamaCppGenerator):
        super().__init__()
        from mmir.llm import offline as offline_llm

        s = with_defaults(settings, self.DEFAULTS)
        model_path, cache_dir, hf_repo, hf_file, model_id = s.model_path, s.cache_dir, s.hf_repo, s.hf_file, s.model_id
        n_ctx, n_threads, n_gpu_layers, chat_format, verbose = s.n_ctx, s.n_threads, s.n_gpu_layers, s.chat_format, s.verbose
        if (hf_repo is None) != (hf_file is None):
            raise ConfigError("hf_repo", "hf_repo and hf_file must be given together")
        if hf_repo is not None and model_path is not None:
            raise ConfigError("model_path", "give either model_path or hf_repo/hf_file, not both")
        self._path = Path(model_path) if model_path is not None else None
        if self._path is not None and not self._path.is_file():
            raise ConfigError("model_path", f"GGUF file not found: {self._path}")
        self.cache_dir, self.hf_repo, self.hf_file = cache_dir, hf_repo, hf_file
        self.n_ctx, self.n_threads, self.n_gpu_layers = n_ctx, n_threads, n_gpu_layers
        self.chat_format, self.verbose = chat_format, verbose
        if model_id is None:
            if hf_repo is not None:
                model_id = f"{hf_repo}:{hf_file}"
            elif self._path is None:
                model_id = f"{offline_llm.HUB_REPO}:{offline_llm.HUB_FILE}"
            else:
                model_id = self._path.name
        self._model_id = model_id
        self._revision: str | None = None
        self._llm = None
        self._logits_all = False
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def model_path(self) -> Path | None:
        """The GGUF file (assembling the offline model if needed); ``None`` for a hub model not yet loaded."""
        if self._path is None and self.hf_repo is None:
            from mmir.llm.offline import qwen05b_gguf_path

            self._path = qwen05b_gguf_path(self.cache_dir)
        return self._path

    @property
    def model_revision(self) -> str | None:
        """sha256 of the GGUF file (memoised next to it)."""
        if self._revision is None:
            from mmir.llm.offline import file_sha256

            path = self.model_path
            if path is None:  # hub model: the file is only known after the download
                self._load()
                path = Path(self._llm.model_path)
            self._revision = file_sha256(path)
        return self._revision

    def _load(self, logits_all: bool = False):
        if self._llm is not None and logits_all and not self._logits_all:
            self._llm.close()  # reloaded below with logits kept for every position (log-probabilities)
            self._llm = None
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError as e:
                raise MmirError("the llama_cpp backend needs llama-cpp-python: pip install 'llama-cpp-python[server]'") from e
            check_cpu_supports_build(llama_cpp)
            kw = dict(n_ctx=self.n_ctx, n_gpu_layers=self.n_gpu_layers, verbose=self.verbose, logits_all=logits_all)
            self._logits_all = logits_all
            threads = self.n_threads if self.n_threads is not None else job_threads()
            if threads is not None:  # llama.cpp's default is every core: two such jobs side by side would oversubscribe
                kw["n_threads"] = threads
            if self.chat_format is not None:
                kw["chat_format"] = self.chat_format
            if self.hf_repo is not None:
                self._llm = llama_cpp.Llama.from_pretrained(self.hf_repo, self.hf_file, **kw)
            else:
                self._llm = llama_cpp.Llama(model_path=str(self.model_path), **kw)
        return self._llm

    def _generate(self, messages, *, temperature, max_tokens, seed, n, top_logprobs: int | None = None) -> Generation:
        chat = text_only_messages(messages, self.name)
        t0 = time.monotonic()
        texts, reasons, prompt_tokens, completion_tokens, logprobs = [], [], 0, 0, []
        with self._lock:
            llm = self._load(logits_all=top_logprobs is not None)
            for i in range(n):
                kw: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
                if seed is not None:
                    kw["seed"] = seed + i
                if top_logprobs is not None:
                    kw |= {"logprobs": True, "top_logprobs": top_logprobs}
                try:
                    out = llm.create_chat_completion(messages=chat, **kw)
                except ValueError as e:  # e.g. prompt longer than n_ctx
                    raise GenerationFailure(
                        "backend_error", f"{type(e).__name__}: {e}", latency_s=time.monotonic() - t0, history=["backend_error"]
                    ) from e
                choice = (out.get("choices") or [{}])[0]
                text = (choice.get("message") or {}).get("content")
                if is_empty_text(text):
                    raise GenerationFailure(
                        "empty_content", f"completion {i} is empty (finish_reason={choice.get('finish_reason')!r})",
                        latency_s=time.monotonic() - t0, history=["empty_content"],
                    )
                usage = out.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens", 0))
                completion_tokens += int(usage.get("completion_tokens", 0))
                texts.append(text)
                reasons.append(choice.get("finish_reason"))
                if top_logprobs is not None:
                    logprobs.append(token_logprobs((choice.get("logprobs") or {}).get("content"), i, t0))
        return Generation(
            texts=texts, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            latency_s=time.monotonic() - t0, retries=0, finish_reasons=reasons, model=self._model_id,
            logprobs=logprobs if top_logprobs is not None else None,
        )

