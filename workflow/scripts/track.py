from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.track(snakemake.params.config, snakemake.wildcards.task, snakemake.params.units, snakemake.output[0])
