# retrieve: one system over one prepared domain -> TREC run (top-k, protocol applied).


rule retrieve:
    input:
        corpus=f"{paths.PREPARED}/corpus.parquet",
        topics=f"{paths.PREPARED}/topics.parquet",
        excluded=f"{paths.PREPARED}/excluded.tsv",
    output:
        run=paths.RUN,
        stats=paths.RUN_STATS,
    params:
        system=lambda w: config["systems"][w.system],
        evaluation=lambda w: config["evaluation"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
        cache_root=config["paths"]["embedding_cache"],
    log:
        "logs/retrieve/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/retrieve/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 2
    resources:
        # dense systems encode: cluster profiles route them to GPU nodes
        gpu=lambda w: 1 if dense(w.system) else 0,
        mem_mb=lambda w: 8000 if dense(w.system) else 4000,
    script:
        "../scripts/retrieve.py"
