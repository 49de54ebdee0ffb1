# fetch (hub datasets only) and prepare: normalise each domain and check its integrity; caption: image text (an OCR
# captioner: gathered from the ocr jobs, one per shard of corpus images and one for the query images).


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


# a checkpoint: where a dataset lets a domain have no scorable query (integrity.no_scorable_queries: warn), the jobs
# after prepare are planned from its prepare.json, so no job runs on such a domain (common.smk, spec_input)
checkpoint prepare:
    input:
        unpack(spec_input("prepare")),
    output:
        **spec_output("prepare"),
    log:
        "logs/prepare/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/prepare/{dataset}/{domain}.tsv"
    threads: spec_threads("prepare")
    resources:
        **spec_resources("prepare"),
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
    threads: spec_threads("caption")
    resources:
        **spec_resources("caption"),
    params:
        slice=spec_params("caption"),
    script:
        "../scripts/step.py"


# first among ready jobs: image text gates every Tasks 2-4 text-route job, the caption ablation, the reformulations and
# the LLM stages (a job of 2 threads still waits until both cores are free at once: params.yaml gives OCR one)
rule ocr:
    input:
        unpack(spec_input("ocr")),
    output:
        **spec_output("ocr"),
    log:
        "logs/ocr/{dataset}/{domain}/{captioner}/{kind}/{shard}.log",
    benchmark:
        "benchmarks/ocr/{dataset}/{domain}/{captioner}/{kind}/{shard}.tsv"
    priority: 10
    threads: spec_threads("ocr")
    resources:
        **spec_resources("ocr"),
    params:
        slice=spec_params("ocr"),
    script:
        "../scripts/step.py"
