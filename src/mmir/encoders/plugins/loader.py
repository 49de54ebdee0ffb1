"""Finding, identifying and building a plug-in from its ``factory`` (``backend: plugin``).

``factory`` is ``package.module:function`` or the name of an entry point in the group ``mmir.plugins`` of an installed
distribution (``[project.entry-points."mmir.plugins"]`` in its pyproject.toml). Its identity (:class:`PluginIdentity`)
is what makes a cache key and the lineage name the code that made a vector: the sha256 of the code that is imported
(every source and extension file of the module's outermost regular package, or the module file alone), plus the
distribution's name and version when an installed distribution lists that file (its ``RECORD``, or a legacy
``installed-files.txt``; an ``*.egg-info`` that a build left in a source folder lists it in ``SOURCES.txt`` only, and
is no install) or is an editable install of its folder. Two metadata folders of one name that both list the file
(``pip install --target --upgrade`` leaves the old one) are named instead of one picked. The identity is found without
importing the module itself (only its parent packages), so Snakemake can put it in a job's params when it builds the
DAG: an edited file, or a new version, reruns the job.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from mmir.config.models import PLUGIN_GROUP
from mmir.core.errors import MmirError


class PluginError(MmirError):
    """A plug-in that cannot be found, built or called, or that returned a bad value; the message names the config
    entry (``systems.<name>`` or ``rerankers.<name>``), the factory and, for an output, the batch."""


@dataclass(frozen=True)
class PluginIdentity:
    """Which code a plug-in is: ``target`` (``module:function``), its ``distribution`` and ``version`` (None for a module
    outside any installed distribution; ``version`` None too when ``conflict``), ``editable`` (an editable install of
    that distribution), the module's source file and ``source_sha256``: the sha256 of the code imported
    (:func:`code_sha256`), always set. ``conflict``: why no version is named (several metadata folders of the
    distribution list the file), else None."""

    factory: str
    target: str
    distribution: str | None
    version: str | None
    editable: bool
    source: str | None
    source_sha256: str | None
    conflict: str | None = None

    @property
    def label(self) -> str:
        """``mmir-lsa==0.1.0 (sha256:<hex>)``, ``mmir-lsa==0.1.0 (editable, sha256:<hex>)``, ``mmir-lsa==? (<conflict>;
        sha256:<hex>)`` or ``sha256:<hex>``: for params, logs, the lineage and MLflow."""
        code = f"sha256:{self.source_sha256}"
        if self.distribution is None:
            return code
        if self.conflict:
            return f"{self.distribution}==? ({self.conflict}; {code})"
        return f"{self.distribution}=={self.version} ({'editable, ' if self.editable else ''}{code})"

    def key(self) -> dict[str, Any]:
        """The identity as cache-key fields (the source path left out: the same file elsewhere makes the same vectors)."""
        return {"target": self.target, "distribution": self.distribution, "version": self.version, "editable": self.editable,
                "source_sha256": self.source_sha256}


def _error(where: str, factory: str, message: str) -> PluginError:
    return PluginError(f"{where}: plug-in {factory!r}: {message}")


def entry_point_target(name: str, where: str = "plugin") -> tuple[str, importlib.metadata.Distribution | None]:
    """``(module:attr, distribution)`` of the entry point ``name`` in the group ``mmir.plugins``.

    Raises:
        PluginError: no such entry point (the message lists the installed ones), or several distributions name it.
    """
    found = importlib.metadata.entry_points(group=PLUGIN_GROUP, name=name)
    if not found:
        known = sorted({ep.name for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP)})
        raise _error(where, name, f"no entry point {name!r} in the group {PLUGIN_GROUP} (installed: {', '.join(known) or 'none'}); "
                     "install its distribution, or give 'package.module:function'")
    dists = sorted({ep.dist.name for ep in found if ep.dist is not None})
    if len(found) > 1:
        raise _error(where, name, f"entry point {name!r} is named by several distributions ({', '.join(dists)}): give "
                     "'package.module:function' instead")
    (ep,) = found
    return ep.value.replace(" ", ""), ep.dist


def _metadata_folders() -> tuple[tuple[str, int], ...]:
    """``(folder, mtime)`` of the ``sys.path`` folders holding distribution metadata (``*.dist-info``, ``*.egg-info``):
    all that :func:`importlib.metadata.packages_distributions` reads (a folder's mtime changes when pip adds, renames or
    removes a distribution in it)."""
    out = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                if any(e.name.endswith((".dist-info", ".egg-info")) for e in it):
                    out.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:  # a missing folder or a zip file: nothing pip installs into
            continue
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _packages_distributions(folders: tuple[tuple[str, int], ...]) -> Mapping[str, list[str]]:
    """``importlib.metadata.packages_distributions()`` (half a second on a large venv), once per set of metadata folders."""
    return importlib.metadata.packages_distributions()


def _top_level_distributions() -> Mapping[str, list[str]]:
    """Top-level module name -> names of the distributions that install it."""
    return _packages_distributions(_metadata_folders())


@functools.lru_cache(maxsize=4096)
def _file_sha256(path: Path, stamp: tuple[int, int]) -> str:
    """sha256 of a file; ``stamp`` (size, mtime in ns) keys the cache, so an edited file is read again."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: the files of a package that are code Python imports (sources and extension modules; bytecode is derived)
_CODE_SUFFIXES = tuple(importlib.machinery.SOURCE_SUFFIXES + importlib.machinery.EXTENSION_SUFFIXES)


def code_root(module: str, source: Path) -> Path:
    """What ``module`` (found at ``source``) imports as its own code: the folder of its outermost regular package (a
    folder with ``__init__.py``; a namespace package above it is shared with other distributions), or ``source``
    itself for a top-level module."""
    levels = len(module.split(".")) - (0 if source.name == "__init__.py" else 1)
    root, folder = source, source.parent
    for _ in range(levels):
        if not (folder / "__init__.py").is_file():
            break
        root, folder = folder, folder.parent
    return root


def code_sha256(root: Path) -> str:
    """sha256 of ``root`` (a file) or of every source and extension file under it (``__pycache__`` left out): each
    file's path relative to ``root`` and its sha256, in path order. Same code, same hash, wherever it lies."""
    if root.is_file():
        return _file_sha256(root, _stamp(root))
    files = sorted(p for p in root.rglob("*") if p.name.endswith(_CODE_SUFFIXES) and "__pycache__" not in p.parts
                   and p.is_file())
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(root).as_posix()}\0{_file_sha256(f, _stamp(f))}\n".encode())
    return digest.hexdigest()


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _editable_root(dist: importlib.metadata.Distribution) -> Path | None:
    """The project folder of an editable install (PEP 610 ``direct_url.json``), else None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not (info.get("dir_info") or {}).get("editable"):
        return None
    url = urlsplit(info.get("url", ""))
    return Path(unquote(url.path)).resolve() if url.scheme == "file" else None


def _holds(dist: importlib.metadata.Distribution, source: Path) -> bool:
    """Whether ``source`` is one of the files ``dist`` installed: its ``RECORD`` (or a legacy install's
    ``installed-files.txt``) lists it. An ``*.egg-info`` a build left in a source folder has neither (its
    ``SOURCES.txt`` lists the sources it was built from): it installed nothing."""
    if not (dist.read_text("RECORD") or dist.read_text("installed-files.txt")):
        return False
    for f in dist.files or ():
        if f.name == source.name and Path(dist.locate_file(f)).resolve() == source:
            return True
    return False


def _folder(dist: importlib.metadata.Distribution) -> Path | None:
    """The metadata folder of ``dist`` (PathDistribution's; None for other finders)."""
    path = getattr(dist, "_path", None)
    return Path(path).resolve() if path is not None else None


def _installed(name: str, source: Path) -> tuple[str | None, str | None]:
    """``(version, conflict)`` of distribution ``name`` for the imported ``source``: the version of the one metadata
    folder that lists it; None and why when several do (``pip install --target --upgrade`` leaves the old folder
    beside the new one: which one is the code cannot be told); ``(None, None)`` when none does."""
    by_folder = {}  # one entry per metadata folder: a folder on sys.path twice is found twice
    for d in importlib.metadata.distributions(name=name):
        if _holds(d, source):
            by_folder.setdefault(_folder(d) or (d.metadata["Name"], d.version), d)
    holding = list(by_folder.values())
    if len(holding) > 1:
        folders = ", ".join(sorted(f.name if (f := _folder(d)) else f"{d.metadata['Name']} {d.version}" for d in holding))
        return None, f"{len(holding)} metadata folders list its files: {folders}; remove the stale one"
    return (holding[0].version, None) if holding else (None, None)


def identify(factory: str, where: str = "plugin") -> PluginIdentity:
    """The :class:`PluginIdentity` of ``factory``, found without importing the plug-in's module.

    Raises:
        PluginError: an unknown entry point, or a module that cannot be found (naming ``where`` and the factory).
    """
    ep_dist = None
    target = factory
    if ":" not in factory:
        target, ep_dist = entry_point_target(factory, where)
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise _error(where, factory, f"{target!r} is not 'package.module:function'")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:  # a parent package missing or broken
        raise _error(where, factory, f"module {module!r} cannot be found ({type(exc).__name__}: {exc})") from exc
    if spec is None:
        raise _error(where, factory, f"module {module!r} is not installed nor on the Python path (PYTHONPATH)")
    source = Path(spec.origin).resolve() if spec.origin and spec.has_location else None
    if source is None or not source.is_file():
        raise _error(where, factory, f"module {module!r} has no source file to identify it by")
    code = code_sha256(code_root(module, source))
    names = [ep_dist.metadata["Name"]] if ep_dist is not None else list(
        dict.fromkeys(_top_level_distributions().get(module.split(".")[0], [])))
    for name in names:
        version, conflict = _installed(name, source)
        if version or conflict:
            return PluginIdentity(factory, target, name, version, False, str(source), code, conflict)
    for name in names:
        for dist in importlib.metadata.distributions(name=name):
            root = _editable_root(dist)
            if root is not None and source.is_relative_to(root):
                return PluginIdentity(factory, target, dist.metadata["Name"], dist.version, True, str(source), code)
    return PluginIdentity(factory, target, None, None, False, str(source), code)


def load(factory: str, options: Mapping[str, Any], where: str = "plugin") -> tuple[Any, PluginIdentity]:
    """Import the factory, call it with ``options`` as keyword arguments; returns ``(plug-in, identity)``.

    Raises:
        PluginError: the factory cannot be found or imported, is not callable, or raised (its error chained).
    """
    identity = identify(factory, where)
    module, _, attr = identity.target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 (a plug-in's import may raise anything)
        raise _error(where, factory, f"importing {module!r} raised {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _error(where, factory, f"{module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _error(where, factory, f"{identity.target} is a {type(obj).__name__}, not a callable")
    try:
        plugin = obj(**dict(options))
    except Exception as exc:  # noqa: BLE001
        raise _error(where, factory, f"{identity.target}(**options) raised {type(exc).__name__}: {exc}") from exc
    return plugin, identity
