from mmir.core import logs
from mmir.workflow import m2rag as pipeline

logs.setup(snakemake.log[0])
w, p = snakemake.wildcards, snakemake.params
pipeline.answer_step(w.dataset, w.domain, w.source, w.strategy, snakemake.input.kb, p.m2rag, p.generator, p.judge,
                     p.cache, p.out_dir, None if w.source == "devset" else snakemake.input.images, p.encoder)
