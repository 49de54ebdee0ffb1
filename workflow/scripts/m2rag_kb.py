from mmir.core import logs
from mmir.workflow import m2rag as pipeline

logs.setup(snakemake.log[0])
w, i, p, o = snakemake.wildcards, snakemake.input, snakemake.params, snakemake.output
if "devset" in i.keys():
    dev = p.m2rag["devset"]
    pipeline.load_dev_set_step(i.devset, dev["image_root"], p.m2rag, o.kb, o.counts, levels=dev["levels"])
else:
    pipeline.build_knowledge_bases_step(w.dataset, w.domain, w.source, p.prepared_dir, i.run, p.m2rag, p.judge, p.cache,
                                        o.kb, o.counts, i.get("captions"), i.get("anchors"))
