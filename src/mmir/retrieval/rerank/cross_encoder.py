"""Cross-encoder rerankers: sentence-transformers ``CrossEncoder`` (BERT / XLM-RoBERTa sequence classifiers such as
ms-marco MiniLM and bge-reranker-v2-m3) or the mxbai-rerank package (mxbai-rerank-v2, a Qwen2 causal LM whose score
is ``logit("1") - logit("0")`` after its own template).

Scores are raw logits (higher = more relevant), one per (query, candidate) pair, in float32 numpy. Pairs longer than
``max_length`` tokens are truncated by the model and counted (:attr:`CrossEncoderScorer.truncated`).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mmir.config.models import CrossEncoderReranker

log = logging.getLogger(__name__)


def _device(cfg: CrossEncoderReranker) -> str:
    import torch

    return cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")


def _random_copy(cfg: CrossEncoderReranker, model: str, dest: Path) -> str:
    """The model's architecture (its config and tokenizer) with seeded random weights, saved to ``dest``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    kw = {"revision": cfg.revision, "trust_remote_code": cfg.trust_remote_code}
    conf = AutoConfig.from_pretrained(model, **kw)
    torch.manual_seed(cfg.seed)
    causal = bool(conf.architectures) and conf.architectures[0].endswith("ForCausalLM")
    net = (AutoModelForCausalLM if causal else AutoModelForSequenceClassification).from_config(conf)
    net.save_pretrained(dest)
    AutoTokenizer.from_pretrained(model, **kw).save_pretrained(dest)
    return str(dest)


def _mxbai_v2():
    """mxbai-rerank's ``MxbaiRerankV2`` with its pair inputs built without ``tokenizer.prepare_for_model``, which
    transformers 5 tokenizers no longer have (mxbai-rerank 0.1.6 calls it). The ids are the package's: the query
    (cut at 3/4 of ``max_length``), the separator and the document, the second part cut so the pair fits
    ``max_length`` (``truncation="only_second"``), inside the package's chat template and task prompt."""
    from mxbai_rerank import MxbaiRerankV2

    class MxbaiV2(MxbaiRerankV2):
        def prepare_inputs(self, queries, documents, *, instruction=None):
            tok, head = self.tokenizer, (self.instruction_prompt.format(instruction=instruction) + self.sep if instruction else "")
            items = []
            for query, document in zip(queries, documents):
                q = tok(head + self.query_prompt.format(query=query), add_special_tokens=False,
                        max_length=self.max_length * 3 // 4, truncation=True)["input_ids"]
                doc_max = min(self.model_max_length - len(q) - self.predefined_length, self.max_length)
                d = tok(self.doc_prompt.format(document=document), add_special_tokens=False, max_length=doc_max,
                        truncation=True)["input_ids"]
                ids = self.concat_input_ids(q + (self.sep_inputs + d)[:max(0, self.max_length - len(q))])
                items.append({"input_ids": ids, "attention_mask": [1] * len(ids)})
            return tok.pad(items, padding="longest", max_length=self.max_length_padding, pad_to_multiple_of=8,
                           return_tensors="pt")

    return MxbaiV2


class CrossEncoderScorer:
    """A loaded cross-encoder: ``scorer.score(query, texts) -> (n,) float32``; ``truncated`` counts cut pairs."""

    def __init__(self, cfg: CrossEncoderReranker):
        self.cfg = cfg
        self.device = _device(cfg)
        self.truncated = 0
        self.pairs = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="mmir-ce-") if cfg.random_init else None
        from mmir.encoders.fingerprint import resolve_model

        model = resolve_model(cfg.model)[0]  # a hub id, a local path, or pypi:<package> (../shared/MODELS.md)
        path = _random_copy(cfg, model, Path(self._tmp.name)) if self._tmp else model
        import torch

        half = cfg.fp16 and self.device.startswith("cuda")
        local = {} if cfg.local_files_only is None else {"local_files_only": cfg.local_files_only}
        revision = None if cfg.random_init else cfg.revision
        if cfg.backend == "mxbai-rerank":
            self.model = _mxbai_v2()(path, device=self.device, torch_dtype=torch.float16 if half else torch.float32,
                                       max_length=cfg.max_length, revision=revision, trust_remote_code=cfg.trust_remote_code,
                                       tokenizer_kwargs={"revision": revision, **local}, **local)
            self.tokenizer = self.model.tokenizer
        else:
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(path, device=self.device, max_length=cfg.max_length, revision=revision,
                                      trust_remote_code=cfg.trust_remote_code, model_kwargs={"dtype": torch.float16} if half else None,
                                      **local)
            self.tokenizer = self.model.tokenizer
        log.info("loaded cross-encoder %s (%s) on %s%s%s", cfg.model, cfg.backend, self.device, ", fp16" if half else "",
                 ", random weights" if cfg.random_init else "")

    def _count_truncated(self, query: str, texts: Sequence[str]) -> None:
        enc = self.tokenizer([query] * len(texts), list(texts), truncation=False, add_special_tokens=True,
                             verbose=False)
        self.truncated += sum(len(ids) > self.cfg.max_length for ids in enc["input_ids"])
        self.pairs += len(texts)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance logits of ``(query, text)`` for each text, shape ``(len(texts),)``, float32."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        self._count_truncated(query, texts)
        if self.cfg.backend == "mxbai-rerank":
            out = []
            for i in range(0, len(texts), self.cfg.batch_size):
                batch = list(texts[i:i + self.cfg.batch_size])
                out.append(self.model.predict([query] * len(batch), batch, instruction=self.cfg.instruction).numpy())
            return np.concatenate(out).astype(np.float32).reshape(-1)
        import torch

        s = self.model.predict([(query, t) for t in texts], batch_size=self.cfg.batch_size, show_progress_bar=False,
                               convert_to_numpy=True, activation_fn=torch.nn.Identity())  # raw logits, as documented
        return np.asarray(s, dtype=np.float32).reshape(len(texts), -1)[:, -1]

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
