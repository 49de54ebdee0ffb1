from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.rag_report(snakemake.params.config, list(snakemake.input), snakemake.output.md, snakemake.output.csv,
                 snakemake.output.tracking)
