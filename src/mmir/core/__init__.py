"""Lowest layer: errors that name where bad input sits, atomic file output, logging, the artifact layout."""
