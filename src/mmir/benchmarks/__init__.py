"""The benchmarks built on the lower layers: MM-BRIGHT ablations, RAG QA, M2RAG, MMDeepResearch-Bench. Each owns its
prompts, policies and config check; none imports another."""
