from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
ds = snakemake.params.ds
steps.prepare(snakemake.wildcards.dataset, ds, snakemake.wildcards.domain, snakemake.params.out_dir,
              snakemake.input[0] if ds["source"] == "hf" else None)
