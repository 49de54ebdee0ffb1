from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.retrieve(snakemake.wildcards.task, snakemake.params.prepared_dir, snakemake.wildcards.system,
               snakemake.params.system, snakemake.params.evaluation, snakemake.params.cache_root,
               snakemake.output.run, snakemake.output.stats, snakemake.input.get("captions"),
               snakemake.input.get("queries"))
