"""Model registry, text and multimodal encoders, the embedding cache."""
