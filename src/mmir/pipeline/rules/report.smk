# report: the paper-style table per task (intervals, tests against the baseline); track: MLflow parent + child runs for
# this invocation; reproduction: the expected scores (expected/*.yaml) checked against every table of this run;
# report_html: every table of the config on one self-contained HTML page with the lineage of its numbers, and LaTeX.


rule report:
    input:
        unpack(spec_input("report")),
    output:
        **spec_output("report"),
    log:
        "logs/report/{task}.log",
    benchmark:
        "benchmarks/report/{task}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("report"),
    script:
        "../scripts/step.py"


rule track:
    input:
        unpack(spec_input("track")),
    output:
        **spec_output("track"),
    log:
        "logs/track/{task}.log",
    benchmark:
        "benchmarks/track/{task}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        slice=spec_params("track"),
    script:
        "../scripts/step.py"


rule reproduction:
    input:
        unpack(spec_input("reproduction")),
    output:
        **spec_output("reproduction"),
    log:
        "logs/reproduction.log",
    benchmark:
        "benchmarks/reproduction.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("reproduction"),
    script:
        "../scripts/step.py"


rule report_html:
    input:
        unpack(spec_input("report_html")),
    output:
        **spec_output("report_html"),
    log:
        "logs/report_html.log",
    benchmark:
        "benchmarks/report_html.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        slice=spec_params("report_html"),
    script:
        "../scripts/step.py"
