"""Data sources (MM-BRIGHT from the hub or a local copy, TREC collections) and the prepare step."""
