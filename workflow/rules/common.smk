# Validation, targets and helpers shared by every rule file.
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))  # run from a checkout without installing

from mmir.core import paths
from mmir.data.domains import dataset_domains, has_query_images
from mmir.workflow.units import ablation_systems, ablation_units, config_slice, m2rag_units, mmdr_units, rag_units, task_units
from mmir.workflow.validate import validate_config
from mmir.data.parquet import domain_files
from mmir.data.prepare import ALL_FILES as ALL_PREPARED_FILES

# raises ConfigError naming the bad key; no job has started
validate_config(config, "config (params.yaml + any --configfile/--config overlay)")

DERIVED = ablation_systems(config)  # "<system>+cap:<captioner>", "<system>+ref:<reformulator>"
DOMAINS = {name: dataset_domains(name, ds) for name, ds in config["datasets"].items()}
UNITS = [(ds, dom) for ds, doms in DOMAINS.items() for dom in doms]


wildcard_constraints:
    dataset="|".join(map(re.escape, config["datasets"])) if config["datasets"] else "x",
    system="|".join(map(re.escape, sorted([*config["systems"], *DERIVED], key=len, reverse=True))),
    variant=r"(cap|ref)-[A-Za-z0-9][A-Za-z0-9_.-]*",
    grid="caption|reformulation",
    source=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    slug=r"none|oracle|topk-[A-Za-z0-9][A-Za-z0-9_.+:-]*",
    task="task[1-4]|ablation",
    domain=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    captioner="|".join(map(re.escape, config["captioners"])),


TASK_UNITS = {t: task_units(config, t) for t in config["tasks"]}
# what MLflow logging reads of the config (the params of the tracked units come from it)
TRACKED_KEYS = ("datasets", "systems", "measures", "evaluation", "mlflow", "captioners", "generators",
                "reformulators", "ablations")
RAG_UNITS = {(u["dataset"], u["domain"], u["slug"]): u for u in rag_units(config)}
M2RAG_UNITS = m2rag_units(config)
MMDR_UNITS = mmdr_units(config)


def all_units(task):
    """{dataset, domain, system} of every unit of a task (Tasks 2-4: multimodal domains only)."""
    return TASK_UNITS[task]


def system_config(system):
    """The retriever config of a system; an ablation system uses its base system's."""
    return config["systems"][DERIVED[system]["base"] if system in DERIVED else system]


def mm_system(system):
    return system_config(system)["kind"] == "mm"


GRIDS = [g for g in ("caption", "reformulation") if any(d["grid"] == g for d in DERIVED.values())]


onstart:
    # Before any job runs (never in a dry run): a hub dataset still to be fetched needs the hub. Offline,
    # stop now with one message on how to use a local copy instead of failing job by job.
    from mmir.data.hub import check_reachable

    for name, ds in config["datasets"].items():
        if ds["source"] == "hf" and not all(
            Path(paths.FETCHED.format(dataset=name, domain=d)).exists() for d in DOMAINS[name]
        ):
            try:
                check_reachable(ds["repo_id"], ds["revision"])
            except Exception as exc:
                raise WorkflowError(f"dataset {name}: {exc}")


# ---- input functions of the rule files (snakemake --lint wants them here) ----


def raw_inputs(wildcards):
    """What prepare reads: the fetch marker (hf), the domain's parquet files (local), the TREC files."""
    ds = config["datasets"][wildcards.dataset]
    if ds["source"] == "hf":
        return [paths.FETCHED.format(dataset=wildcards.dataset, domain=wildcards.domain)]
    from mmir.core.paths import resolve_path

    root = resolve_path(ds["root"])
    if ds["source"] == "trec":
        return [str(root / ds[k]) for k in ("corpus", "topics", "qrels")]
    files = [str(f) for c in ("documents", "examples") for f in domain_files(root, c, wildcards.domain)]
    if not files:
        raise WorkflowError(f"dataset {wildcards.dataset}: no documents/examples parquet for domain "
                            f"{wildcards.domain} under {root}")
    return files


def retrieve_inputs(w):
    """Prepared files the task reads, plus the image text for a text system on Tasks 2-4."""
    names = {
        "task1": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
        "ablation": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
        "task2": ["corpus.parquet", "topics_mm.parquet", "query_images.parquet", "excluded.task2.tsv"],
        "task3": ["topics_mm.parquet", "images.parquet", "query_images.parquet"],
        "task4": ["corpus.parquet", "topics_mm.parquet", "images.parquet", "query_images.parquet",
                  "pairs.parquet", "excluded.task4.tsv", "excluded.task4.always.tsv"],
    }[w.task]
    files = {n.replace(".", "_"): paths.prepared(w.dataset, w.domain, n) for n in names}
    if w.task not in ("task1", "ablation") and not mm_system(w.system):
        files["captions"] = paths.CAPTIONS.format(dataset=w.dataset, domain=w.domain,
                                                  captioner=config["evaluation"]["image_text"])
    if w.system in DERIVED:
        files["queries"] = paths.QUERIES.format(dataset=w.dataset, domain=w.domain, variant=DERIVED[w.system]["variant"])
    return files


def ablation_metric_files(w):
    """Task 1 metrics of the grid's base systems and of their variants."""
    return [paths.METRICS.format(**u) for u in ablation_units(config, w.grid)]


def task_metric_files(wildcards):
    return [paths.METRICS.format(task=wildcards.task, **u) for u in all_units(wildcards.task)]


def rag_inputs(w):
    u = RAG_UNITS[(w.dataset, w.domain, w.slug)]
    files = {"topics": paths.prepared(w.dataset, w.domain, "topics.parquet"),
             "qrels": paths.prepared(w.dataset, w.domain, "qrels.task1.txt"),
             "images": paths.prepared(w.dataset, w.domain, "images.parquet")}
    if u["setting"].startswith("topk:"):
        files["run"] = paths.RUN.format(task=config["rag"]["task"], dataset=w.dataset, domain=w.domain,
                                        system=u["setting"][5:])
    if has_query_images(config["datasets"][w.dataset], w.domain):
        files["captions"] = paths.CAPTIONS.format(dataset=w.dataset, domain=w.domain,
                                                  captioner=config["evaluation"]["image_text"])
    return files


def m2rag_kb_inputs(w):
    """What a knowledge base reads: the source system's run and the prepared domain (or the dev set)."""
    from mmir.workflow.m2rag import kb_inputs

    return kb_inputs(config, w.dataset, w.domain, w.source)


def mmdr_reports_inputs(w):
    """What the MMDR baseline reads: its tasks, the prepared domain, the retrieval run and the image text."""
    from mmir.workflow.mmdr import captions_file, run_file

    files = {"tasks": paths.MMDR_TASKS.format(dataset=w.dataset, domain=w.domain),
             "run": run_file(config, w.dataset, w.domain),
             "corpus": paths.prepared(w.dataset, w.domain, "corpus.parquet"),
             "images": paths.prepared(w.dataset, w.domain, "images.parquet"),
             "query_images": paths.prepared(w.dataset, w.domain, "query_images.parquet")}
    if has_query_images(config["datasets"][w.dataset], w.domain):
        files["captions"] = captions_file(config, w.dataset, w.domain)
    return files


def mmdr_score_inputs(w):
    """What MMDR scoring reads: the tasks, the reports, the prepared domain (cited documents) and the image text."""
    files = {k: v for k, v in mmdr_reports_inputs(w).items() if k != "run"}
    files["reports"] = paths.MMDR_REPORTS.format(dataset=w.dataset, domain=w.domain)
    return files
