# MMDeepResearch-Bench (shared/specs/mmdr-bench.md): per (dataset, domain) the tasks (queries with images), the
# baseline's cited reports over a retrieval run, and the scored run (FLAE, TRACE with VEF, MOSAIC; every judge call
# audited); then the leaderboard export, the table and MLflow over all domains.


rule mmdr_tasks:
    input:
        topics=paths.prepared("{dataset}", "{domain}", "topics.parquet"),
        query_images=paths.prepared("{dataset}", "{domain}", "query_images.parquet"),
    output:
        directory(paths.MMDR_TASKS),
    params:
        mmdr=lambda w: {"max_tasks": config["mmdr"]["max_tasks"]},
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    log:
        "logs/mmdr/{dataset}/{domain}/tasks.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/tasks.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    script:
        "../scripts/mmdr_tasks.py"


rule mmdr_reports:
    input:
        unpack(mmdr_reports_inputs),
    output:
        directory(paths.MMDR_REPORTS),
    params:
        mmdr=lambda w: config["mmdr"],
        generator=lambda w: config["generators"][config["mmdr"]["generator"]],
        cache=config["paths"]["generation_cache"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    log:
        "logs/mmdr/{dataset}/{domain}/reports.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/reports.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,
    script:
        "../scripts/mmdr_reports.py"


rule mmdr_score:
    input:
        unpack(mmdr_score_inputs),
    output:
        directory(paths.MMDR_RUN),
    params:
        mmdr=lambda w: config["mmdr"],
        judge=lambda w: config["generators"][config["mmdr"]["judge"]],
        cache=config["paths"]["generation_cache"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    log:
        "logs/mmdr/{dataset}/{domain}/score.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/score.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,
    script:
        "../scripts/mmdr_score.py"


rule mmdr_report:
    input:
        runs=[paths.MMDR_RUN.format(**u) for u in MMDR_UNITS],
        reports=[paths.MMDR_REPORTS.format(**u) for u in MMDR_UNITS],
    output:
        export=directory(paths.MMDR_EXPORT),
        md=paths.MMDR_TABLE_MD,
        csv=paths.MMDR_TABLE_CSV,
        tracking=paths.TRACKING.format(task="mmdr"),
    params:
        config=lambda w: {k: config[k] for k in ("mmdr", "generators", "mlflow")},
    log:
        "logs/mmdr_report.log",
    benchmark:
        "benchmarks/mmdr_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/mmdr_report.py"
