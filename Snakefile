# mmir workflow: `snakemake --cores all` builds every table named in params.yaml.
# The config is validated (defaults filled) before any job starts; rules live in workflow/rules/.

configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/retrieval.smk"
include: "workflow/rules/generation.smk"
include: "workflow/rules/evaluation.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/rag.smk"
include: "workflow/rules/m2rag.smk"
include: "workflow/rules/mmdr.smk"


rule all:
    input:
        expand(paths.TABLE_MD, task=config["tasks"]),
        expand(paths.TRACKING, task=config["tasks"]),
        expand(paths.ABLATION_MD, grid=GRIDS),
        expand(paths.TRACKING, task=[f"{g}_ablation" for g in GRIDS]),
        [paths.RAG_TABLE_MD] if RAG_UNITS else [],
        [paths.M2RAG_TABLE_MD] if M2RAG_UNITS else [],
        [paths.MMDR_TABLE_MD] if MMDR_UNITS else [],
    default_target: True
