from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.reformulate(snakemake.input.topics, snakemake.input.captions, snakemake.params.reformulator,
                  snakemake.params.generator, snakemake.params.cache, snakemake.output.queries, snakemake.output.stats)
