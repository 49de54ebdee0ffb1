from mmir.core import logs
from mmir.workflow import mmdr as pipeline

logs.setup(snakemake.log[0])
pipeline.report_step(snakemake.params.config, list(snakemake.input.runs), list(snakemake.input.reports),
                     snakemake.output.md, snakemake.output.csv,
                     snakemake.output.export, snakemake.output.tracking)
