# score: pytrec_eval measures per query and their domain means.


rule score:
    input:
        run=paths.RUN,
        qrels=lambda w: paths.prepared(w.dataset, w.domain, f"qrels.{'task1' if w.task == 'ablation' else w.task}.txt"),
    output:
        metrics=paths.METRICS,
        perquery=paths.PERQUERY,
    params:
        measures=config["measures"],
        binary=lambda w: w.task == "task4" and config["evaluation"]["task4_protocol"] == "official",
    log:
        "logs/score/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/score/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    script:
        "../scripts/score.py"
