from mmir.core import logs
from mmir.workflow import mmdr as pipeline

logs.setup(snakemake.log[0])
w = snakemake.wildcards
pipeline.score_step(w.dataset, w.domain, snakemake.params.prepared_dir, snakemake.input.tasks, snakemake.input.reports,
                    snakemake.params.mmdr, snakemake.params.judge, snakemake.params.cache, snakemake.output[0],
                    snakemake.input.get("captions"))
