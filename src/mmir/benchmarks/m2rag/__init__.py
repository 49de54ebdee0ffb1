"""M2RAG: multimodal retrieval-augmented multimodal generation and its evaluation (``shared/specs/m2rag.md``).

Library layer, one job per module:

* :mod:`~mmir.benchmarks.m2rag.records` -- the typed knowledge-base records (query, pages, chunks, images);
* :mod:`~mmir.benchmarks.m2rag.loader` -- the M2RAG-Bench dev set (hub at a pinned revision, or a local copy), §1;
* :mod:`~mmir.benchmarks.m2rag.knowledge_base` -- a query's knowledge base from a retrieval run over an
  MM-BRIGHT-layout prepared domain;
* :mod:`~mmir.benchmarks.m2rag.selection` -- element scoring, image curation (size filters, CLIP hook, pHash dedup)
  and the K_In-Doc input builder with its thresholds and caps, §2-3;
* :mod:`~mmir.benchmarks.m2rag.describe` -- OCR text and context-conditioned captions for text-only models, §2.2;
* :mod:`~mmir.benchmarks.m2rag.generate` -- single-stage, multi-stage and separate (MuRAR) generation, §4-5;
* :mod:`~mmir.benchmarks.m2rag.render` -- a self-contained HTML page of an answer;
* :mod:`~mmir.benchmarks.m2rag.metrics` -- the eight metrics on one answer, §6.1-6.6;
* :mod:`~mmir.benchmarks.m2rag.aggregate` -- pooling and Overall, §6.7;
* :mod:`~mmir.benchmarks.m2rag.calls`, :mod:`~mmir.benchmarks.m2rag.parsing`, :mod:`~mmir.benchmarks.m2rag.media` -- the prompt
  files (``prompts/``) and their image slot, generator-reply parsing (§4), image payloads; every call goes through
  :mod:`mmir.llm`.
"""
