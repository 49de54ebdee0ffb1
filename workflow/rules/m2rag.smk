# M2RAG (shared/specs/m2rag.md): knowledge bases per (dataset, domain, source), answers + the eight metrics per
# strategy, and the table. The dev set, when configured, is the unit m2rag-bench/dev/devset.


rule m2rag_kb:
    input:
        unpack(m2rag_kb_inputs),
    output:
        kb=f"{paths.M2RAG_KB}/kb.jsonl",
        counts=f"{paths.M2RAG_KB}/kb.json",
    params:
        m2rag=lambda w: config["m2rag"],
        judge=lambda w: config["generators"][config["m2rag"]["judge"]],
        cache=config["paths"]["generation_cache"],
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    log:
        "logs/m2rag/{dataset}/{domain}/{source}/kb.log",
    benchmark:
        "benchmarks/m2rag/{dataset}/{domain}/{source}/kb.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,
    script:
        "../scripts/m2rag_kb.py"


rule m2rag_answer:
    input:
        kb=f"{paths.M2RAG_KB}/kb.jsonl",
        images=lambda w: [] if w.source == "devset" else paths.prepared(w.dataset, w.domain, "images.parquet"),
    output:
        answers=f"{paths.M2RAG}/answers.jsonl",
        evaluations=f"{paths.M2RAG}/evaluations.jsonl",
        summary=f"{paths.M2RAG}/summary.json",
    params:
        m2rag=lambda w: config["m2rag"],
        generator=lambda w: config["generators"][config["m2rag"]["generator"]],
        judge=lambda w: config["generators"][config["m2rag"]["judge"]],
        encoder=lambda w: config["systems"].get(config["m2rag"]["separate_encoder"] or "") if w.strategy == "separate" else None,
        cache=config["paths"]["generation_cache"],
        out_dir=lambda w: paths.M2RAG.format(**w),
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        strategy="single_stage|multi_stage|separate",
    log:
        "logs/m2rag/{dataset}/{domain}/{source}/{strategy}.log",
    benchmark:
        "benchmarks/m2rag/{dataset}/{domain}/{source}/{strategy}.tsv"
    threads: 2
    resources:
        mem_mb=4000,
        llm=1,
    script:
        "../scripts/m2rag_answer.py"


rule m2rag_report:
    input:
        [f"{paths.M2RAG.format(**u)}/summary.json" for u in M2RAG_UNITS],
    output:
        md=paths.M2RAG_TABLE_MD,
        csv=paths.M2RAG_TABLE_CSV,
        tracking=paths.TRACKING.format(task="m2rag"),
    params:
        config=lambda w: {k: config[k] for k in ("m2rag", "generators", "mlflow")},
    log:
        "logs/m2rag_report.log",
    benchmark:
        "benchmarks/m2rag_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    script:
        "../scripts/m2rag_report.py"
