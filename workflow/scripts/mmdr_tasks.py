from mmir.core import logs
from mmir.workflow import mmdr as pipeline

logs.setup(snakemake.log[0])
w = snakemake.wildcards
pipeline.tasks_step(w.dataset, w.domain, snakemake.params.prepared_dir, snakemake.params.mmdr, snakemake.output[0])
