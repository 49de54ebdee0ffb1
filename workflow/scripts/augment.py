from mmir import logs, steps

logs.setup(snakemake.log[0])
steps.augment(snakemake.input.topics, snakemake.input.captions, snakemake.output[0])
