from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.caption(snakemake.params.prepared_dir, snakemake.wildcards.captioner, snakemake.params.captioner,
              snakemake.params.cache, snakemake.output[0], snakemake.params.generator,
              snakemake.params.generation_cache)
