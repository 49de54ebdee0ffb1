# fetch (hub datasets only) and prepare: normalise each domain and check its integrity.


rule fetch:
    output:
        paths.FETCHED,
    params:
        ds=lambda w: config["datasets"][w.dataset],
    log:
        "logs/fetch/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/fetch/{dataset}/{domain}.tsv"
    threads: 1
    resources:
        network=1,
    script:
        "../scripts/fetch.py"


rule prepare:
    input:
        raw_inputs,
    output:
        **{f.replace(".", "_"): f"{paths.PREPARED}/{f}" for f in ALL_PREPARED_FILES},
    params:
        # the dataset entry without its domain list: adding or dropping a domain leaves the others done
        ds=lambda w: {k: v for k, v in config["datasets"][w.dataset].items() if k != "domains"},
        out_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    log:
        "logs/prepare/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/prepare/{dataset}/{domain}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
    script:
        "../scripts/prepare.py"


rule caption:
    input:
        images=f"{paths.PREPARED}/images.parquet",
        query_images=f"{paths.PREPARED}/query_images.parquet",
    output:
        paths.CAPTIONS,
    params:
        captioner=lambda w: config["captioners"][w.captioner],
        cache=lambda w: f"{config['paths']['caption_cache']}/{w.captioner}.sqlite",
        generator=lambda w: config["generators"].get(config["captioners"][w.captioner].get("generator", "")),
        generation_cache=config["paths"]["generation_cache"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    log:
        "logs/caption/{dataset}/{domain}/{captioner}.log",
    benchmark:
        "benchmarks/caption/{dataset}/{domain}/{captioner}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
    script:
        "../scripts/caption.py"
