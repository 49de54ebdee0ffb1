"""Measures (pytrec_eval), per-query values and their aggregation."""
