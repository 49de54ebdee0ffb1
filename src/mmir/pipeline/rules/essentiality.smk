# Image essentiality and image types (MM-BRIGHT section 3.3-3.4, Figures 3, 4, 6, Appendix Tables 16-23): labels per
# domain (classifier through the generation cache, or a labels file), then the distributions and scores by class.


rule essentiality:
    input:
        unpack(spec_input("essentiality")),
    output:
        **spec_output("essentiality"),
    log:
        "logs/essentiality/{dataset}/{domain}.log",
    benchmark:
        "benchmarks/essentiality/{dataset}/{domain}.tsv"
    threads: spec_threads("essentiality")
    resources:
        **spec_resources("essentiality"),
        # a local model uses every core: one LLM job at a time
        llm=1,
    params:
        slice=spec_params("essentiality"),
    script:
        "../scripts/step.py"


rule essentiality_report:
    input:
        unpack(spec_input("essentiality_report")),
    output:
        **spec_output("essentiality_report"),
    log:
        "logs/essentiality_report.log",
    benchmark:
        "benchmarks/essentiality_report.tsv"
    threads: 1
    resources:
        mem_mb=2000,
    params:
        slice=spec_params("essentiality_report"),
    script:
        "../scripts/step.py"
