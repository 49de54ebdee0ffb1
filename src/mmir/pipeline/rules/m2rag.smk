# M2RAG (shared/specs/m2rag.md): knowledge bases per (dataset, domain, source), answers + the eight metrics per
# strategy, and the table. The dev set, when configured, is the unit m2rag-bench/dev/devset.


rule m2rag_kb:
    input:
        unpack(spec_input("m2rag_kb")),
    output:
        **spec_output("m2rag_kb"),
    log:
        "logs/m2rag/{dataset}/{domain}/{source}/kb.log",
    benchmark:
        "benchmarks/m2rag/{dataset}/{domain}/{source}/kb.tsv"
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    threads: spec_threads("m2rag_kb")
    resources:
        **spec_resources("m2rag_kb"),
        llm=1,
    params:
        slice=spec_params("m2rag_kb"),
    script:
        "../scripts/step.py"


rule m2rag_answer:
    input:
        unpack(spec_input("m2rag_answer")),
    output:
        **spec_output("m2rag_answer"),
    log:
        "logs/m2rag/{dataset}/{domain}/{source}/{strategy}.log",
    benchmark:
        "benchmarks/m2rag/{dataset}/{domain}/{source}/{strategy}.tsv"
    wildcard_constraints:
        dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        strategy="single_stage|multi_stage|separate",
    threads: spec_threads("m2rag_answer")
    resources:
        **spec_resources("m2rag_answer"),
        llm=1,
    params:
        slice=spec_params("m2rag_answer"),
    script:
        "../scripts/step.py"


rule m2rag_report:
    input:
        unpack(spec_input("m2rag_report")),
    output:
        **spec_output("m2rag_report"),
    log:
        "logs/m2rag_report.log",
    benchmark:
        "benchmarks/m2rag_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("m2rag_report"),
    script:
        "../scripts/step.py"
