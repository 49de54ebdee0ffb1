"""``mmir``: the command line. In a project (a folder with a ``params.yaml``) it runs the workflow shipped in the package,
one job of a rule as the Snakemake rule scripts do, and Snakemake per stage family for DVC; it derives nothing itself
(``mmir.workflow.rules``, ``mmir.workflow.targets`` and ``mmir.workflow.project`` do).

    mmir init DIR --dataset NAME=beir:PATH --system bm25 [--task task1]   a new project: params.yaml, .gitignore
    mmir init DIR --example first-run [--data ROOT]   the paper's first run (the repository's params.yaml)
    mmir init DIR ... --dvc [--remote URL]         a DVC project too: git, dvc.yaml, caches inside it (docs: Experiments)
    mmir run [SNAKEMAKE ARGS]                     the workflow on this project (kill recovery: a stale lock is removed)
    mmir validate                                 check the config, list its units and the stages it runs
    mmir job RULE key=value ...                   run one job of a rule, e.g. job retrieve task=task1 dataset=openstax
                                                  domain=statistics system=bm25 (inputs must exist)
    mmir targets FAMILY [--dataset D] [--task T]  the files that complete a stage family
    mmir snakemake FAMILY [...] [-- SNAKEMAKE ARGS]  snakemake on those files (the DVC stages' command)
    mmir expected OUT.yaml [--tolerance T]         this run's Task 1-4 tables as expected values (regression guard)
    mmir compare RUN_A RUN_B --task T --dataset D --domain X   two runs query by query: the paired test, the interval
                                                  of the mean difference, wins/ties/losses, the largest differences

A bad config or data file is one line, ``mmir: error: <file>, line N, field 'x': ...`` (exit status 2); ``mmir --debug``
prints its traceback too.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from mmir.core import logs
from mmir.core.errors import ConfigError, MmirError
from mmir.core.tasks import TASKS


def cmd_validate(config, args) -> int:
    from mmir.workflow import units as U
    from mmir.workflow.targets import stages

    p = U.typed(config)
    print("dataset\tdomain")  # one line per unit below, tab-separated (scripts read them)
    for ds, dom in U.units(config):
        print(f"{ds}\t{dom}")
    print(f"systems: {', '.join(U.system_order(p))}; tasks: {', '.join(p.tasks)}; protocol: {p.evaluation.protocol}")
    print("units: " + "; ".join(f"{t} {len(U.task_units(config, t))}" for t in p.tasks))
    print("stages: " + ", ".join(stages(p)))
    print("baseline: " + "; ".join(f"{t} " + ", ".join(f"{ds} {b}" for ds, b in U.table_baselines(config, t).items()) for t in p.tasks))
    m2rag = U.m2rag_units(config)
    print(f"rag units: {len(U.rag_units(config))}; m2rag units: {len(m2rag)} "
          f"({len({(u['dataset'], u['domain'], u['source']) for u in m2rag})} knowledge bases); "
          f"mmdr domains: {len(U.mmdr_units(config))}; essentiality domains: {len(U.essentiality_units(config))}; "
          f"audit domains: {len(U.audit_units(config))}")
    for note in U.essentiality_skipped(config):
        print(f"essentiality skips {note}")
    return 0


def _wildcards(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise ConfigError("<wildcards>", f"expected key=value, got {p!r}")
        out[key] = value
    return out


def _unknown_wildcard(rule: str, wildcards: dict[str, str], key) -> str:
    """The message for a ``KeyError`` raised while a rule plans its job from ``wildcards``."""
    given = " ".join(f"{k}={v}" for k, v in wildcards.items()) or "none"
    named = [k for k, v in wildcards.items() if v == key]
    if named:
        return (f"rule {rule}: {named[0]}={key} is not in this config (an overlay missing from --configfile? "
                f"`mmir validate` lists the units)")
    return f"rule {rule}: wildcard or config key {key!r} missing (given: {given})"


def cmd_job(config, args) -> int:
    from mmir.workflow.rules import RULES, run_job

    if args.rule not in RULES:
        raise ConfigError("<rule>", f"unknown rule {args.rule!r}; known: {', '.join(RULES)}")
    from dataclasses import replace

    from mmir.workflow.rules import job_resources

    wildcards = _wildcards(args.wildcards)
    try:
        job = RULES[args.rule].job(config, wildcards)
    except KeyError as exc:  # a wildcard value the config does not have, or a wildcard not given
        raise ConfigError("<wildcards>", _unknown_wildcard(args.rule, wildcards, exc.args[0] if exc.args else None)) from exc
    job = replace(job, threads=job_resources(config, args.rule, job.wildcards.get("system"))["threads"] or 1)
    missing = [p for v in job.input.values() for p in ([v] if isinstance(v, str) else v) if not Path(p).exists()]
    if missing:
        raise ConfigError("<inputs>", f"rule {args.rule}: {len(missing)} inputs do not exist, e.g. {missing[0]} "
                          "(build them first, e.g. with snakemake)")
    # the job's threads, as Snakemake gives a job (torch, ONNX Runtime and llama.cpp read it); a value set by the user wins
    os.environ.setdefault("OMP_NUM_THREADS", str(job.threads))
    run_job(job)
    return 0


def _targets(config, args) -> list[str]:
    from mmir.workflow.targets import family_targets

    return family_targets(config, args.family, dataset=args.dataset, task=args.task)


def cmd_targets(config, args) -> int:
    print("\n".join(_targets(config, args)))
    return 0


def cmd_snakemake(config, args) -> int:
    from mmir.workflow.dvc_project import check_version
    from mmir.workflow.targets import ensure_outputs

    check_version()  # a project made by `mmir init --dvc`: the mmir its stages were set up for
    targets = _targets(config, args)
    if not targets:
        made = ensure_outputs(args.family, dataset=args.dataset, task=args.task, config=config)
        print(f"mmir: stage family {args.family} has no unit in this config: nothing to do "
              f"(created {len(made)} empty outputs for DVC)", file=sys.stderr)
        return 0
    from mmir.workflow.experiments import in_dvc_copy, restore_mtimes
    from mmir.workflow.resume import SNAKEMAKE, clear_stale_lock, workflow_args

    if in_dvc_copy():  # a queued DVC experiment: the outputs were just checked out, in any order
        print(f"mmir: DVC experiment copy: {restore_mtimes()[0]} outputs given times in their Snakemake records' order", file=sys.stderr)

    files = [a for f in [args.params, *args.configfile] for a in ("--configfile", f)]
    args_ = workflow_args(["--cores", os.environ.get("MMIR_CORES", "all"), *files, *args.snakemake_args, "--", *targets])
    note = clear_stale_lock(SNAKEMAKE, args_)  # a lock a killed Snakemake left (a DVC stage rerun after a kill)
    if note:
        print(f"mmir: {note}", file=sys.stderr)
    print("mmir: snakemake " + " ".join(args_[:8]) + f" ... ({len(targets)} targets)", file=sys.stderr)
    return subprocess.call([*SNAKEMAKE, *args_])


def cmd_run(args) -> int:
    """``mmir run [SNAKEMAKE ARGS]``: the packaged workflow on the project's params.yaml (and ``--configfile`` overlays)."""
    from mmir.workflow import versions
    from mmir.workflow.resume import run, workdir

    if args.params != "params.yaml":
        raise ConfigError(args.params, "mmir run reads the project's params.yaml; add this file as an overlay instead: "
                          f"mmir --configfile {args.params} run")
    project = workdir(args.snakemake_args)
    if not (project / "params.yaml").is_file():
        raise ConfigError(str(project / "params.yaml"), "no such file: run mmir in a project folder (`mmir init DIR` makes one)")
    given = args.snakemake_args
    # overlays after the leading targets (`--configfile`'s list would take them) and before the first option
    lead = next((i for i, a in enumerate(given) if a.startswith("-")), len(given))
    files = ["--configfile", *args.configfile] if args.configfile else []
    forced, package, note = versions.plan(project)  # another mmir than the last run's: force what its change touches
    if note:
        print(f"mmir: {note}", file=sys.stderr, flush=True)
    if forced:  # only rules with a job in this plan
        planned = versions.planned_rules([*given[:lead], *files, *given[lead:]])
        forced = [r for r in forced if planned is None or r in planned]
        print(f"mmir: rerunning the jobs of the rules whose code changed: {', '.join(forced) or 'none in this plan'}",
              file=sys.stderr, flush=True)
    force = ["--forcerun", *forced, "--rerun-incomplete"] if forced else []  # the flag after ends the list
    status = run([*given[:lead], *files, *force, *given[lead:]])
    if not any(a in NOT_RUNS for a in given):
        partial = lead > 0 or "--" in given  # targets named: the forced rules may have jobs it did not ask for
        versions.save_record(project, package, forced if status != 0 or partial else [])
    return status


def cmd_init(args) -> int:
    from mmir.workflow.project import init_project

    if (args.remote or args.endpoint_url) and not args.dvc:
        raise ConfigError("mmir init", "--remote and --endpoint-url go with --dvc")
    written = init_project(args.dir, datasets=args.dataset, systems=args.system, tasks=args.task, example=args.example,
                           data=args.data, force=args.force, dvc=args.dvc)
    if args.dvc:
        from mmir.workflow.dvc_project import init_dvc

        written += init_dvc(args.dir, args.remote, args.endpoint_url)
    then = "dvc repro && git add -A && git commit -m 'first run'" if args.dvc else "mmir run"
    print(f"wrote {', '.join(map(str, written))}; next: cd {args.dir} && {then}")
    return 0


def cmd_expected(config, args) -> int:
    import yaml

    from mmir.config.models import fill
    from mmir.core import paths
    from mmir.core.gitinfo import commit_label
    from mmir.core.io import write_text
    from mmir.evaluation.expected import freeze, observations_from_task_metrics
    from mmir.workflow.units import typed

    p = typed(config)
    obs = [o for t in p.tasks if Path(paths.TABLE_METRICS.format(task=t)).exists()
           for o in observations_from_task_metrics(paths.TABLE_METRICS.format(task=t))]
    if not obs:
        raise ConfigError("tasks", "no results/tables/<task>.metrics.json of this config's tasks yet: run the workflow first")
    doc = freeze(obs, {n: d.sample and fill(d.sample) for n, d in p.datasets.items()}, benchmark=args.benchmark,
                 source=f"mmir run at commit {commit_label()}", tolerance=args.tolerance)
    flow = [yaml.safe_dump(e, sort_keys=False, default_flow_style=True, width=1000).strip() for e in doc["entries"]]
    write_text(args.out, yaml.safe_dump({"defaults": doc["defaults"]}, sort_keys=False, width=1000)
               + "entries:\n" + "".join(f"  - {line}\n" for line in flow))
    print(f"wrote {args.out}: {len(doc['entries'])} expected values; add it to the config's `expected` list")
    return 0


def cmd_compare(config, args) -> int:
    import pandas as pd

    from mmir.config.models.evaluation import EvaluationConfig
    from mmir.core import paths
    from mmir.core.tasks import task as task_spec
    from mmir.data.prepare import qrels_file
    from mmir.evaluation.compare import compare_runs, format_comparison
    from mmir.evaluation.significance import Settings
    from mmir.retrieval.exclusions import exclusions

    spec = task_spec(args.task)
    where = args.dataset and args.domain
    if args.qrels is None and not where:
        raise ConfigError("<compare>", "give --dataset and --domain (the prepared qrels of the task) or --qrels FILE")
    evaluation = EvaluationConfig.model_validate(config.get("evaluation") or {})
    qrels = args.qrels or paths.prepared(args.dataset, args.domain, qrels_file(spec.name, evaluation.task4_protocol))
    topics = args.topics or (paths.prepared(args.dataset, args.domain, spec.queries) if where else None)
    for f in (args.run_a, args.run_b, qrels):
        if not Path(f).is_file():
            raise ConfigError("<compare>", f"{f}: no such file" + ("" if f != qrels or args.qrels else
                                                                  " (prepare the domain first, or pass --qrels)"))
    measure = args.measure or evaluation.primary_measure
    # the pipeline removes the protocol's exclusions from every run before scoring (an outside run too): so does compare
    excluded = (exclusions(paths.PREPARED.format(dataset=args.dataset, domain=args.domain), spec.name, evaluation.protocol,
                           evaluation.task4_protocol) if where else None)
    c = compare_runs(args.run_a, args.run_b, qrels, measure, Settings.model_validate(config.get("significance") or {}),
                     args.top, evaluation.tie_order, excluded=excluded, top_k=evaluation.top_k)
    texts = {}
    if topics and Path(topics).is_file():
        t = pd.read_parquet(topics, columns=["qid", "query"])
        texts = dict(zip(t["qid"].astype(str), t["query"].astype(str)))
    print(f"qrels: {qrels}" + (f"; topics: {topics}" if texts else ""))
    print(f"protocol {evaluation.protocol}: removed {c.removed[0]} excluded items from A, {c.removed[1]} from B, as the "
          f"tables do; each run cut to its top {evaluation.top_k}" if where else
          "no exclusions removed (give --dataset and --domain to remove the protocol's, as the tables do)")
    print(format_comparison(c, args.run_a, args.run_b, measure, texts))
    return 0


COMMANDS = ("init", "run", "validate", "job", "targets", "snakemake", "expected", "compare")
#: Snakemake flags under which `mmir run` runs no job (the record of the project's last run stays as it is)
NOT_RUNS = ("-n", "--dry-run", "--dryrun", "--unlock", "-l", "--list", "--list-rules", "-S", "--summary", "-D",
            "--detailed-summary", "--dag", "--rulegraph", "--filegraph", "--lint", "--touch", "-t", "--cleanup-metadata",
            "--list-target-rules", "--lt", "--version", "-v", "-h", "--help")
#: commands that read no config in-process (init writes one; run leaves it to Snakemake, which validates it)
NO_CONFIG = ("init", "run")


def _configfile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", nargs="+", action="extend", default=[], metavar="OVERLAY",
                        help="overlays merged into --params key by key, in order, as `snakemake --configfile A B` "
                             "(a list after one flag, or the flag repeated)")


def parser() -> argparse.ArgumentParser:
    """The ``mmir`` argument parser (``--configfile`` is read by each command: see :func:`hoist_configfiles`)."""
    top = argparse.ArgumentParser(prog="mmir", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--params", default="params.yaml", help="config file (default: params.yaml)")
    top.add_argument("--debug", action="store_true", help="print the traceback of an error (a data or config error is "
                                                           "one `mmir: error: ...` line otherwise)")
    _configfile_option(top)
    sub = top.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("init", help="write a new project: params.yaml with what you name, .gitignore")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--dataset", action="append", default=[], metavar="[NAME=]SOURCE:PATH",
                   help="beir:PATH, local:PATH, trec:PATH, ir_datasets:ID or hf[:DOMAINS] (MM-BRIGHT from the hub); repeatable")
    p.add_argument("--system", action="append", default=[], metavar="[NAME=]SYSTEM",
                   help="bm25, minilm, a preset name or plugin:FACTORY; repeatable")
    p.add_argument("--task", action="append", default=[], choices=list(TASKS), help="repeatable (default: task1)")
    p.add_argument("--example", help="an example config shipped with mmir instead: first-run (the paper's first run)")
    p.add_argument("--data", help="with --example: the folder holding the offline data (default: ../shared/data)")
    p.add_argument("--force", action="store_true", help="overwrite an existing params.yaml")
    p.add_argument("--dvc", action="store_true", help="a DVC project too (git init when needed, dvc.yaml, "
                   "mmir-version.yaml, dvc init; caches inside the project): docs/experiments.md")
    p.add_argument("--remote", help="with --dvc: the default DVC remote (a folder, s3://bucket/prefix, ...)")
    p.add_argument("--endpoint-url", help="with --dvc --remote: an S3-compatible server's URL")
    p = sub.add_parser("run", help="run the workflow on this project (every argument goes to snakemake)")
    p.add_argument("snakemake_args", nargs="*", metavar="SNAKEMAKE ARGS")
    p = sub.add_parser("validate", help="check the config, list its units and stages")
    _configfile_option(p)
    p = sub.add_parser("job", help="run one job of a rule")
    p.add_argument("rule")
    p.add_argument("wildcards", nargs="*", metavar="key=value")
    _configfile_option(p)
    for name in ("targets", "snakemake"):
        p = sub.add_parser(name, help=f"{name} of a stage family")
        p.add_argument("family")
        p.add_argument("--dataset")
        p.add_argument("--task")
        _configfile_option(p)
    p = sub.add_parser("expected", help="freeze this run's task tables as expected values")
    p.add_argument("out")
    p.add_argument("--tolerance", type=float, default=0.1)
    p.add_argument("--benchmark", default="mmir-regression")
    _configfile_option(p)
    p = sub.add_parser("compare", help="compare two TREC runs query by query (mmir's or outside ones)")
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--task", default="task1", choices=list(TASKS),
                   help="the task whose prepared qrels and topics are read (default: task1)")
    p.add_argument("--dataset")
    p.add_argument("--domain")
    p.add_argument("--qrels", help="a TREC qrels file instead of the prepared one")
    p.add_argument("--topics", help="a topics parquet (qid, query) for the query texts instead of the prepared one")
    p.add_argument("--measure", help="default: evaluation.primary_measure")
    p.add_argument("--top", type=int, default=10, help="how many of the largest differences to list (default: 10)")
    _configfile_option(p)
    assert tuple(sub.choices) == COMMANDS
    return top


def _command_at(argv: list[str]) -> int | None:
    """The index of the command in ``argv`` (the first command name that is not the value of ``--params``)."""
    return next((i for i, a in enumerate(argv) if a in COMMANDS and (i == 0 or argv[i - 1] != "--params")), None)


def hoist_configfiles(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(argv without the --configfile lists before the command, their files in order)``; the command's own
    ``--configfile`` reads those after it. argparse's ``nargs="+"`` is greedy: in ``mmir --configfile A B validate``
    it would take ``validate`` for a file, so here a command name ends the list, as a new flag does."""
    at = _command_at(argv)
    if at is None:
        return argv, []
    head, files, listing = [], [], False
    for a in argv[:at]:
        if a.startswith("--configfile="):
            files.append(a.partition("=")[2])
            listing = False
        elif a == "--configfile":
            head.append(a)  # dropped below once it has a file; alone it stays, for argparse's own error
            listing = True
        elif listing and not a.startswith("-"):
            if head and head[-1] == "--configfile":
                head.pop()
            files.append(a)
        else:
            listing = False
            head.append(a)
    return head + argv[at:], files


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for a bad config or data: one ``mmir: error: <file>, line N, field 'x':
    ...`` line on stderr, the traceback too with ``--debug``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    run_at = _command_at(argv)
    if run_at is not None and argv[run_at] == "run":  # everything after `run` is Snakemake's, as it is
        argv, extra = argv[: run_at + 1], argv[run_at + 1:]
    else:
        extra = argv[argv.index("--") + 1:] if "--" in argv else []  # passed to snakemake as they are
        argv = argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)]
    argv, configfiles = hoist_configfiles(argv)
    args = parser().parse_args(argv)
    args.configfile = configfiles + getattr(args, "configfile", [])
    args.snakemake_args = extra
    logs.setup()
    try:
        if args.cmd in NO_CONFIG:
            return globals()[f"cmd_{args.cmd}"](args)
        from mmir.workflow.validate import load_config

        config = load_config(args.params, args.configfile)
        return globals()[f"cmd_{args.cmd}"](config, args)
    except (MmirError, ValueError, OSError) as exc:  # OSError: e.g. a --params / --configfile that cannot be read
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"mmir: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
