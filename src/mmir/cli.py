"""``mmir``: the command line used by DVC stages (and handy by hand).

Each sub-command runs one step for every domain of a dataset (DVC versions one output directory per
dataset/system), reading the validated params.yaml. Snakemake calls the same :mod:`mmir.steps` functions
per domain instead.

    mmir validate                       check params.yaml, print the resolved units
    mmir prepare  --dataset D
    mmir retrieve --task T --dataset D --system S
    mmir score    --task T --dataset D --system S
    mmir report   --task T
    mmir track    --task T
"""

from __future__ import annotations

import argparse
import sys

from mmir import logs, paths
from mmir.config import load_config, units
from mmir.errors import MmirError


def _domains(config, dataset):
    return [dom for ds, dom in units(config) if ds == dataset]


def cmd_validate(config, args):
    for ds, dom in units(config):
        print(f"{ds}\t{dom}")
    print(f"systems: {', '.join(config['systems'])}; tasks: {', '.join(config['tasks'])}; protocol: {config['evaluation']['protocol']}")


def cmd_prepare(config, args):
    from mmir import steps

    ds = config["datasets"][args.dataset]
    for dom in _domains(config, args.dataset):
        marker = None
        if ds["source"] == "hf":
            marker = paths.FETCHED.format(dataset=args.dataset, domain=dom)
            steps.fetch(args.dataset, ds, dom, marker)
        steps.prepare(args.dataset, ds, dom, paths.PREPARED.format(dataset=args.dataset, domain=dom), marker)


def cmd_retrieve(config, args):
    from mmir import steps

    for dom in _domains(config, args.dataset):
        f = dict(task=args.task, dataset=args.dataset, system=args.system, domain=dom)
        steps.retrieve(args.task, paths.PREPARED.format(**f), args.system, config["systems"][args.system],
                       config["evaluation"], config["paths"]["embedding_cache"], paths.RUN.format(**f), paths.RUN_STATS.format(**f))


def cmd_score(config, args):
    from mmir import steps

    for dom in _domains(config, args.dataset):
        f = dict(task=args.task, dataset=args.dataset, system=args.system, domain=dom)
        steps.score(paths.RUN.format(**f), paths.prepared(args.dataset, dom, f"qrels.{args.task}.txt"), config["measures"],
                    paths.METRICS.format(**f), paths.PERQUERY.format(**f), f)


def _units(config, task):
    return [dict(dataset=ds, domain=dom, system=s) for ds, dom in units(config) for s in config["systems"]]


def cmd_report(config, args):
    from mmir import steps

    files = [paths.METRICS.format(task=args.task, **u) for u in _units(config, args.task)]
    steps.report(args.task, files, config["evaluation"]["primary_measure"], config["evaluation"]["protocol"],
                 paths.TABLE_MD.format(task=args.task), paths.TABLE_CSV.format(task=args.task),
                 paths.TABLE_METRICS.format(task=args.task))


def cmd_track(config, args):
    from mmir import steps

    steps.track(config, args.task, _units(config, args.task), paths.TRACKING.format(task=args.task))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad config or data, with the error on stderr)."""
    parser = argparse.ArgumentParser(prog="mmir", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="config file (default: params.yaml)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate")
    sub.add_parser("prepare").add_argument("--dataset", required=True)
    for name in ("retrieve", "score"):
        p = sub.add_parser(name)
        p.add_argument("--task", default="task1")
        p.add_argument("--dataset", required=True)
        p.add_argument("--system", required=True)
    for name in ("report", "track"):
        sub.add_parser(name).add_argument("--task", default="task1")
    args = parser.parse_args(argv)
    logs.setup()
    try:
        config = load_config(args.params)
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
