# score: pytrec_eval measures per query and their domain means.


rule score:
    input:
        unpack(spec_input("score")),
    output:
        **spec_output("score"),
    log:
        "logs/score/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/score/{task}/{dataset}/{system}/{domain}.tsv"
    threads: spec_threads("score")
    resources:
        **spec_resources("score"),
    params:
        slice=spec_params("score"),
    script:
        "../scripts/step.py"
