# RAG QA with an LLM judge (MM-BRIGHT section 5, Table 7): per (dataset, domain, setting), then the table.


rule rag:
    input:
        unpack(spec_input("rag")),
    output:
        **spec_output("rag"),
    log:
        "logs/rag/{dataset}/{domain}/{slug}.log",
    benchmark:
        "benchmarks/rag/{dataset}/{domain}/{slug}.tsv"
    threads: spec_threads("rag")
    resources:
        **spec_resources("rag"),
        llm=1,
    params:
        slice=spec_params("rag"),
    script:
        "../scripts/step.py"


rule rag_report:
    input:
        unpack(spec_input("rag_report")),
    output:
        **spec_output("rag_report"),
    log:
        "logs/rag_report.log",
    benchmark:
        "benchmarks/rag_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("rag_report"),
    script:
        "../scripts/step.py"
