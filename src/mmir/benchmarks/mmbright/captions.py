"""VLM captions: a detailed description of each image from any backend that takes images (paper §5,
"image captions"), every call cached in the generation cache. Failures are counted and give "" (the image then
contributes no text), never a silently invented caption."""

from __future__ import annotations

import logging

import pandas as pd

log = logging.getLogger(__name__)


def vlm_captions(images: pd.DataFrame, captioner: dict, generator: dict, cache_path) -> tuple[list[str], dict]:
    """Captions of ``images`` (columns ``path, bytes, ok``) in order; corrupt images (``ok`` False) get "".

    Returns ``(texts, counts)`` with counts ``captioned``, ``failed`` and the cache's hits/misses/backend calls.

    Raises:
        UnsupportedInputError: the backend takes no images (e.g. the text-only llama_cpp GGUF).
    """
    from mmir.benchmarks.mmbright import load_prompt
    from mmir.llm.backends import make_backend
    from mmir.llm.cache import GenerationCache

    backend = make_backend(generator)
    tpl = load_prompt(captioner["prompt"])
    todo = [i for i, ok in enumerate(images["ok"]) if ok]
    msgs = [[{"role": "user", "content": [{"type": "text", "text": tpl.render()},
                                          {"type": "image", "image": bytes(images["bytes"].iloc[i])}]}] for i in todo]
    texts = [""] * len(images)
    with GenerationCache(cache_path) as cache:
        before = dict(cache.stats)
        records = cache.cached_generate_many(backend, msgs, tpl.id, tpl.text, temperature=captioner["temperature"],
                                             max_tokens=captioner["max_tokens"], seed=captioner["seed"])
        after = dict(cache.stats)
    failed = 0
    for i, rec in zip(todo, records):
        if rec.get("status") == "ok" and (rec.get("texts") or [""])[0].strip():
            texts[i] = rec["texts"][0].strip()
        else:
            failed += 1
            log.warning("caption failed for %s: %s", images["path"].iloc[i], rec.get("error", rec.get("kind", "empty")))
    counts = {"captioned": len(todo) - failed, "failed": failed, **{f"cache_{k}": after[k] - before[k] for k in after}}
    return texts, counts
