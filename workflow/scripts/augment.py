from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.augment(snakemake.input.topics, snakemake.input.captions, snakemake.output[0])
