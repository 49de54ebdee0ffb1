# RAG QA with an LLM judge (MM-BRIGHT section 5, Table 7): per (dataset, domain, setting).


rule rag:
    input:
        unpack(rag_inputs),
    output:
        answers=f"{paths.RAG}/answers.parquet",
        judgments=f"{paths.RAG}/judgments.parquet",
        summary=f"{paths.RAG}/summary.json",
    params:
        rag=lambda w: config["rag"],
        setting=lambda w: RAG_UNITS[(w.dataset, w.domain, w.slug)]["setting"],
        generator=lambda w: config["generators"][config["rag"]["generator"]],
        judge=lambda w: config["generators"][config["rag"]["judge"]],
        cache=config["paths"]["generation_cache"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
        out_dir=lambda w: paths.RAG.format(dataset=w.dataset, domain=w.domain, slug=w.slug),
    log:
        "logs/rag/{dataset}/{domain}/{slug}.log",
    benchmark:
        "benchmarks/rag/{dataset}/{domain}/{slug}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,
    script:
        "../scripts/rag.py"


rule rag_report:
    input:
        [f"{paths.RAG.format(**u)}/summary.json" for u in RAG_UNITS.values()],
    output:
        md=paths.RAG_TABLE_MD,
        csv=paths.RAG_TABLE_CSV,
        tracking=paths.TRACKING.format(task="rag"),
    params:
        config=lambda w: {k: config[k] for k in ("rag", "generators", "mlflow")},
    log:
        "logs/rag_report.log",
    benchmark:
        "benchmarks/rag_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/rag_report.py"
