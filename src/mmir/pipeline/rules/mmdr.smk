# MMDeepResearch-Bench (shared/specs/mmdr-bench.md): per (dataset, domain) the tasks, the baseline's cited reports over
# a retrieval run and the scored run (every judge call audited); then the leaderboard export, the table and MLflow.


rule mmdr_tasks:
    input:
        unpack(spec_input("mmdr_tasks")),
    output:
        **spec_output("mmdr_tasks"),
    log:
        "logs/mmdr/{dataset}/{domain}/tasks.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/tasks.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        slice=spec_params("mmdr_tasks"),
    script:
        "../scripts/step.py"


rule mmdr_reports:
    input:
        unpack(spec_input("mmdr_reports")),
    output:
        **spec_output("mmdr_reports"),
    log:
        "logs/mmdr/{dataset}/{domain}/reports.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/reports.tsv"
    threads: spec_threads("mmdr_reports")
    resources:
        **spec_resources("mmdr_reports"),
        llm=1,
    params:
        slice=spec_params("mmdr_reports"),
    script:
        "../scripts/step.py"


rule mmdr_score:
    input:
        unpack(spec_input("mmdr_score")),
    output:
        **spec_output("mmdr_score"),
    log:
        "logs/mmdr/{dataset}/{domain}/score.log",
    benchmark:
        "benchmarks/mmdr/{dataset}/{domain}/score.tsv"
    threads: spec_threads("mmdr_score")
    resources:
        **spec_resources("mmdr_score"),
        llm=1,
    params:
        slice=spec_params("mmdr_score"),
    script:
        "../scripts/step.py"


rule mmdr_report:
    input:
        unpack(spec_input("mmdr_report")),
    output:
        **spec_output("mmdr_report"),
    log:
        "logs/mmdr_report.log",
    benchmark:
        "benchmarks/mmdr_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("mmdr_report"),
    script:
        "../scripts/step.py"
