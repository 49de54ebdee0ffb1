"""The DVC files of a project that ``mmir init --dvc`` makes (docs: Experiments): ``dvc.yaml``, derived from the
repository's (shipped in the package as ``pipeline/templates/dvc-stages.yaml``, so the two are one definition), and
``mmir-version.yaml``, the mmir that runs its stages.

The derivation keeps every stage, command and output, and changes two things:

- **code**: the repository's stages depend on mmir's source (``src/...``); a project's list ``mmir-version.yaml`` as a
  params file instead (the version, the commit when installed from git, and ``code``: sha256 over every file of the
  installed package, :func:`mmir.workflow.versions.package_files`). The stage command (``mmir snakemake``) stops when
  the installed mmir is not that one (:func:`check_version`); ``python -m mmir.workflow.dvc_project`` rewrites both
  files for it, and the next ``dvc repro`` reruns the stages (and Snakemake in them the jobs of the reinstalled
  workflow's scripts, which are newer than their outputs).
- **params**: each stage lists the whole ``params.yaml``. A project's config names only what it uses, DVC stops when a
  listed key is missing (MissingParamsError), and a key added later must still rerun the stages that read it; Snakemake
  inside a stage reruns only the jobs whose own config slice changed.

A project's config must hold ``tasks`` and ``paths`` (the stages' ``foreach`` and the ``caches`` outputs read them) and
a ``root`` folder for each dataset (the ``prepare`` stages depend on it): ``mmir init --dvc`` writes the first two,
its content-addressed caches inside the project (:data:`PROJECT_CACHES`; DVC tracks no folder outside it).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

from mmir.core.errors import ConfigError
from mmir.core.io import write_text
from mmir.core.paths import PIPELINE

#: the repository's dvc.yaml, as the package ships it
STAGES = PIPELINE / "templates" / "dvc-stages.yaml"
#: the project's record of the mmir that runs its DVC stages (a params file of every stage)
VERSION_FILE = "mmir-version.yaml"
#: a DVC project's content-addressed caches: inside it (results/ is git-ignored), where the ``caches`` stage tracks them
PROJECT_CACHES = {"embedding_cache": "results/embeddings", "caption_cache": "results/cache/captions",
                  "generation_cache": "results/cache/generations.sqlite"}

HEADER = """\
# DVC stages of this project, written by `mmir init --dvc` from mmir {version}'s stages (the repository's dvc.yaml, in
# the package as mmir/pipeline/templates/dvc-stages.yaml, with its comments). Each stage asks Snakemake for the files
# of one stage family; it tracks the whole params.yaml and mmir-version.yaml (the mmir that runs it) instead of mmir's
# source. After installing another mmir, `python -m mmir.workflow.dvc_project` rewrites this file and
# mmir-version.yaml; the next `dvc repro` reruns the stages. docs: Experiments.
"""


def version_record() -> dict:
    """``{"mmir": {"version", "commit" (when known), "code": sha256 of the package's files}}`` of the installed mmir."""
    from mmir.core.gitinfo import mmir_version
    from mmir.workflow.versions import package_files

    v = mmir_version()
    code = hashlib.sha256(json.dumps(package_files(), sort_keys=True).encode()).hexdigest()
    return {"mmir": {"version": v["version"], **({"commit": v["commit"]} if v["commit"] else {}), "code": code}}


def project_stages(source: Path = STAGES) -> dict:
    """The project's ``dvc.yaml`` document: ``source``'s stages with ``src/...`` deps dropped and the params replaced
    by the whole ``params.yaml`` and :data:`VERSION_FILE` (see the module docstring)."""
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    for stage in doc["stages"].values():
        body = stage.get("do", stage)
        deps = [d for d in body.get("deps", []) if not d.startswith("src/")]
        if deps:
            body["deps"] = deps
        else:
            body.pop("deps", None)
        body["params"] = [{"params.yaml": None}, {VERSION_FILE: None}]
    return doc


def write_dvc_files(project: str | Path = ".") -> list[Path]:
    """Write the project's ``dvc.yaml`` (:func:`project_stages`) and :data:`VERSION_FILE` (:func:`version_record`);
    returns them."""
    from mmir.core.gitinfo import mmir_version

    project = Path(project)
    stages = project / "dvc.yaml"
    write_text(stages, HEADER.format(version=mmir_version()["version"])
               + yaml.safe_dump(project_stages(), sort_keys=False, width=120))
    version = project / VERSION_FILE
    write_text(version, "# the mmir that runs this project's DVC stages (`python -m mmir.workflow.dvc_project` writes it)\n"
               + yaml.safe_dump(version_record(), sort_keys=False))
    return [stages, version]


def check_version(project: str | Path = ".") -> None:
    """Nothing when ``project`` has no :data:`VERSION_FILE` (not a DVC project) or the installed mmir's code is the
    one it records.

    Raises:
        ConfigError: another mmir is installed (the message says what to run).
    """
    f = Path(project) / VERSION_FILE
    if not f.is_file():
        return
    recorded = (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("mmir") or {}
    now = version_record()["mmir"]
    if recorded.get("code") != now["code"]:
        raise ConfigError("mmir.code", f"this project's DVC stages were set up for mmir {recorded.get('version')} (code "
                          f"{str(recorded.get('code'))[:12]}), the installed mmir {now['version']} is other code (code "
                          f"{now['code'][:12]}): run `python -m mmir.workflow.dvc_project` to record it, then `dvc repro`", str(f))


def check_config(config: dict) -> None:
    """A project config that the derived stages can run on: ``tasks``, ``paths`` and a ``root`` per dataset.

    Raises:
        ConfigError: the first missing key.
    """
    for key in ("tasks", "paths"):
        if key not in config:
            raise ConfigError(key, "a DVC project's config needs it written out (dvc.yaml's stages read it)", "params.yaml")
    for name, ds in (config.get("datasets") or {}).items():
        if not isinstance(ds, dict) or "root" not in ds:
            raise ConfigError(f"datasets.{name}", "DVC's prepare stage depends on the dataset's folder (`root`): a DVC "
                              "project takes beir:, local: and trec: datasets", "params.yaml")


def _git(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, text=True)


def init_dvc(project: str | Path, remote: str | None = None, endpoint_url: str | None = None) -> list[Path]:
    """Make the project in ``project`` (its ``params.yaml`` written, :func:`check_config`) a DVC project: ``git init``
    unless it is in a git work tree, :func:`write_dvc_files`, then :func:`mmir.workflow.experiments.setup_dvc`
    (``dvc init``, autostage, the default remote). Returns the files written.

    Raises:
        MmirError: a ``git`` or ``dvc`` command that failed.
    """
    from mmir.core.errors import MmirError
    from mmir.workflow.experiments import setup_dvc

    project = Path(project)
    if _git(project, "rev-parse", "--is-inside-work-tree").returncode != 0:
        p = _git(project, "init", "-q")
        if p.returncode != 0:
            raise MmirError(f"git init (in {project}) failed: {p.stderr.strip()}")
    written = write_dvc_files(project)
    setup_dvc(project, remote, endpoint_url)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m mmir.workflow.dvc_project``: rewrite this project's dvc.yaml and mmir-version.yaml."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        print(__doc__)
        return 0 if set(argv) & {"-h", "--help"} else 2
    for f in write_dvc_files("."):
        print(f"wrote {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
