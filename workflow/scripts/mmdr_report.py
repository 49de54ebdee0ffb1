from mmir import logs
from mmir.mmdr import pipeline

logs.setup(snakemake.log[0])
pipeline.report_step(snakemake.params.config, list(snakemake.input.runs), list(snakemake.input.reports),
                     snakemake.output.md, snakemake.output.csv,
                     snakemake.output.export, snakemake.output.tracking)
