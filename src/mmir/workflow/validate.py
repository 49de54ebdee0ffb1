"""The one config check before any job: the typed models (defaults filled), then the embedding API systems' (base
URL, key variable) and every benchmark's own cross-key checks, then what the config names outside itself (dataset
roots and domains, environment variables holding API keys, model packages, the run files of ``kind: run`` systems).
Snakemake (``pipeline/rules/common.smk``) and the CLI both call this."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from mmir import config as cfg
from mmir.benchmarks.m2rag.check import check as check_m2rag
from mmir.benchmarks.mmbright.check import check as check_mmbright
from mmir.benchmarks.mmdr.check import check as check_mmdr
from mmir.benchmarks.rag.check import check as check_rag
from mmir.config.models import Params, parse_params
from mmir.core.errors import ConfigError
from mmir.data.domains import check_dataset
from mmir.encoders.embeddings_api import check_dense_api_systems
from mmir.llm.backends import backend_class
from mmir.workflow.rules.mteb import check_mteb


def validate_config(config: dict, file: str | None = None) -> dict:
    """Validate ``config`` in place (schema, defaults, every section's cross-references) and return it.

    Raises:
        ConfigError: naming the first bad key and ``file``.
    """
    cfg.validate_config(config, file)
    check_dense_api_systems(config, file)
    params = parse_params(config, file)
    for check in (check_mmbright, check_rag, check_m2rag, check_mmdr):
        check(params, file)
    for name, ds in params.datasets.items():
        check_dataset(name, ds, file)
    check_rerank(params, file)
    check_external_runs(params, file)
    check_reporting(params, file)
    check_mteb(params, file)
    check_environment(params, file)
    check_plugins(params, file)
    return config


def check_rerank(params: Params, file: str | None = None) -> None:
    """``rerank.runs``: each names a system of ``systems`` or an ablation system (``bm25+cap:ocr``, which takes no
    ``tasks``: it runs on its grid's Task 1 queries) and a key of ``rerankers`` whose LLM reranker's generator exists,
    each (system, reranker) once, a depth within ``evaluation.top_k``, tasks in ``tasks``; the made name is no system's,
    and a run of a system of ``systems`` has at least one unit.

    Raises:
        ConfigError: naming ``rerank.runs.<i>.<key>`` or ``rerankers.<name>.generator``.
    """
    from mmir.workflow.units import RERANK_SEP, ablation_systems

    ablation = ablation_systems(params)

    for name, r in params.rerankers.items():
        gen = getattr(r, "generator", None)
        if gen is not None and gen not in params.generators:
            raise ConfigError(f"rerankers.{name}.generator", f"{gen!r} is not a key of generators", file)
        if r.kind == "llm-pointwise" and r.score == "logprobs" and not backend_class(params.generators[gen]).supports_logprobs:
            raise ConfigError(f"rerankers.{name}.score", f"score: logprobs needs token log-probabilities, which generator "
                              f"{gen!r} (backend {params.generators[gen].backend}) does not give: use score: reply or a "
                              "llama_cpp / openai generator", file)
    seen = set()
    for i, run in enumerate(params.rerank.runs):
        key = f"rerank.runs.{i}"
        if run.system not in params.systems and run.system not in ablation:
            hint = " (reranking a reranked system is not supported)" if RERANK_SEP in run.system else ""
            known = ", ".join([*params.systems, *ablation]) or "none"
            raise ConfigError(f"{key}.system", f"{run.system!r} is neither a key of systems nor an ablation system "
                              f"({known}){hint}", file)
        if run.system in ablation and run.tasks is not None:
            raise ConfigError(f"{key}.tasks", f"{run.system!r} is an ablation system: it runs on its grid's Task 1 "
                              "queries only, so give no tasks", file)
        if run.reranker not in params.rerankers:
            raise ConfigError(f"{key}.reranker", f"{run.reranker!r} is not a key of rerankers ({', '.join(params.rerankers) or 'none'})",
                              file)
        name = f"{run.system}{RERANK_SEP}{run.reranker}"
        if name in seen:
            raise ConfigError(f"{key}.reranker", f"{name} is made twice: give each (system, reranker) one depth", file)
        if name in params.systems:
            raise ConfigError(f"{key}.reranker", f"{name} is already a key of systems", file)
        seen.add(name)
        if run.depth > params.evaluation.top_k:
            raise ConfigError(f"{key}.depth", f"{run.depth} is larger than evaluation.top_k ({params.evaluation.top_k}), the "
                              "length of every first-stage run: no ranking could fill it", file)
        for j, d in enumerate(run.datasets or []):
            if d not in params.datasets:
                raise ConfigError(f"{key}.datasets.{j}", f"{d!r} is not a key of datasets", file)
        for j, t in enumerate(run.tasks or []):
            if t not in params.tasks:
                raise ConfigError(f"{key}.tasks.{j}", f"{t!r} is not in tasks ({', '.join(params.tasks)})", file)
    if params.rerank.runs:  # a run whose first stage runs on none of its tasks and datasets would vanish silently
        from mmir.workflow.units import task_units

        made = {u["system"] for t in params.tasks for u in task_units(params, t)}
        for i, run in enumerate(params.rerank.runs):
            if run.system not in ablation and f"{run.system}{RERANK_SEP}{run.reranker}" not in made:
                raise ConfigError(f"rerank.runs.{i}", f"{run.system} runs on none of this run's tasks "
                                  f"({', '.join(run.tasks or params.tasks)}) and datasets ({', '.join(run.datasets or params.datasets)}): "
                                  "nothing to rerank (Task 1 has no kind: mm system; Tasks 2-4 need a dataset with images)", file)


def check_external_runs(params: Params, file: str | None = None) -> None:
    """Each ``kind: run`` system has a run file for every (task, dataset, domain) the config runs it on (its ``path``
    template filled; relative paths against the working directory, the project directory of every job), and no
    ablation grid names it (a grid re-runs its systems with other queries; an external run cannot be re-run).

    Raises:
        ConfigError: naming ``systems.<name>.path`` and the first missing file (with the count), or
            ``ablations.<grid>.systems.<i>``.
    """
    from mmir.retrieval.external import run_path
    from mmir.workflow.units import task_units

    external = {n: s for n, s in params.systems.items() if s.kind == "run"}
    if not external:
        return
    for grid in ("caption", "reformulation", "reasoning"):
        for i, s in enumerate(getattr(params.ablations, grid).systems):
            if s in external:
                raise ConfigError(f"ablations.{grid}.systems.{i}", f"{s!r} is an external run (kind: run): a query ablation "
                                  "searches again with other queries, which an external run cannot do", file)
    for name, s in external.items():
        wanted = [(t, u["dataset"], u["domain"]) for t in params.tasks for u in task_units(params, t) if u["system"] == name]
        missing = [(t, d, dom, run_path(s.path, t, d, dom)) for t, d, dom in wanted]
        missing = [m for m in missing if not os.path.isfile(m[3])]
        if missing:
            t, d, dom, path = missing[0]
            raise ConfigError(f"systems.{name}.path", f"no run file {path!r} for {t} on {d}/{dom} ({len(missing)} of the "
                              f"{len(wanted)} run files this config reads are missing; relative paths are relative to the "
                              f"project directory {os.getcwd()}; limit the system with tasks / datasets)", file)


def check_reporting(params: Params, file: str | None = None) -> None:
    """``significance.baseline`` names a system or a RAG setting; every ``expected`` file exists (relative paths:
    the working directory, then this checkout, :func:`mmir.core.paths.project_file`) and reads as expected values.

    Raises:
        ConfigError: naming ``significance.baseline`` or ``expected.<i>``.
    """
    from mmir.core.paths import project_file
    from mmir.evaluation.expected import load_expected
    from mmir.workflow.units import rerank_systems

    base = params.significance.baseline
    settings = params.rag.settings if params.rag else []
    if base is not None and base not in params.systems and base not in settings and base not in rerank_systems(params):
        raise ConfigError("significance.baseline", f"{base!r} is neither a system ({', '.join(params.systems)}) nor a "
                          "RAG setting", file)
    for i, f in enumerate(params.expected):
        path = project_file(f)
        if not os.path.isfile(path):
            raise ConfigError(f"expected.{i}", f"file {f!r} not found (relative paths: the working directory, then the "
                              "project checkout)", file)
        try:
            load_expected([path])
        except (ValueError, OSError) as exc:
            raise ConfigError(f"expected.{i}", str(exc), file) from exc


def check_environment(params: Params, file: str | None = None) -> None:
    """What a run needs from this machine, checked before any job: the environment variable each
    generator's ``api_key_env`` names (the backend's default when not given) is set, and every
    ``pypi:<package>[/<folder>]`` model of a system or reranker is installed (and holds the folder).

    Raises:
        ConfigError: naming ``generators.<name>.api_key_env``, ``systems.<name>.model`` or ``rerankers.<name>.model``.
    """
    for name, g in params.generators.items():
        defaults = backend_class(g).DEFAULTS
        if "api_key_env" not in defaults:
            continue
        # the backend's DEFAULTS hold the value of a key the config does not give
        var = g.api_key_env if "api_key_env" in g.model_fields_set else defaults["api_key_env"]
        if var and not os.environ.get(var):
            raise ConfigError(f"generators.{name}.api_key_env", f"environment variable {var!r} is unset or empty "
                              "(export it before running; null = an endpoint that needs no key)", file)
    models = [(f"systems.{n}", getattr(s, "model", None)) for n, s in params.systems.items()]  # bm25 has none
    models += [(f"rerankers.{n}", getattr(r, "model", None)) for n, r in params.rerankers.items()]
    for key, model in models:
        if isinstance(model, str) and model.startswith("pypi:"):
            pkg, _, sub = model[len("pypi:"):].partition("/")
            try:
                spec = importlib.util.find_spec(pkg.replace("-", "_"))
            except (ImportError, ValueError):
                spec = None
            if spec is None:
                raise ConfigError(f"{key}.model", f"package {pkg!r} is not installed in this environment "
                                  f"(pip install {pkg})", file)
            if sub and not any((Path(d) / sub).exists() for d in spec.submodule_search_locations or []):
                raise ConfigError(f"{key}.model", f"package {pkg!r} holds no folder {sub!r}", file)


def check_plugins(params: Params, file: str | None = None) -> None:
    """Every ``backend: plugin`` system and reranker names a factory that can be found (its module installed or on the
    Python path, or an entry point of the group ``mmir.plugins``), without importing or calling it.

    Raises:
        ConfigError: naming ``systems.<name>.factory`` or ``rerankers.<name>.factory``.
    """
    from mmir.encoders.plugins import PluginError, identify

    entries = [*(("systems", n, s) for n, s in params.systems.items()), *(("rerankers", n, r) for n, r in params.rerankers.items())]
    for section, name, entry in entries:
        if getattr(entry, "backend", None) != "plugin":
            continue
        try:
            identify(entry.factory, f"{section}.{name}")
        except PluginError as exc:
            raise ConfigError(f"{section}.{name}.factory", str(exc).split(": ", 1)[-1], file) from exc


def load_config(path: str | os.PathLike = "params.yaml", overlays: list[str | os.PathLike] | None = None) -> dict:
    """Read ``path``, merge the overlays as ``snakemake --configfile`` does, and :func:`validate_config`.

    Raises:
        ConfigError: bad YAML or a bad key (named, with the files read); OSError: a file cannot be read.
    """
    raw, files = cfg.read_config(path, overlays)
    return validate_config(raw, files)
