from mmir import logs
from mmir.mmdr import pipeline

logs.setup(snakemake.log[0])
w = snakemake.wildcards
pipeline.tasks_step(w.dataset, w.domain, snakemake.params.prepared_dir, snakemake.params.mmdr, snakemake.output[0])
