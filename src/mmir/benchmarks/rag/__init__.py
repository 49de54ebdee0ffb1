"""End-to-end RAG QA (MM-BRIGHT §5, Table 7): answers from no evidence, the oracle, or a run's top-k, scored by
an LLM judge against the reference answer, with strict score parsing and repeat agreement."""
