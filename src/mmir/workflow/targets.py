"""The final files of each stage family, from the unit lists: what ``rule all`` builds, and what each DVC stage
asks Snakemake for (``python -m mmir snakemake <family>``).

Families: ``prepare`` (per dataset), ``captions``, ``task`` (per task: runs, metrics, table, MLflow),
``ablations``, ``rag``, ``m2rag``, ``mmdr``, ``essentiality`` (image essentiality and types, scores by class), ``audit``
(the quality audit of queries and their positive documents),
``reproduction`` (expected scores vs this run's tables), ``mteb`` (the MTEB result files of every (system, task)),
``report`` (the HTML page of every table, its lineage and
the LaTeX export: last, it reads every other family's tables), ``caches`` (no job: the DVC record of what the others
leave outside their outputs, the vector stores and the embedding, caption and generation caches, so that ``dvc push``
and ``dvc pull`` carry them; docs: Experiments).
"""

from __future__ import annotations

import json
from pathlib import Path

from mmir.config.models import Params
from mmir.core import paths
from mmir.core.tasks import task as task_spec
from mmir.data.domains import has_multimodal, has_query_images
from mmir.workflow import units as U

FAMILIES = ("prepare", "captions", "task", "ablations", "rag", "m2rag", "mmdr", "essentiality", "audit", "reproduction",
            "mteb", "report", "caches")

#: What DVC tracks of each family (dvc.yaml's outs, metrics and plots; a test keeps the two equal). ``{dataset}`` /
#: ``{task}`` are the family's foreach key, ``{embedding_cache}`` etc. the config's ``paths``. When a config has no unit
#: of a family these are still created (empty folders, a one-line note in each file, an empty SQLite file), because DVC
#: requires every declared output.
FAMILY_OUTPUTS = {
    "prepare": ["data/prepared/{dataset}"],
    "captions": ["results/captions"],
    "task": ["results/runs/{task}", "results/metrics/{task}", "results/tables/{task}.md", "results/tables/{task}.csv",
             "results/tracking/{task}.json", "results/tables/{task}.metrics.json", "results/tables/{task}.significance.json",
             "results/plots/{task}_forest.svg", "metrics/{task}.json", "metrics/{task}_forest.csv"],
    "ablations": ["results/queries", "results/runs/ablation", "results/metrics/ablation",
                  *(f"results/tables/{g}_ablation.{x}" for g in ("caption", "reformulation") for x in ("md", "csv")),
                  *(f"results/tracking/{g}_ablation.json" for g in ("caption", "reformulation")),
                  *(f"results/plots/{g}_ablation.{x}" for g in ("caption", "reformulation") for x in ("csv", "png"))],
    "rag": ["results/rag", "results/tables/rag.md", "results/tables/rag.csv", "results/tracking/rag.json"],
    "m2rag": ["results/m2rag", "results/tables/m2rag.md", "results/tables/m2rag.csv", "results/tracking/m2rag.json"],
    "mmdr": ["results/mmdr", "results/tables/mmdr", "results/tables/mmdr.md", "results/tables/mmdr.csv",
             "results/tracking/mmdr.json"],
    "essentiality": ["results/essentiality", "results/tables/essentiality.md", "results/tables/essentiality.csv",
                     "results/tracking/essentiality.json", "results/plots/essentiality.csv", "results/plots/essentiality.png"],
    "audit": ["results/audit", "results/tables/audit.md", "results/tables/audit.csv", "results/tracking/audit.json"],
    "reproduction": ["results/tables/reproduction.md", "results/tables/reproduction.csv", "results/tracking/reproduction.json"],
    "mteb": ["results/mteb"],
    # the page, its lineage, the all-tables LaTeX document and the per-table results/report/tables/<name>.tex (they vary
    # with the config: DVC tracks the folder, Snakemake each file)
    "report": ["results/report", "results/tracking/report.json"],
    # written by the jobs of every other family (content-addressed or keyed: a pulled cache only saves work), and
    # Snakemake's records of every job (params, code, end time; mmir.workflow.experiments)
    "caches": ["results/vectors", "{embedding_cache}", "{caption_cache}", "{generation_cache}", "results/cache/thumbnails",
               ".snakemake/metadata"],
}


def ensure_outputs(family: str, *, dataset: str | None = None, task: str | None = None,
                   config: dict | Params | None = None) -> list[str]:
    """Create the family's :data:`FAMILY_OUTPUTS` that do not exist (folders empty, files a note saying the config
    has no unit of this family; the ``paths`` of ``config``, default: their defaults). Returns the paths created."""
    from mmir.config.models import PathsConfig, fill
    from mmir.core.io import write_bytes, write_text

    note = f"stage family {family}: no unit in this config, nothing computed"
    cache_paths = fill(U.typed(config).paths) if config is not None else fill(PathsConfig())
    made = []
    for pattern in FAMILY_OUTPUTS[family]:
        path = Path(pattern.format(dataset=dataset, task=task, **cache_paths))
        if path.exists():
            continue
        if path.suffix == ".sqlite":  # an empty file is an empty SQLite database
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(path, b"")
        elif path.suffix == "":
            path.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".png":
            write_bytes(path, _blank_png())
        elif path.suffix == ".svg":  # a figure the report embeds: a valid SVG that says so
            write_text(path, '<svg xmlns="http://www.w3.org/2000/svg" width="600" height="30"><text x="5" y="20">'
                       f"{note}</text></svg>\n")
        elif path.suffix == ".json":
            write_text(path, json.dumps({"note": note}) + "\n")
        else:
            write_text(path, ("note\n" if path.suffix == ".csv" else "") + note + "\n")
        made.append(str(path))
    return made


def _blank_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1, 1), "white").save(buf, format="PNG")
    return buf.getvalue()


def grids(config: dict | Params) -> list[str]:
    """The ablation grids with at least one derived system."""
    derived = U.ablation_systems(config).values()
    return [g for g in ("caption", "reformulation", "reasoning") if any(d["grid"] == g for d in derived)]


def used_captioners(config: dict | Params) -> list[str]:
    """Captioners some rule reads: the image text of text systems on Tasks 2-4 and of the RAG/MMDR stages
    (``evaluation.image_text``), the caption grid, the reformulators' image text, M2RAG's."""
    p = U.typed(config)
    out = []
    text_systems = any(s.kind not in ("mm", "run") for s in p.systems.values())  # an external run reads no image text
    if ((text_systems and any(task_spec(t).multimodal for t in p.tasks)) or U.rag_units(p) or U.mmdr_units(p)
            or (U.essentiality_units(p) and not p.essentiality.labels)):
        out.append(p.evaluation.image_text)
    ab = p.ablations
    if ab.caption.systems:
        out += ab.caption.captioners
    if ab.reformulation.systems:
        out += [p.reformulators[r].image_text for r in ab.reformulation.reformulators]
    if p.m2rag and p.m2rag.enabled and p.m2rag.image_text:
        out.append(p.m2rag.image_text)
    return [c for c in dict.fromkeys(out) if c in p.captioners]


def family_targets(config: dict | Params, family: str, *, dataset: str | None = None, task: str | None = None) -> list[str]:
    """The files that make ``family`` complete (``dataset`` narrows ``prepare``, ``task`` narrows ``task``).

    Raises:
        ValueError: an unknown family.
    """
    config = U.typed(config)
    if family == "prepare":
        return [paths.prepared(d, dom, "prepare.json") for d, dom in U.units(config) if dataset in (None, d)]
    if family == "captions":
        caps = used_captioners(config)
        return [paths.CAPTIONS.format(dataset=d, domain=dom, captioner=c) for d, dom in U.units(config)
                if has_multimodal(config.datasets[d], dom) or has_query_images(config.datasets[d], dom)
                for c in caps]
    if family == "task":
        tasks = [t for t in U.table_tasks(config) if task in (None, t)]  # a task with no unit makes no table
        return [p.format(task=t) for t in tasks for p in (paths.TABLE_MD, paths.TABLE_CSV, paths.TABLE_METRICS,
                                                          paths.TABLE_SIGNIFICANCE, paths.TABLE_FOREST, paths.TRACKING)]
    if family == "ablations":
        return [p.format(grid=g) for g in grids(config) for p in (paths.ABLATION_MD, paths.ABLATION_CSV,
                                                                   paths.ABLATION_PLOT, paths.ABLATION_PLOT_DATA)] + \
               [paths.TRACKING.format(task=f"{g}_ablation") for g in grids(config)]
    if family == "rag":
        return [paths.RAG_TABLE_MD, paths.RAG_TABLE_CSV, paths.TRACKING.format(task="rag")] if U.rag_units(config) else []
    if family == "m2rag":
        return [paths.M2RAG_TABLE_MD, paths.M2RAG_TABLE_CSV, paths.TRACKING.format(task="m2rag")] \
            if U.m2rag_units(config) else []
    if family == "reproduction":
        return [paths.REPRODUCTION_MD, paths.REPRODUCTION_CSV, paths.TRACKING.format(task="reproduction")] \
            if config.expected else []
    if family == "essentiality":
        return [paths.ESSENTIALITY_MD, paths.ESSENTIALITY_CSV, paths.ESSENTIALITY_PLOT, paths.ESSENTIALITY_PLOT_DATA,
                paths.TRACKING.format(task="essentiality")] if U.essentiality_units(config) else []
    if family == "audit":
        return [paths.AUDIT_MD, paths.AUDIT_CSV, paths.TRACKING.format(task="audit")] if U.audit_units(config) else []
    if family == "mmdr":
        return [paths.MMDR_TABLE_MD, paths.MMDR_TABLE_CSV, paths.TRACKING.format(task="mmdr")] \
            if U.mmdr_units(config) else []
    if family == "mteb":
        from mmir.config.models import fill
        from mmir.workflow.rules.mteb import export_files

        files = export_files(fill(config))
        return [paths.MTEB_MANIFEST, *files] if files else []
    if family == "caches":  # no job of its own (see FAMILY_OUTPUTS)
        return []
    if family == "report":
        return [paths.REPORT_HTML, paths.REPORT_LINEAGE, paths.REPORT_LATEX, paths.TRACKING.format(task="report"),
                *tex_outputs(config).values()]
    raise ValueError(f"unknown stage family {family!r}; known: {', '.join(FAMILIES)}")


def all_targets(config: dict | Params) -> list[str]:
    """Every table and MLflow record the config asks for, and the report of them all (Snakemake's default target): the
    targets of every family but ``prepare`` and ``captions`` (their files are inputs of the others)."""
    return [t for f in FAMILIES if f not in ("prepare", "captions") for t in family_targets(config, f)]


#: Families whose outputs are not tables (or are the report itself).
NOT_TABLES = ("prepare", "captions", "mteb", "report", "caches")


def report_files(config: dict | Params) -> list[str]:
    """The report's inputs: every table (``.md``, ``.csv``, ``.significance.json``), figure (``.png``) and MLflow
    record (``results/tracking/*.json``) of every stage family the config runs (:func:`family_targets`),
    in family order. A family added to :data:`FAMILIES` is picked up as it is."""
    out = []
    for family in FAMILIES:
        if family in NOT_TABLES:
            continue
        for t in family_targets(config, family):
            p = Path(t)
            if p.parent.as_posix() == "results/tables" and p.name.endswith((".md", ".csv", ".significance.json")) \
                    or p.parent.as_posix() == "results/plots" and p.suffix in (".png", ".svg") \
                    or p.parent.as_posix() == "results/tracking" and p.suffix == ".json":
                out.append(t)
    return list(dict.fromkeys(out))


def tex_outputs(config: dict | Params) -> dict[str, str]:
    """``{output name: results/report/tables/<name>.tex}``, one per markdown table among :func:`report_files`."""
    out = {}
    for f in report_files(config):
        p = Path(f)
        if p.parent.as_posix() == "results/tables" and p.suffix == ".md":
            out["tex_" + "".join(c if c.isalnum() else "_" for c in p.stem)] = paths.TABLE_TEX.format(name=p.stem)
    return out


def stages(config: dict | Params) -> list[str]:
    """The stages this config runs, in workflow order (``mmir validate`` prints them): prepare, captions, encode,
    retrieve, rerank, score, then every stage family with a unit (ablations, rag, m2rag, mmdr, essentiality, audit,
    reproduction, mteb), and report. A stage the config does not name has no unit and is left out."""
    p = U.typed(config)
    out = ["prepare"]
    if family_targets(p, "captions"):
        out.append("captions")
    if any(s.kind not in ("bm25", "run") for s in p.systems.values()):
        out.append("encode")
    out.append("retrieve")
    if U.rerank_systems(p):
        out.append("rerank")
    out.append("score")
    out += [f for f in ("ablations", "rag", "m2rag", "mmdr", "essentiality", "audit", "reproduction", "mteb")
            if family_targets(p, f)]
    return [*out, "report"]
