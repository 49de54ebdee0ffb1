from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.track(snakemake.params.config, "task1", snakemake.params.units, snakemake.output[0],
            run_name=f"{snakemake.wildcards.grid}_ablation")
