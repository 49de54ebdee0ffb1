# retrieve: one system over one prepared domain for one task -> TREC run (top-k, protocol applied).


rule retrieve:
    input:
        unpack(retrieve_inputs),
    output:
        run=paths.RUN,
        stats=paths.RUN_STATS,
    params:
        system=lambda w: system_config(w.system),
        evaluation={k: config["evaluation"][k] for k in ("protocol", "top_k")},
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
        cache_root=config["paths"]["embedding_cache"],
    log:
        "logs/retrieve/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/retrieve/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 2
    resources:
        # encoder systems: cluster profiles route them to GPU nodes
        gpu=lambda w: 0 if system_config(w.system)["kind"] == "bm25" else 1,
        mem_mb=lambda w: 4000 if system_config(w.system)["kind"] == "bm25" else 8000,
    script:
        "../scripts/retrieve.py"
