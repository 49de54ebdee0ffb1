# score: pytrec_eval measures per query and their domain means.


rule score:
    input:
        run=paths.RUN,
        qrels=f"{paths.PREPARED}/qrels.{{task}}.txt",
    output:
        metrics=paths.METRICS,
        perquery=paths.PERQUERY,
    params:
        measures=config["measures"],
    log:
        "logs/score/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/score/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    script:
        "../scripts/score.py"
