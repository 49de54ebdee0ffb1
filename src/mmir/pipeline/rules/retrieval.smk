# encode: one shard of one kind (documents, pair texts, images, queries) of a vector system, resumable; retrieve: one system over one prepared domain for one task -> TREC run (top-k, protocol applied).


rule encode:
    input:
        unpack(spec_input("encode")),
    output:
        **spec_output("encode"),
    log:
        "logs/encode/{dataset}/{domain}/{system}/{kind}/{shard}.log",
    benchmark:
        "benchmarks/encode/{dataset}/{domain}/{system}/{kind}/{shard}.tsv"
    threads: spec_threads("encode")
    resources:
        **spec_resources("encode"),
    params:
        slice=spec_params("encode"),
    script:
        "../scripts/step.py"


rule retrieve:
    input:
        unpack(spec_input("retrieve")),
    output:
        **spec_output("retrieve"),
    log:
        "logs/retrieve/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/retrieve/{task}/{dataset}/{system}/{domain}.tsv"
    wildcard_constraints:
        system=FIRST_STAGE,
    threads: spec_threads("retrieve")
    resources:
        **spec_resources("retrieve"),
    params:
        slice=spec_params("retrieve"),
    script:
        "../scripts/step.py"
