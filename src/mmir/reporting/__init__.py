"""Tables (markdown, CSV) and DVC metrics files from the per-domain metric files."""
