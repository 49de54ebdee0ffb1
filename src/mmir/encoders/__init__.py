"""Text and multimodal encoders, the OCR captioner, the content-addressed embedding cache (``cache``) and the
sharded on-disk vector store (``store``, read side in ``sharded``)."""
