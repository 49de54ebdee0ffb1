"""Text and multimodal encoders, the OCR captioner, and the content-addressed embedding cache."""
