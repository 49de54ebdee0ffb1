# Ablation queries for Task 1: caption-augmented and LLM-reformulated queries (MM-BRIGHT section 5), BRIGHT's reasoning
# queries; the grid tables.


rule augment:
    input:
        unpack(spec_input("augment")),
    output:
        **spec_output("augment"),
    log:
        "logs/augment/{dataset}/{domain}/{source}.log",
    benchmark:
        "benchmarks/augment/{dataset}/{domain}/{source}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("augment"),
    script:
        "../scripts/step.py"


rule reason_queries:
    input:
        unpack(spec_input("reason_queries")),
    output:
        **spec_output("reason_queries"),
    log:
        "logs/reason_queries/{dataset}/{domain}/{source}.log",
    benchmark:
        "benchmarks/reason_queries/{dataset}/{domain}/{source}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("reason_queries"),
    script:
        "../scripts/step.py"


rule reformulate:
    input:
        unpack(spec_input("reformulate")),
    output:
        **spec_output("reformulate"),
    log:
        "logs/reformulate/{dataset}/{domain}/{source}.log",
    benchmark:
        "benchmarks/reformulate/{dataset}/{domain}/{source}.tsv"
    threads: spec_threads("reformulate")
    resources:
        **spec_resources("reformulate"),
        # a local model uses every core: one LLM job at a time
        llm=1,
    params:
        slice=spec_params("reformulate"),
    script:
        "../scripts/step.py"


rule ablation_report:
    input:
        unpack(spec_input("ablation_report")),
    output:
        **spec_output("ablation_report"),
    log:
        "logs/ablation_report/{grid}.log",
    benchmark:
        "benchmarks/ablation_report/{grid}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("ablation_report"),
    script:
        "../scripts/step.py"


rule track_ablation:
    input:
        unpack(spec_input("track_ablation")),
    output:
        **spec_output("track_ablation"),
    log:
        "logs/track/{grid}_ablation.log",
    benchmark:
        "benchmarks/track/{grid}_ablation.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        slice=spec_params("track_ablation"),
    script:
        "../scripts/step.py"
