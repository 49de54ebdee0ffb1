# The quality audit of MM-BRIGHT section 3 (Appendix F): an LLM judge rates each query with its positive documents
# on Readability, Clarity, Evidence usefulness and Evidence sufficiency (1-5), per domain; then the table.


rule audit:
    input:
        unpack(spec_input("audit")),
    output:
        **spec_output("audit"),
    log:
        "logs/audit/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/audit/{dataset}/{domain}.tsv"
    threads: spec_threads("audit")
    resources:
        **spec_resources("audit"),
        # a local model uses every core: one LLM job at a time
        llm=1,
    params:
        slice=spec_params("audit"),
    script:
        "../scripts/step.py"


rule audit_report:
    input:
        unpack(spec_input("audit_report")),
    output:
        **spec_output("audit_report"),
    log:
        "logs/audit_report.log",
    benchmark:
        "benchmarks/audit_report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("audit_report"),
    script:
        "../scripts/step.py"
