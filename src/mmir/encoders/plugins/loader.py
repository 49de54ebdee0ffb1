"""Finding, identifying and building a plug-in from its ``factory`` (``backend: plugin``).

``factory`` is ``package.module:function`` or the name of an entry point in the group ``mmir.plugins`` of an installed
distribution (``[project.entry-points."mmir.plugins"]`` in its pyproject.toml). Its identity (:class:`PluginIdentity`)
is what makes a cache key and the lineage name the code that made a vector: the distribution's name and version when
the module is a file of an installed distribution; for an editable install, that and the module's source sha256 (the
code changes without a new version); for a module outside any distribution, its source file's sha256. The identity is
found without importing the module itself (only its parent packages), so Snakemake can put it in a job's params when
it builds the DAG: a new version, or an edited file outside a distribution, reruns the job.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
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
    outside any distribution), ``editable`` (an editable install of that distribution) and the module's source file and
    its sha256 (``source_sha256``: set where the version does not pin the code: editable, or no distribution)."""

    factory: str
    target: str
    distribution: str | None
    version: str | None
    editable: bool
    source: str | None
    source_sha256: str | None

    @property
    def label(self) -> str:
        """``mmir-lsa==0.1.0``, ``mmir-lsa==0.1.0 (editable, sha256:<hex>)`` or ``sha256:<hex>``: for params, logs and
        the lineage."""
        if self.distribution is None:
            return f"sha256:{self.source_sha256}"
        pinned = f"{self.distribution}=={self.version}"
        return f"{pinned} (editable, sha256:{self.source_sha256})" if self.editable else pinned

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


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
    """Whether ``source`` is one of the files ``dist`` installed (its RECORD)."""
    for f in dist.files or ():
        if f.name == source.name and Path(dist.locate_file(f)).resolve() == source:
            return True
    return False


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
    dists = [ep_dist] if ep_dist is not None else [
        importlib.metadata.distribution(n) for n in dict.fromkeys(_top_level_distributions().get(module.split(".")[0], []))]
    for dist in dists:
        name, version = dist.metadata["Name"], dist.version
        if _holds(dist, source):
            return PluginIdentity(factory, target, name, version, False, str(source), None)
        root = _editable_root(dist)
        if root is not None and source.is_relative_to(root):
            return PluginIdentity(factory, target, name, version, True, str(source), _file_sha256(source))
    return PluginIdentity(factory, target, None, None, False, str(source), _file_sha256(source))


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
