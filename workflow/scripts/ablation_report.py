from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
steps.ablation_report(snakemake.wildcards.grid, list(snakemake.input), snakemake.params.measure, snakemake.params.derived,
                      snakemake.output.md, snakemake.output.csv, snakemake.output.plot, snakemake.output.plot_data)
