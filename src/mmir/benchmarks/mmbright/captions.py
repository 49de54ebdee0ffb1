"""VLM captions: a detailed description of each image from any backend that takes images (paper §5,
"image captions"), every call through an :class:`~mmir.llm.client.LLMClient` (the generation cache). Failures
are counted and give "" (the image then contributes no text), never a silently invented caption."""

from __future__ import annotations

import logging

import pandas as pd

from mmir.benchmarks.mmbright import MMBRIGHT_PROMPTS
from mmir.llm.client import LLMClient

log = logging.getLogger(__name__)


def vlm_captions(images: pd.DataFrame, captioner: dict, client: LLMClient) -> tuple[list[str], dict]:
    """Captions of ``images`` (columns ``path, bytes, ok``) in order; corrupt images (``ok`` False) get "".

    Args:
        images: the images.
        captioner: the ``captioners.<name>`` config (``prompt``, ``temperature``, ``max_tokens``, ``seed``).
        client: the VLM (its audit receives one record per image).

    Returns:
        ``(texts, counts)`` with counts ``captioned`` and ``failed``.

    Raises:
        UnsupportedInputError: the backend takes no images (e.g. the text-only llama_cpp GGUF).
    """
    tpl = MMBRIGHT_PROMPTS.get(captioner["prompt"])
    todo = [i for i, ok in enumerate(images["ok"]) if ok]
    msgs = [[{"role": "user", "content": [{"type": "text", "text": tpl.render()},
                                          {"type": "image", "image": bytes(images["bytes"].iloc[i])}]}] for i in todo]
    records = client.call_many(msgs, tpl, label="caption", contexts=[{"path": images["path"].iloc[i]} for i in todo],
                               temperature=captioner["temperature"], max_tokens=captioner["max_tokens"],
                               seed=captioner["seed"])
    texts = [""] * len(images)
    failed = 0
    for i, r in zip(todo, records):
        if r.ok:
            texts[i] = r.text.strip()
        else:
            failed += 1
            log.warning("caption failed for %s: %s", images["path"].iloc[i], r.error)
    return texts, {"captioned": len(todo) - failed, "failed": failed}
