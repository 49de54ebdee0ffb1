from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.report(snakemake.wildcards.task, list(snakemake.input), snakemake.params.measure, snakemake.params.protocol,
             snakemake.output.md, snakemake.output.csv, snakemake.output.metrics, snakemake.params.untrained)
