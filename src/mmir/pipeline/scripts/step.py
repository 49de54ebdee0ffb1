# Every rule's script: the step of `snakemake.rule` (mmir.workflow.rules) on this job's inputs/outputs/params.
from mmir.workflow.rules import run_snakemake_job

if __name__ == "__main__":  # the OCR pool's spawned workers import this script; only the job's own process runs it
    run_snakemake_job(snakemake)  # noqa: F821 (injected by Snakemake)
