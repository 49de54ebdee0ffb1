# mteb_export: after scoring, the MTEB result files of every (system, task) (results/mteb/results/<model>/<revision>/
# <task name>.json, the layout mteb's loaders read) and their manifest.


rule mteb_export:
    input:
        unpack(spec_input("mteb_export")),
    output:
        **spec_output("mteb_export"),
    log:
        "logs/mteb_export.log",
    benchmark:
        "benchmarks/mteb_export.tsv"
    threads: 1
    resources:
        mem_mb=1000,
    params:
        slice=spec_params("mteb_export"),
    script:
        "../scripts/step.py"
