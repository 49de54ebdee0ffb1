# report: the paper-style table per task; track: MLflow parent + child runs for this invocation.


rule report:
    input:
        task_metric_files,
    output:
        md=paths.TABLE_MD,
        csv=paths.TABLE_CSV,
        metrics=paths.TABLE_METRICS,
    params:
        measure=config["evaluation"]["primary_measure"],
        protocol=lambda w: config["evaluation"]["protocol"] + (
            f", task4 labels: {config['evaluation']['task4_protocol']}" if w.task == "task4" else ""),
        untrained=[n for n, s in config["systems"].items() if s.get("random_init")],
    log:
        "logs/report/{task}.log",
    benchmark:
        "benchmarks/report/{task}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/report.py"


rule track:
    input:
        metrics=task_metric_files,
        table=paths.TABLE_MD,
    output:
        paths.TRACKING,
    params:
        config=lambda w: {k: config[k] for k in TRACKED_KEYS},
        units=lambda w: all_units(w.task),
    log:
        "logs/track/{task}.log",
    benchmark:
        "benchmarks/track/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    script:
        "../scripts/track.py"
