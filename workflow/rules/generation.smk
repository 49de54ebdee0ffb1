# Ablation queries for Task 1 (MM-BRIGHT section 5): caption-augmented and LLM-reformulated queries.


rule augment:
    input:
        topics=f"{paths.PREPARED}/topics.parquet",
        captions=lambda w: paths.CAPTIONS.format(dataset=w.dataset, domain=w.domain, captioner=w.source),
    output:
        paths.QUERIES.replace("{variant}", "cap-{source}"),
    log:
        "logs/augment/{dataset}/{domain}/{source}.log",
    benchmark:
        "benchmarks/augment/{dataset}/{domain}/{source}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/augment.py"


rule reformulate:
    input:
        topics=f"{paths.PREPARED}/topics.parquet",
        captions=lambda w: paths.CAPTIONS.format(dataset=w.dataset, domain=w.domain,
                                                 captioner=config["reformulators"][w.source]["image_text"]),
    output:
        queries=paths.QUERIES.replace("{variant}", "ref-{source}"),
        stats=paths.QUERIES_STATS.replace("{variant}", "ref-{source}"),
    params:
        reformulator=lambda w: config["reformulators"][w.source],
        generator=lambda w: config["generators"][config["reformulators"][w.source]["generator"]],
        cache=config["paths"]["generation_cache"],
    log:
        "logs/reformulate/{dataset}/{domain}/{source}.log",
    benchmark:
        "benchmarks/reformulate/{dataset}/{domain}/{source}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,  # a local model uses every core: run one reformulation job at a time
    script:
        "../scripts/reformulate.py"


rule ablation_report:
    input:
        ablation_metric_files,
    output:
        md=paths.ABLATION_MD,
        csv=paths.ABLATION_CSV,
        plot=paths.ABLATION_PLOT,
        plot_data=paths.ABLATION_PLOT_DATA,
    params:
        measure=config["evaluation"]["primary_measure"],
        derived=DERIVED,
    log:
        "logs/ablation_report/{grid}.log",
    benchmark:
        "benchmarks/ablation_report/{grid}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/ablation_report.py"


rule track_ablation:
    input:
        metrics=ablation_metric_files,
        table=paths.ABLATION_MD,
    output:
        paths.TRACKING.replace("{task}", "{grid}_ablation"),
    params:
        config=lambda w: {k: config[k] for k in TRACKED_KEYS},
        units=lambda w: ablation_units(config, w.grid),
    log:
        "logs/track/{grid}_ablation.log",
    benchmark:
        "benchmarks/track/{grid}_ablation.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    script:
        "../scripts/track_ablation.py"
