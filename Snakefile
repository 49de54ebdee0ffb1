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
include: "workflow/rules/essentiality.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/rerank.smk"
include: "workflow/rules/mteb.smk"


wildcard_constraints:
    dataset="|".join(map(re.escape, config["datasets"])) if config["datasets"] else "x",
    system="|".join(map(re.escape, sorted([*config["systems"], *DERIVED, *RERANKED], key=len, reverse=True))),
    variant=r"(cap|ref)-[A-Za-z0-9][A-Za-z0-9_.-]*",
    grid="caption|reformulation|reasoning",
    source=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    slug=r"none|oracle|topk-[A-Za-z0-9][A-Za-z0-9_.+:-]*",
    task="|".join(map(re.escape, TASKS)),
    domain=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    captioner="|".join(map(re.escape, config["captioners"])),
    kind="documents|pairs|images|queries|mm_queries|query_texts|query_images|query_stacks|query_image_sets",
    shard=r"\d{5}",


onstart:
    # Before any job runs (never in a dry run): a hub dataset still to be fetched needs the hub. Offline,
    # stop now with one message on how to use a local copy instead of failing job by job.
    from mmir.data.domains import fetched
    from mmir.data.hub import check_reachable

    for name, ds in config["datasets"].items():
        if fetched(ds) and not all(Path(paths.FETCHED.format(dataset=name, domain=d)).exists() for d in DOMAINS[name]):
            try:
                check_reachable(ds["repo_id"], ds["revision"], ds["source"])
            except Exception as exc:
                raise WorkflowError(f"dataset {name}: {exc}")


rule all:
    default_target: True
    input:
        all_targets(config),
