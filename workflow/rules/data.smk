# fetch (hub datasets only) and prepare: normalise each domain and check its integrity.


def raw_inputs(wildcards):
    """What prepare reads: the fetch marker (hf), the domain's parquet files (local), the TREC files."""
    ds = config["datasets"][wildcards.dataset]
    if ds["source"] == "hf":
        return [paths.FETCHED.format(dataset=wildcards.dataset, domain=wildcards.domain)]
    from mmir.config import resolve_path

    root = resolve_path(ds["root"])
    if ds["source"] == "trec":
        return [str(root / ds[k]) for k in ("corpus", "topics", "qrels")]
    files = [str(f) for c in ("documents", "examples") for f in domain_files(root, c, wildcards.domain)]
    if not files:
        raise WorkflowError(f"dataset {wildcards.dataset}: no documents/examples parquet for domain "
                            f"{wildcards.domain} under {root}")
    return files


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
        ds=lambda w: config["datasets"][w.dataset],
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
        cache=config["paths"]["caption_cache"] + "/{captioner}.sqlite",
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
