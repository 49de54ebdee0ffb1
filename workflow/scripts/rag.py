from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
w = snakemake.wildcards
steps.rag(w.dataset, w.domain, snakemake.params.setting, snakemake.params.prepared_dir, snakemake.params.rag,
          snakemake.params.generator, snakemake.params.judge, snakemake.params.cache, snakemake.params.out_dir,
          snakemake.input.get("run"), snakemake.input.get("captions"))
