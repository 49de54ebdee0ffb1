from mmir import logs
from mmir.m2rag import pipeline

logs.setup(snakemake.log[0])
pipeline.report_step(snakemake.params.config, list(snakemake.input), snakemake.output.md, snakemake.output.csv,
                     snakemake.output.tracking)
