# fetch (hub datasets only) and prepare: normalise each domain and check its integrity; caption: image text.


rule fetch:
    input:
        unpack(spec_input("fetch")),
    output:
        **spec_output("fetch"),
    log:
        "logs/fetch/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/fetch/{dataset}/{domain}.tsv"
    threads: 1
    resources:
        network=1,
    params:
        slice=spec_params("fetch"),
    script:
        "../scripts/step.py"


rule prepare:
    input:
        unpack(spec_input("prepare")),
    output:
        **spec_output("prepare"),
    log:
        "logs/prepare/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/prepare/{dataset}/{domain}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
    params:
        slice=spec_params("prepare"),
    script:
        "../scripts/step.py"


rule caption:
    input:
        unpack(spec_input("caption")),
    output:
        **spec_output("caption"),
    log:
        "logs/caption/{dataset}/{domain}/{captioner}.log",
    benchmark:
        "benchmarks/caption/{dataset}/{domain}/{captioner}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
    params:
        slice=spec_params("caption"),
    script:
        "../scripts/step.py"
