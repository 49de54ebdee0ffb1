# Every rule's script: the step of `snakemake.rule` (src/mmir/workflow/rules/) on this job's inputs/outputs/params.
from mmir.workflow.rules import run_snakemake_job

run_snakemake_job(snakemake)  # noqa: F821 (injected by Snakemake)
