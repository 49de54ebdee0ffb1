from mmir.core import logs
from mmir.workflow import steps

logs.setup(snakemake.log[0])
w = snakemake.wildcards
steps.score(snakemake.input.run, snakemake.input.qrels, snakemake.params.measures, snakemake.output.metrics,
            snakemake.output.perquery, {"task": w.task, "dataset": w.dataset, "domain": w.domain, "system": w.system},
            snakemake.params.binary)
