# rerank: the top depth of one first-stage run (one task, dataset, domain) reordered by a reranker -> the run of
# <system>+rr:<reranker>, scored, tabulated and tracked like any system.


rule rerank:
    input:
        unpack(spec_input("rerank")),
    output:
        **spec_output("rerank"),
    log:
        "logs/rerank/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/rerank/{task}/{dataset}/{system}/{domain}.tsv"
    wildcard_constraints:
        system=alternation(RERANKED),
    threads: spec_threads("rerank")
    resources:
        **spec_resources("rerank"),
    params:
        slice=spec_params("rerank"),
    script:
        "../scripts/step.py"
