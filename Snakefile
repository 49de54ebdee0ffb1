# This repository as one mmir project: the workflow shipped in the package (src/mmir/pipeline) on params.yaml.
# `make run` runs it through `mmir run` (its profile, its kill recovery); plain `snakemake` here works too.


include: "src/mmir/pipeline/Snakefile"


# an include keeps the including file's default target (none here): the packaged workflow's `all` is this one's
workflow.default_target = "all"
