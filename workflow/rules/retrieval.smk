# retrieve: one system over one prepared domain for one task -> TREC run (top-k, protocol applied).


rule retrieve:
    input:
        unpack(spec_input("retrieve")),
    output:
        **spec_output("retrieve"),
    log:
        "logs/retrieve/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/retrieve/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 2
    resources:
        # encoder systems: cluster profiles route them to GPU nodes
        gpu=lambda w: 0 if system_kind(w) == "bm25" else 1,
        mem_mb=lambda w: 4000 if system_kind(w) == "bm25" else 8000,
    params:
        slice=spec_params("retrieve"),
    script:
        "../scripts/step.py"
