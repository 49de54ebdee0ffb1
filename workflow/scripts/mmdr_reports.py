from mmir.core import logs
from mmir.workflow import mmdr as pipeline

logs.setup(snakemake.log[0])
w = snakemake.wildcards
pipeline.reports_step(w.dataset, w.domain, snakemake.params.prepared_dir, snakemake.input.tasks, snakemake.params.mmdr,
                      snakemake.params.generator, snakemake.params.cache, snakemake.output[0], snakemake.input.run,
                      snakemake.input.get("captions"))
