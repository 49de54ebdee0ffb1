"""Which mmir ran a project, and what a new one changes: ``mmir run`` compares the installed package with the record of
the project's last run (``.snakemake/mmir/code.json``: version, commit, sha256 of every file of the package), says what
changed, and forces the jobs of the rules whose code changed (``snakemake --forcerun RULES``).

A rule's code is every mmir module its rule module imports, directly or not (the import graph of
:func:`grimp.build_graph`, imports inside functions included), and the data files (prompts, templates) those modules
name; the workflow's own files (``pipeline/``) belong to every rule. Forced rules stay pending
in the record until a run without targets (or with the same targets) ends well, so a failed or partial run loses none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from mmir.core.gitinfo import mmir_version
from mmir.core.io import write_text

PACKAGE = Path(__file__).resolve().parents[1]
RECORD = Path(".snakemake") / "mmir" / "code.json"


def package_files(root: Path = PACKAGE) -> dict[str, str]:
    """``{path relative to the package's parent (mmir/...): sha256}`` of every file of the package (caches left out)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            p = Path(dirpath) / name
            out[p.relative_to(root.parent).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Files added, removed or changed between two :func:`package_files`."""
    return sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))


def _modules_of(path: str) -> set[str]:
    """The modules a package file is code of: ``mmir/a/b.py`` -> ``mmir.a.b``; a data file (a prompt, a template) ->
    the modules of the package holding its folder whose source names the file or its folder (those that read it)."""
    p = Path(path)
    if p.suffix == ".py":
        parts = p.with_suffix("").parts
        return {".".join(parts[:-1] if parts[-1] == "__init__" else parts)}
    package = p.parent
    while package.parts and not (PACKAGE.parent / package / "__init__.py").exists():
        package = package.parent
    folder = p.relative_to(package).parts[0] if p.parent != package else p.name
    out = set()
    for src in (PACKAGE.parent / package).glob("*.py"):
        text = src.read_text(encoding="utf-8", errors="replace")
        if p.name in text or folder in text:
            out.add(".".join(package.parts) if src.stem == "__init__" else ".".join((*package.parts, src.stem)))
    return out


def touched_rules(changed: Iterable[str], rules: Iterable[str] | None = None) -> list[str]:
    """The rules whose code (see the module docstring) holds one of the ``changed`` package files."""
    from mmir.workflow.rules import RULES

    changed = list(changed)
    names = list(rules if rules is not None else RULES)
    if not changed:
        return []
    if any(f.startswith("mmir/pipeline/") for f in changed):
        return sorted(names)
    import grimp

    graph = grimp.build_graph("mmir", cache_dir=None)
    modules = set().union(*(_modules_of(f) for f in changed))
    out = []
    for name in names:
        spec = RULES[name].run.__module__
        if modules & (graph.find_upstream_modules(spec) | {spec}):
            out.append(name)
    return sorted(out)


def planned_rules(args: list[str]) -> set[str] | None:
    """The rules with a job in the plan of ``snakemake ARGS`` when every job runs (a dry run), None when it fails.
    ``--forcerun`` may name only those: Snakemake evaluates the inputs of a forced rule without wildcards even when
    the config has no job of it (``essentiality_report`` without an ``essentiality`` section fails)."""
    import subprocess

    from mmir.workflow.resume import SNAKEMAKE, workflow_args

    at = args.index("--") if "--" in args else len(args)
    dry = [*args[:at], "--dry-run", "--forceall", "--nolock", "--quiet", "rules", *args[at:]]
    proc = subprocess.run([*SNAKEMAKE, *workflow_args(dry)], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return {w[0] for w in map(str.split, proc.stdout.splitlines()) if len(w) == 2 and w[1].isdigit() and w[0] != "total"}


def load_record(project: Path) -> dict | None:
    f = project / RECORD
    return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None


def save_record(project: Path, files: Mapping[str, str], pending: Iterable[str]) -> None:
    write_text(project / RECORD, json.dumps({"mmir": mmir_version(), "files": dict(files), "pending": sorted(set(pending))},
                                            indent=1) + "\n")


def describe(record: Mapping | None) -> str:
    """``mmir 0.1.0 (commit abc…)`` of a :func:`mmir.core.gitinfo.mmir_version` record."""
    if not record:
        return "an unknown mmir"
    commit = record.get("commit")
    return f"mmir {record.get('version')}" + (f" (commit {commit[:12]}{'-dirty' if record.get('dirty') else ''})" if commit else "")


def plan(project: Path) -> tuple[list[str], list[str], str | None]:
    """``(rules to force, the package files now, what changed as one message or None)`` for a run in ``project``: the
    rules pending in its record and those whose code (:func:`touched_rules`) differs from the record's."""
    files = package_files()
    record = load_record(project)
    if record is None:
        return [], files, None
    changed = changed_files(record.get("files") or {}, files)
    forced = sorted(set(record.get("pending") or []) | set(touched_rules(changed)))
    if not changed and not forced:
        return [], files, None
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    msg = (f"this project last ran with {describe(record.get('mmir'))}; this is {describe(mmir_version())}"
           + (f": {len(changed)} files of the package differ ({shown})" if changed else "; rules left to rerun from then"))
    return forced, files, msg
