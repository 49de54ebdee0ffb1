"""Orchestration: unit lists, the config check before any job, and one step function per rule (called by the
Snakemake rule scripts and the CLI alike)."""
