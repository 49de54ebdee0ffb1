"""M2RAG: multimodal retrieval-augmented multimodal generation and its evaluation (``shared/specs/m2rag.md``).

Modules: ``records``, ``loader`` (§1), ``knowledge_base``, ``selection`` (§2-3), ``describe`` (§2.2),
``generate`` (§4-5), ``render``, ``metrics`` (§6.1-6.6), ``aggregate`` (§6.7), ``calls``/``parsing``/``media``.
"""
