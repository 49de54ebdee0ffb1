from mmir.core import logs
from mmir.workflow import m2rag as pipeline

logs.setup(snakemake.log[0])
pipeline.report_step(snakemake.params.config, list(snakemake.input), snakemake.output.md, snakemake.output.csv,
                     snakemake.output.tracking)
