"""One ONNX model run on the CPU by ONNX Runtime (``runtime: onnx``) or OpenVINO (``runtime: openvino``, which reads the
same ONNX file), and the model folder's tokenizer. Neither imports torch: a job that finds its export made loads in a
fraction of a second.

Threads: ``$OMP_NUM_THREADS`` when set (Snakemake sets it to the job's ``threads``), else the runtime's default (every
core). OpenVINO is held to float32 (``INFERENCE_PRECISION_HINT: f32``): on CPUs with bf16 or AMX units its default
would compute in bf16, and the vectors must not depend on the machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from mmir.core.threads import job_threads

Runtime = Literal["onnx", "openvino"]


class OnnxSession:
    """``session.run(feeds) -> (batch, ...) float32``: the first output of the ONNX file at ``path``.

    ``feeds`` maps input names to int64 arrays; names the graph does not take are dropped (a graph exported without
    ``token_type_ids``). Raises ValueError for another ``runtime``.
    """

    def __init__(self, path: str | os.PathLike, runtime: Runtime, inputs: tuple[str, ...], threads: int | None = None):
        self.path, self.runtime, self.inputs = Path(path), runtime, tuple(inputs)
        threads = threads if threads is not None else job_threads()
        if runtime == "onnx":
            import onnxruntime as ort

            opts = ort.SessionOptions()
            if threads:
                opts.intra_op_num_threads = threads
                opts.inter_op_num_threads = 1
            self._session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
        elif runtime == "openvino":
            import openvino as ov

            config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
            if threads:
                config["INFERENCE_NUM_THREADS"] = threads
            self._compiled = ov.Core().compile_model(str(self.path), "CPU", config)
            self._request = self._compiled.create_infer_request()
        else:
            raise ValueError(f"runtime must be onnx or openvino, got {runtime!r}")

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """The first output for ``feeds`` (int64 ``(batch, length)`` arrays), as float32."""
        feeds = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in feeds.items() if k in self.inputs}
        if self.runtime == "onnx":
            out = self._session.run(None, feeds)[0]
        else:
            out = self._request.infer(feeds)[self._compiled.output(0)]
        return np.asarray(out, dtype=np.float32)


def load_tokenizer(folder: str | os.PathLike):
    """The model folder's ``tokenizer.json`` as a transformers fast tokenizer (the ids sentence-transformers and
    ``CrossEncoder`` get from ``AutoTokenizer``), without the torch import ``AutoTokenizer`` costs (its config classes).

    Raises:
        ValueError: a folder without ``tokenizer.json`` (a slow-only tokenizer: use runtime torch).
    """
    from transformers import PreTrainedTokenizerFast

    if not (Path(folder) / "tokenizer.json").is_file():
        raise ValueError(f"{folder}: no tokenizer.json (the ONNX route needs a fast tokenizer); use runtime: torch")
    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def padded(ids: list[list[int]], pad_id: int, type_ids: list[list[int]] | None = None) -> dict[str, np.ndarray]:
    """Right-padded int64 ``input_ids``, ``attention_mask`` and ``token_type_ids`` (zeros unless given) of ``ids``."""
    width = max((len(x) for x in ids), default=0)
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    types = np.zeros((len(ids), width), dtype=np.int64)
    for r, x in enumerate(ids):
        input_ids[r, : len(x)] = x
        mask[r, : len(x)] = 1
        if type_ids is not None:
            types[r, : len(x)] = type_ids[r]
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}
