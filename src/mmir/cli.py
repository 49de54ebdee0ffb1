"""``mmir``: the command line used by DVC stages (and handy by hand).

Each sub-command runs one step for every domain of a dataset (DVC versions one output directory per
dataset/system), reading the validated params.yaml. Snakemake calls the same :mod:`mmir.workflow.steps` functions
per domain instead.

    mmir validate                       check params.yaml, print the resolved units
    mmir prepare  --dataset D
    mmir caption  --dataset D [--captioner C]
    mmir retrieve --task T --dataset D --system S
    mmir score    --task T --dataset D --system S
    mmir report   --task T
    mmir track    --task T
    mmir ablations                      caption/reformulation grids: queries, runs, scores, tables, MLflow
    mmir rag                            RAG QA answers + judge for every setting, the table, MLflow
    mmir m2rag                          M2RAG knowledge bases, answers + eight metrics per strategy, table, MLflow
    mmir mmdr                           MMDeepResearch-Bench tasks, baseline reports, scoring, leaderboard, MLflow
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmir.data.domains import has_query_images
from mmir.workflow.units import ablation_systems, ablation_units, m2rag_units, mmdr_units, rag_units, task_units, units
from mmir.workflow.validate import load_config
from mmir.core import logs, paths
from mmir.core.errors import MmirError


def _domains(config, dataset, task="task1", system=None):
    """Domains of ``dataset`` that ``task`` runs on (Tasks 2–4: multimodal ones only), for ``system`` if given."""
    return list(dict.fromkeys(u["domain"] for u in task_units(config, task)
                              if u["dataset"] == dataset and system in (None, u["system"])))


def _skip_note(out_dir: str, what: str) -> None:
    # DVC expects every declared output: a dataset a task does not apply to gets a directory with a note.
    from mmir.core.io import write_json

    write_json(Path(out_dir) / "SKIPPED.json", {"reason": what})
    print(f"mmir: {what}; wrote {out_dir}/SKIPPED.json", file=sys.stderr)


def cmd_validate(config, args):
    for ds, dom in units(config):
        print(f"{ds}\t{dom}")
    print(f"systems: {', '.join(config['systems'])}; tasks: {', '.join(config['tasks'])}; protocol: {config['evaluation']['protocol']}")
    m2rag = m2rag_units(config)
    print(f"rag units: {len(rag_units(config))}; m2rag units: {len(m2rag)} "
          f"({len({(u['dataset'], u['domain'], u['source']) for u in m2rag})} knowledge bases); "
          f"mmdr domains: {len(mmdr_units(config))}")


def cmd_prepare(config, args):
    from mmir.workflow import steps

    ds = config["datasets"][args.dataset]
    for dom in [d for name, d in units(config) if name == args.dataset]:  # every domain, whatever the systems
        marker = None
        if ds["source"] == "hf":
            marker = paths.FETCHED.format(dataset=args.dataset, domain=dom)
            steps.fetch(args.dataset, ds, dom, marker)
        steps.prepare(args.dataset, ds, dom, paths.PREPARED.format(dataset=args.dataset, domain=dom), marker)


def cmd_caption(config, args):
    from mmir.workflow import steps

    name = args.captioner or config["evaluation"]["image_text"]
    domains = _domains(config, args.dataset, "task2")
    if not domains:
        return _skip_note(f"results/captions/{args.dataset}", f"dataset {args.dataset} has no images: no captions")
    for dom in domains:
        cap = config["captioners"][name]
        steps.caption(paths.PREPARED.format(dataset=args.dataset, domain=dom), name, cap,
                      f"{config['paths']['caption_cache']}/{name}.sqlite",
                      paths.CAPTIONS.format(dataset=args.dataset, domain=dom, captioner=name),
                      config["generators"].get(cap.get("generator", "")), config["paths"]["generation_cache"])


def cmd_retrieve(config, args):
    from mmir.workflow import steps

    system = config["systems"][args.system]
    domains = _domains(config, args.dataset, args.task, args.system)
    if not domains:
        out = str(Path(paths.RUN.format(task=args.task, dataset=args.dataset, system=args.system, domain="x")).parent)
        return _skip_note(out, f"{args.task} does not apply to system {args.system} on dataset {args.dataset}")
    for dom in domains:
        f = dict(task=args.task, dataset=args.dataset, system=args.system, domain=dom)
        captions = None
        if args.task != "task1" and system["kind"] != "mm":
            captions = paths.CAPTIONS.format(dataset=args.dataset, domain=dom, captioner=config["evaluation"]["image_text"])
        steps.retrieve(args.task, paths.PREPARED.format(**f), args.system, system, config["evaluation"],
                       config["paths"]["embedding_cache"], paths.RUN.format(**f), paths.RUN_STATS.format(**f), captions)


def cmd_score(config, args):
    from mmir.workflow import steps

    domains = _domains(config, args.dataset, args.task, args.system)
    if not domains:
        out = str(Path(paths.METRICS.format(task=args.task, dataset=args.dataset, system=args.system, domain="x")).parent)
        return _skip_note(out, f"{args.task} does not apply to system {args.system} on dataset {args.dataset}")
    binary = args.task == "task4" and config["evaluation"]["task4_protocol"] == "official"
    for dom in domains:
        f = dict(task=args.task, dataset=args.dataset, system=args.system, domain=dom)
        steps.score(paths.RUN.format(**f), paths.prepared(args.dataset, dom, f"qrels.{args.task}.txt"), config["measures"],
                    paths.METRICS.format(**f), paths.PERQUERY.format(**f), f, binary)


def _units(config, task):
    return task_units(config, task)


def cmd_report(config, args):
    from mmir.workflow import steps

    files = [paths.METRICS.format(task=args.task, **u) for u in _units(config, args.task)]
    ev = config["evaluation"]
    protocol = ev["protocol"] + (f", task4 labels: {ev['task4_protocol']}" if args.task == "task4" else "")
    steps.report(args.task, files, ev["primary_measure"], protocol,
                 paths.TABLE_MD.format(task=args.task), paths.TABLE_CSV.format(task=args.task),
                 paths.TABLE_METRICS.format(task=args.task),
                 [n for n, s in config["systems"].items() if s.get("random_init")])


def cmd_track(config, args):
    from mmir.workflow import steps

    steps.track(config, args.task, _units(config, args.task), paths.TRACKING.format(task=args.task))


def cmd_ablations(config, args):
    """Everything of the ablation grids (Task 1, MM-BRIGHT section 5), one grid after the other."""
    from mmir.workflow import steps

    derived = ablation_systems(config)
    ev = config["evaluation"]
    for grid in ("caption", "reformulation"):
        gunits = ablation_units(config, grid)
        if not gunits:
            continue
        for u in gunits:
            d = derived.get(u["system"])
            f = dict(u)
            prep = paths.PREPARED.format(**f)
            queries = None
            if d:
                queries = paths.QUERIES.format(dataset=u["dataset"], domain=u["domain"], variant=d["variant"])
                if not Path(queries).exists():
                    if grid == "caption":
                        caps = paths.CAPTIONS.format(dataset=u["dataset"], domain=u["domain"], captioner=d["source"])
                        steps.augment(f"{prep}/topics.parquet", caps, queries)
                    else:
                        ref = config["reformulators"][d["source"]]
                        caps = paths.CAPTIONS.format(dataset=u["dataset"], domain=u["domain"], captioner=ref["image_text"])
                        steps.reformulate(f"{prep}/topics.parquet", caps, ref, config["generators"][ref["generator"]],
                                          config["paths"]["generation_cache"], queries,
                                          paths.QUERIES_STATS.format(dataset=u["dataset"], domain=u["domain"], variant=d["variant"]))
            if d or not Path(paths.METRICS.format(**f)).exists():
                steps.retrieve(u["task"], prep, u["system"], config["systems"][d["base"] if d else u["system"]], ev,
                               config["paths"]["embedding_cache"], paths.RUN.format(**f), paths.RUN_STATS.format(**f),
                               queries=queries)
                steps.score(paths.RUN.format(**f), paths.prepared(u["dataset"], u["domain"], "qrels.task1.txt"),
                            config["measures"], paths.METRICS.format(**f), paths.PERQUERY.format(**f), f)
        files = [paths.METRICS.format(**u) for u in gunits]
        steps.ablation_report(grid, files, ev["primary_measure"], derived, *(p.format(grid=grid) for p in (
            paths.ABLATION_MD, paths.ABLATION_CSV, paths.ABLATION_PLOT, paths.ABLATION_PLOT_DATA)))
        steps.track(config, "task1", gunits, paths.TRACKING.format(task=f"{grid}_ablation"), run_name=f"{grid}_ablation")


def cmd_rag(config, args):
    """Every RAG unit (dataset, domain, setting), then the table and its MLflow runs."""
    from mmir.workflow import steps

    rag = config.get("rag")
    if not rag:
        print("mmir: params.yaml has no rag section: nothing to do", file=sys.stderr)
        return
    files = []
    for u in rag_units(config):
        out = paths.RAG.format(**u)
        run = paths.RUN.format(task=rag["task"], dataset=u["dataset"], domain=u["domain"], system=u["setting"][5:]) \
            if u["setting"].startswith("topk:") else None
        caps = paths.CAPTIONS.format(dataset=u["dataset"], domain=u["domain"], captioner=config["evaluation"]["image_text"]) \
            if has_query_images(config["datasets"][u["dataset"]], u["domain"]) else None
        steps.rag(u["dataset"], u["domain"], u["setting"], paths.PREPARED.format(**u), rag,
                  config["generators"][rag["generator"]], config["generators"][rag["judge"]],
                  config["paths"]["generation_cache"], out, run, caps)
        files.append(f"{out}/summary.json")
    steps.rag_report(config, files, paths.RAG_TABLE_MD, paths.RAG_TABLE_CSV, paths.TRACKING.format(task="rag"))


def cmd_m2rag(config, args):
    """Every M2RAG knowledge base and answer unit, then the table and its MLflow runs."""
    from mmir.workflow import m2rag as pipeline

    m = config.get("m2rag")
    if not m:
        print("mmir: params.yaml has no m2rag section: nothing to do", file=sys.stderr)
        return
    gens, cache = config["generators"], config["paths"]["generation_cache"]
    built, files = set(), []
    for u in m2rag_units(config):
        kb_dir = paths.M2RAG_KB.format(**u)
        kb = (u["dataset"], u["domain"], u["source"])
        inputs = pipeline.kb_inputs(config, *kb)
        if kb not in built:
            if "devset" in inputs:
                pipeline.load_dev_set_step(inputs["devset"], m["devset"]["image_root"], m, f"{kb_dir}/kb.jsonl",
                                           f"{kb_dir}/kb.json", levels=m["devset"]["levels"])
            else:
                pipeline.build_knowledge_bases_step(*kb, paths.PREPARED.format(**u), inputs["run"], m, gens[m["judge"]],
                                                    cache, f"{kb_dir}/kb.jsonl", f"{kb_dir}/kb.json",
                                                    inputs.get("captions"), inputs.get("anchors"))
            built.add(kb)
        out = paths.M2RAG.format(**u)
        encoder = config["systems"][m["separate_encoder"]] if u["strategy"] == "separate" else None
        pipeline.answer_step(*kb, u["strategy"], f"{kb_dir}/kb.jsonl", m, gens[m["generator"]], gens[m["judge"]], cache,
                             out, inputs.get("images"), encoder)
        files.append(f"{out}/summary.json")
    pipeline.report_step(config, files, paths.M2RAG_TABLE_MD, paths.M2RAG_TABLE_CSV, paths.TRACKING.format(task="m2rag"))


def cmd_mmdr(config, args):
    """Every MMDR domain (tasks, baseline reports, scoring), then the leaderboard export, the table and MLflow."""
    from mmir.workflow import mmdr as pipeline

    m = config.get("mmdr")
    if not m:
        print("mmir: params.yaml has no mmdr section: nothing to do", file=sys.stderr)
        return
    gens, cache = config["generators"], config["paths"]["generation_cache"]
    runs, reports = [], []
    for u in mmdr_units(config):
        d, dom = u["dataset"], u["domain"]
        prep = paths.PREPARED.format(**u)
        caps = pipeline.captions_file(config, d, dom)
        tasks, reps, run = (p.format(**u) for p in (paths.MMDR_TASKS, paths.MMDR_REPORTS, paths.MMDR_RUN))
        pipeline.tasks_step(d, dom, prep, m, tasks)
        pipeline.reports_step(d, dom, prep, tasks, m, gens[m["generator"]], cache, reps, pipeline.run_file(config, d, dom), caps)
        pipeline.score_step(d, dom, prep, tasks, reps, m, gens[m["judge"]], cache, run, caps)
        runs.append(run)
        reports.append(reps)
    pipeline.report_step(config, runs, reports, paths.MMDR_TABLE_MD, paths.MMDR_TABLE_CSV, paths.MMDR_EXPORT,
                         paths.TRACKING.format(task="mmdr"))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad config or data, with the error on stderr)."""
    parser = argparse.ArgumentParser(prog="mmir", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="config file (default: params.yaml)")
    parser.add_argument("--configfile", action="append", default=[], metavar="OVERLAY",
                        help="overlay merged into --params key by key, as `snakemake --configfile` (repeatable)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate")
    sub.add_parser("prepare").add_argument("--dataset", required=True)
    p = sub.add_parser("caption")
    p.add_argument("--dataset", required=True)
    p.add_argument("--captioner", default=None, help="default: evaluation.image_text")
    for name in ("retrieve", "score"):
        p = sub.add_parser(name)
        p.add_argument("--task", default="task1")
        p.add_argument("--dataset", required=True)
        p.add_argument("--system", required=True)
    for name in ("report", "track"):
        sub.add_parser(name).add_argument("--task", default="task1")
    sub.add_parser("ablations")
    sub.add_parser("rag")
    sub.add_parser("m2rag")
    sub.add_parser("mmdr")
    args = parser.parse_args(argv)
    logs.setup()
    try:
        config = load_config(args.params, args.configfile)
        for key in ("dataset", "system"):
            val = getattr(args, key, None)
            if val is not None and val not in config[key + "s"]:
                parser.error(f"--{key} {val!r} is not in {args.params} ({', '.join(config[key + 's'])})")
        globals()[f"cmd_{args.cmd}"](config, args)
    except MmirError as exc:
        print(f"mmir: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
