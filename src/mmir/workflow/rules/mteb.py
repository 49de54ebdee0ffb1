"""Rules of ``pipeline/rules/mteb.smk``: mteb_export (the MTEB result files of every (system, task) after scoring,
:mod:`mmir.reporting.mteb_export`), and the checks of the ``mteb`` section."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.errors import ConfigError
from mmir.workflow import units as U
from mmir.workflow.rules.common import Job, Rule, W


def export_plan(config: dict) -> dict:
    """:func:`mmir.reporting.mteb_export.export_plan` of the config's table tasks ({} files when ``mteb.export`` is
    false); a dataset whose every domain has no scorable query gets a result file without scores."""
    from mmir.reporting.mteb_export import export_plan as plan

    p = U.typed(config)
    if not p.mteb.export:
        return {"files": {}, "models": {}, "measures": list(p.measures), "main": p.evaluation.primary_measure}
    # every unit, those of a domain without a scorable query included: the outputs are fixed before prepare has run
    return plan(p, {t: U.task_units(config, t, scored=False) for t in U.table_tasks(config)})


def export_files(config: dict) -> list[str]:
    """Every file the export writes besides its manifest: result files, then model_meta.json files."""
    p = export_plan(config)
    return [*p["files"], *p["models"]]


def _export(job: Job):
    from mmir.reporting.mteb_export import write_export

    return write_export(job.params["plan"], list(job.input["metrics"]), job.output["manifest"], job.params.get("unscored"))


def _export_inputs(config: dict, w: W) -> dict:
    return {"metrics": [paths.METRICS.format(task=t, **u) for t in config["tasks"] for u in U.task_units(config, t)]}


def _export_params(config: dict, w: W) -> dict:
    left_out = U.unscorable(config)
    return {"plan": export_plan(config), **({"unscored": {f"{d}/{dom}": why for (d, dom), why in left_out.items()}}
                                            if left_out else {})}


def _export_outputs(config: dict) -> dict[str, str]:
    return {f"file_{i}": f for i, f in enumerate(export_files(config))}


def check_mteb(params, file: str | None = None) -> None:
    """``mteb.names`` name systems of the run; each ``mteb.references`` path exists and its ``dataset`` is a key of
    datasets; mteb is installed where a system (``backend: mteb``) or a reference needs it; no two systems export
    under one (model, revision).

    Raises:
        ConfigError: naming ``mteb.names.<system>``, ``mteb.references.<i>.<key>`` or ``systems.<name>.backend``.
    """
    import importlib.util
    import os

    from mmir.core.paths import project_file

    m = params.mteb
    known = {*params.systems, *U.ablation_systems(params), *U.rerank_systems(params)}
    for s in m.names:
        if s not in known:
            raise ConfigError(f"mteb.names.{s}", f"{s!r} is not a system of this run ({', '.join(sorted(known))})", file)
    for i, ref in enumerate(m.references):
        if not os.path.exists(project_file(ref.path)):
            raise ConfigError(f"mteb.references.{i}.path", f"{ref.path!r} not found (relative paths: the working directory, "
                              "then the project checkout)", file)
        if ref.dataset not in params.datasets:
            raise ConfigError(f"mteb.references.{i}.dataset", f"{ref.dataset!r} is not a key of datasets", file)
    needs = [f"systems.{n}.backend" for n, s in params.systems.items() if getattr(s, "backend", None) == "mteb"]
    needs += ["mteb.references"] if m.references else []
    if needs and importlib.util.find_spec("mteb") is None:
        raise ConfigError(needs[0], "needs the optional extra mmir[mteb], not installed in this environment (pip install "
                          "'mteb==2.26.24'; `make setup` installs it)", file)


RULES = (
    Rule(name="mteb_export", output={"manifest": paths.MTEB_MANIFEST}, run=_export, input=_export_inputs,
         params=_export_params, extra_output=_export_outputs),
)
