from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.fetch(snakemake.wildcards.dataset, snakemake.params.ds, snakemake.wildcards.domain, snakemake.output[0])
