"""MLflow run hierarchy: a parent run per task or stage, one child per unit (task, dataset, domain, system, ...),
one current run per unit: a rerun that changes nothing logs nothing, a recomputed unit replaces its run and the
replaced one stays reachable under "Deleted" (:func:`log_tree`).

Store: ``MLFLOW_TRACKING_URI``, else ``mlflow.tracking_uri`` of params.yaml, else ``mlflow.db`` (SQLite).
Artifacts: a local store's go to the project's ``mlartifacts/``; a tracking server's (``http(s)://``, e.g. ``mlflow
server --artifacts-destination ...``) to the server's artifact store, so that every client can download them
(:func:`artifact_location`). A server that cannot be reached stops the logging at once with one line
(:class:`TrackingError`); the job's results stay and a rerun logs them. Under ``dvc exp run`` every unit key carries
the experiment's name (``DVC_EXP_NAME``): each experiment keeps its own current runs (:func:`dvc_experiment`).
Nothing from the environment is logged, so API keys never reach the store. README: "Outputs and tracking";
docs: Experiments.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.config.models import MlflowConfig, fill, parse_slice
from mmir.core import paths
from mmir.core.errors import MmirError
from mmir.core.gitinfo import commit_label, mmir_version


class TrackingError(MmirError):
    """The MLflow store cannot be reached; nothing was logged by this call."""


def _sections(config: Mapping[str, Any], *names: str):
    """The sections ``names`` of a config or params slice, typed (:class:`~mmir.config.models.ParamsSlice`; an absent
    one is ``None``). Only these are parsed: a caller's slice may hold keys of its own step."""
    return parse_slice({k: v for k, v in config.items() if k in names})


def _mlflow(config: Mapping[str, Any]) -> MlflowConfig:
    """The ``mlflow`` section of ``config`` (absent: the section's defaults)."""
    return _sections(config, "mlflow").mlflow or MlflowConfig()


def tracking_uri(config: Mapping[str, Any], project_dir: str | Path = ".") -> str:
    """The MLflow store URI to use (see module docstring)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    configured = _mlflow(config).tracking_uri
    if configured:
        return configured
    return f"sqlite:///{(Path(project_dir).resolve() / 'mlflow.db')}"


def redact(uri: str) -> str:
    """``uri`` with any password in its user-info replaced by ``***`` (safe to log)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return uri


def run_tags(commit: str, source: str) -> dict[str, str]:
    """MLflow's standard tags for a run of this project: the project's commit (``mlflow.source.git.commit``; the UI's
    Version column) and what ran it (``mlflow.source.name``, shown as Source), plus our ``git_commit``, and the mmir
    that computed it (``mmir.version``: version and, where known, commit; :func:`mmir.core.gitinfo.mmir_version`)."""
    from mlflow.utils.mlflow_tags import MLFLOW_GIT_COMMIT, MLFLOW_SOURCE_NAME, MLFLOW_SOURCE_TYPE

    return {MLFLOW_GIT_COMMIT: commit.removesuffix("-dirty"), MLFLOW_SOURCE_NAME: source, MLFLOW_SOURCE_TYPE: "PROJECT",
            "git_commit": commit, MMIR_VERSION_TAG: mmir_version()["label"]}


def log_dataset_input(prepared_dir: str | Path, name: str) -> None:
    """``mlflow.log_input`` of a prepared domain (the run's Dataset column): its folder as the source and the
    sha256 of its ``prepare.json`` (counts, source files, revision) as the digest. Nothing when it is absent."""
    import hashlib

    import mlflow
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset

    report = Path(prepared_dir) / "prepare.json"
    if not report.is_file():
        return
    digest = hashlib.sha256(report.read_bytes()).hexdigest()[:16]
    source = resolve_dataset_source(str(Path(prepared_dir).resolve()))  # a local folder: a file source
    mlflow.log_input(MetaDataset(source=source, name=name, digest=digest), context="prepared")


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}`` (lists as JSON), values cut to MLflow's 6000 chars."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out |= flatten(v, key + ".")
        else:
            out[key] = (json.dumps(v) if isinstance(v, (list, tuple)) else str(v))[:6000]
    return out


EXPERIMENT_KIND = "mlflow.experimentKind"


def _mlflow_key(measure: str) -> str:
    return measure.replace("@", "_at_")  # MLflow metric names allow [A-Za-z0-9_./ -]


@contextlib.contextmanager
def _store_lock(project_dir: Path):
    """One writer at a time: parallel jobs creating a fresh SQLite store would race in MLflow's migrations."""
    from filelock import FileLock

    with FileLock(str(project_dir / ".mlflow.lock"), timeout=600):
        yield


def seed_store(uri: str, cache: str | Path | None = None) -> bool:
    """Start a new SQLite store (``uri``: ``sqlite:///<file>``, the file absent) as a copy of an empty one that MLflow
    made once for its version under ``cache`` (default ``~/.cache/mmir/mlflow``): MLflow's schema migrations take
    seconds on every new store, a copy milliseconds. Its Default experiment gets the artifact location and creation
    time MLflow would give it here. Returns whether it seeded; an existing store or another backend is left to MLflow."""
    import shutil
    import sqlite3
    import time

    db = Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None
    if db is None or db.exists():
        return False
    import mlflow

    cache = Path(cache) if cache is not None else Path.home() / ".cache" / "mmir" / "mlflow"
    template = cache / f"empty-{mlflow.__version__}.db"
    if not template.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".{template.name}.{os.getpid()}.tmp"
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp}").search_experiments()
        os.replace(tmp, template)
    db.parent.mkdir(parents=True, exist_ok=True)
    part = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    shutil.copyfile(template, part)
    now = int(time.time() * 1000)
    with contextlib.closing(sqlite3.connect(part)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                    "WHERE experiment_id = 0", (str(db.parent.resolve() / "mlruns" / "0"), now, now))
    os.replace(part, db)
    return True


#: Store URI schemes of a tracking server: it places the artifacts itself (``--artifacts-destination``).
SERVER_SCHEMES = ("http", "https", "databricks")


def artifact_location(uri: str, project_dir: Path) -> str | None:
    """Where a new MLflow experiment keeps its artifacts: ``None`` (the server's artifact store, which it serves to
    every client) for a tracking server (:data:`SERVER_SCHEMES`), else the project's ``mlartifacts/`` folder."""
    from urllib.parse import urlsplit

    return None if urlsplit(uri).scheme in SERVER_SCHEMES else (project_dir / "mlartifacts").as_uri()


def check_server(uri: str, timeout: float = 10.0) -> None:
    """Raise :class:`TrackingError` (one line: the redacted URI and why) when ``uri`` is an ``http(s)`` tracking server
    that does not answer its ``/health`` endpoint within ``timeout`` seconds (MLflow's own client would retry for
    minutes). Any answer passes (a proxy's 401 too: MLflow reports what follows); other stores are not checked."""
    from urllib.parse import urlsplit

    import requests

    if urlsplit(uri).scheme not in ("http", "https"):
        return
    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as exc:
        why = type(exc).__name__
        raise TrackingError(f"MLflow tracking server {redact(uri)} is not reachable ({why}): nothing was logged, this "
                            "job's results are kept; run it again when the server is up to log them") from None


def dvc_experiment() -> dict[str, str]:
    """``{"mmir.dvc_exp": name, "mmir.dvc_baseline": rev}`` when this runs under ``dvc exp run`` (DVC sets
    ``DVC_EXP_NAME`` and ``DVC_EXP_BASELINE_REV`` for its stages), else ``{}``."""
    name = os.environ.get("DVC_EXP_NAME")
    if not name:
        return {}
    return {"mmir.dvc_exp": name, **({"mmir.dvc_baseline": os.environ["DVC_EXP_BASELINE_REV"]}
                                     if os.environ.get("DVC_EXP_BASELINE_REV") else {})}


def _experiment(config: dict, project_dir: Path) -> str:
    import mlflow

    uri = tracking_uri(config, project_dir)
    check_server(uri)
    seed_store(uri)
    mlflow.set_tracking_uri(uri)
    name = _mlflow(config).experiment
    exp = mlflow.get_experiment_by_name(name)
    kind = {EXPERIMENT_KIND: "custom_model_development"}  # the UI opens on the runs table, not on GenAI traces
    if exp is None:
        return mlflow.create_experiment(name, artifact_location=artifact_location(uri, project_dir), tags=kind)
    if exp.tags.get(EXPERIMENT_KIND) != kind[EXPERIMENT_KIND]:
        mlflow.MlflowClient().set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND, kind[EXPERIMENT_KIND])
    return exp.experiment_id


def run_commits(config: dict, run_ids: list[str], project_dir: str | Path = ".") -> dict[str, str]:
    """``{run id: its git_commit tag}`` of MLflow runs of this store (runs not found, or without the tag, are left
    out; a store that cannot be read gives ``{}``, logged as a warning)."""
    if not run_ids:
        return {}
    try:
        import mlflow

        mlflow.set_tracking_uri(tracking_uri(config, project_dir))
        client = mlflow.MlflowClient()
        out = {}
        for rid in run_ids:
            try:
                commit = client.get_run(rid).data.tags.get("git_commit")
            except mlflow.exceptions.MlflowException:
                continue
            if commit:
                out[rid] = commit
        return out
    except Exception as exc:  # the report still builds; the table then names no commit of its own
        logging.getLogger("mmir.tracking").warning("could not read the MLflow runs' commits from %s: %s",
                                                   redact(tracking_uri(config, project_dir)), exc)
        return {}


#: Tags of a run that say which code logged it, not what was computed: left out of its content hash.
MMIR_VERSION_TAG = "mmir.version"
COMMIT_TAGS = ("mlflow.source.git.commit", "git_commit", MMIR_VERSION_TAG)
UNIT_TAG = "mmir.unit"  # the unit's deterministic key, e.g. ``task1/task1/os/stat/bm25``
GROUP_TAG = "mmir.group"  # the parent's key hashed: the parent and its children's runs, every version
CONTENT_TAG = "mmir.content"  # sha256 of what the run holds (see UnitRun.content)
SUPERSEDED_TAG = "mmir.superseded_by"  # on a replaced (deleted) run: the run that replaced it
SUPERSEDES_TAG = "mmir.supersedes"  # on a current run: the run it replaced


def _file_digest(path: str | Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class UnitRun:
    """One MLflow run to log: a unit (``key`` deterministic, e.g. ``task1/task1/os/stat/bm25``) with its tags, params
    (strings), metrics, artifact files (``artifacts``; ``artifact_dirs`` = ``{artifact path: folder}``) and prepared
    domain (``dataset`` = ``(prepared dir, name)``, its ``prepare.json`` the run's dataset input)."""

    key: str
    name: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    artifact_dirs: dict[str, str] = field(default_factory=dict)
    dataset: tuple[str, str] | None = None

    def content(self) -> str:
        """sha256 of what the run holds: name, tags (less :data:`COMMIT_TAGS`), params, metrics, the bytes of each
        artifact and of the dataset input. Equal content = nothing was recomputed: the existing run stays."""
        import hashlib

        prep = Path(self.dataset[0]) / "prepare.json" if self.dataset else None
        doc = {"name": self.name, "tags": {k: v for k, v in sorted(self.tags.items()) if k not in COMMIT_TAGS},
               "params": dict(sorted(self.params.items())), "metrics": dict(sorted(self.metrics.items())),
               "artifacts": [(Path(a).name, _file_digest(a)) for a in self.artifacts],
               "artifact_dirs": {d: sorted((str(f.relative_to(folder)), _file_digest(f)) for f in Path(folder).rglob("*")
                                           if f.is_file()) for d, folder in sorted(self.artifact_dirs.items())},
               "dataset": [self.dataset[1], _file_digest(prep)] if prep is not None and prep.is_file() else None}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8")).hexdigest()

    def log(self) -> None:
        """Params, dataset input, metrics and artifacts into the active run."""
        import mlflow

        mlflow.log_params(self.params)
        if self.dataset:
            log_dataset_input(*self.dataset)
        mlflow.log_metrics(self.metrics)
        for a in self.artifacts:
            mlflow.log_artifact(a)
        for dest, folder in self.artifact_dirs.items():
            mlflow.log_artifacts(folder, artifact_path=dest)


def _group_runs(client, exp_id: str, group: str) -> list:
    """The active runs of one parent key (the parent's and its children's, any version)."""
    from mlflow.entities import ViewType

    runs, token = [], None
    while True:
        page = client.search_runs([exp_id], filter_string=f"tags.`{GROUP_TAG}` = '{group}'",
                                  run_view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token)
        runs += list(page)
        token = page.token
        if not token:
            return runs


def log_tree(exp_id: str, parent: UnitRun, children: list[UnitRun]) -> dict:
    """Log ``parent`` and its ``children`` so that the store holds one current (active) run per unit key.

    A unit whose content (:meth:`UnitRun.content`) equals its current run's is not logged again: a rerun that changes
    nothing adds no run and returns the same ids. Otherwise a new parent run is made; an unchanged child's run moves
    under it (its ``mlflow.parentRunId``), a changed or new child gets a new run. Every replaced run (the old parent,
    a changed child, a unit no longer logged) gets the tag ``mmir.superseded_by`` (its successor; the new parent for a
    unit that is gone) and is deleted with ``MlflowClient.delete_run``: the UI lists it under "Deleted" and
    ``restore_run`` brings it back; the new run's ``mmir.supersedes`` names the run it replaced. Caller holds the
    store lock. Under ``dvc exp run`` each key and run name gets ``@<experiment name>`` and the runs its tags
    (:func:`dvc_experiment`). Returns ``{"parent": run id, "children": [run ids, in order]}``.
    """
    import dataclasses
    import hashlib

    import mlflow

    client = mlflow.MlflowClient()
    scope = dvc_experiment()
    if scope:  # under `dvc exp run`: each experiment keeps its own current run per unit

        def scoped(u: UnitRun) -> UnitRun:
            at = f"@{scope['mmir.dvc_exp']}"
            return dataclasses.replace(u, key=u.key + at, name=u.name + at, tags={**u.tags, **scope})

        parent, children = scoped(parent), [scoped(c) for c in children]
    group = hashlib.sha256(parent.key.encode("utf-8")).hexdigest()[:32]
    kids = [(c, c.content()) for c in children]
    p_content = hashlib.sha256(json.dumps([parent.content(), [(c.key, h) for c, h in kids]]).encode("utf-8")).hexdigest()
    current: dict[str, list] = {}
    for r in _group_runs(client, exp_id, group):
        current.setdefault(r.data.tags.get(UNIT_TAG), []).append(r)

    def same(key: str, content: str):  # a run that ended well (a failed log is never reused: it is replaced)
        return next((r for r in current.get(key, []) if r.data.tags.get(CONTENT_TAG) == content
                     and r.info.status == "FINISHED"), None)

    old_parent = same(parent.key, p_content)
    kept = [same(c.key, h) for c, h in kids]
    if old_parent is not None and all(r is not None and r.data.tags.get("mlflow.parentRunId") == old_parent.info.run_id
                                      for r in kept):
        return {"parent": old_parent.info.run_id, "children": [r.info.run_id for r in kept]}

    def tags(u: UnitRun, content: str) -> dict[str, str]:
        prev = current.get(u.key, [])
        return {**u.tags, UNIT_TAG: u.key, GROUP_TAG: group, CONTENT_TAG: content,
                **({SUPERSEDES_TAG: ",".join(r.info.run_id for r in prev)} if prev else {})}

    ids: dict = {"parent": None, "children": []}
    successor: dict[str, str] = {}
    with mlflow.start_run(experiment_id=exp_id, run_name=parent.name, tags=tags(parent, p_content)) as run:
        ids["parent"] = successor[parent.key] = run.info.run_id
        parent.log()
        for (c, h), old in zip(kids, kept):
            if old is not None:  # unchanged: the same run, now under the new parent
                client.set_tag(old.info.run_id, "mlflow.parentRunId", run.info.run_id)
                ids["children"].append(old.info.run_id)
                continue
            with mlflow.start_run(experiment_id=exp_id, nested=True, run_name=c.name, tags=tags(c, h)) as child:
                c.log()
                ids["children"].append(successor.setdefault(c.key, child.info.run_id))
    keep = {ids["parent"], *ids["children"]}
    for key, runs in current.items():
        for r in runs:
            if r.info.run_id not in keep:
                client.set_tag(r.info.run_id, SUPERSEDED_TAG, successor.get(key, ids["parent"]))
                client.delete_run(r.info.run_id)
    return ids


def log_units(config: dict, stage: str, params: dict, units: list[dict], project_dir: str | Path = ".") -> dict:
    """A parent run for a generative stage (``rag``, ``m2rag``, ``mmdr``) and one child per unit, kept current as
    :func:`log_tree` says (a rerun that changes nothing logs nothing).

    Args:
        units: ``{"name", "tags", "metrics", "artifacts", "artifact_dirs"}``; ``None``/NaN metrics are left out.

    Returns:
        ``{"parent": run id, "children": [run ids]}``.
    """
    project_dir = Path(project_dir).resolve()
    commit = commit_label(project_dir)
    flat = flatten(params)
    parent = UnitRun(key=stage, name=stage, params=flat,
                     tags={"mmir.level": "invocation", "mmir.task": stage, **run_tags(commit, f"mmir {stage}")})
    children = []
    for u in units:
        metrics = {}
        for k, v in u.get("metrics", {}).items():
            try:
                metrics[k.replace(".", "_").replace("@", "_at_")] = float(v)
            except (TypeError, ValueError):
                continue
        ds, dom = u.get("tags", {}).get("dataset"), u.get("tags", {}).get("domain")
        children.append(UnitRun(
            key=f"{stage}/{u['name']}", name=u["name"], params=flat,
            tags={"mmir.level": "unit", **run_tags(commit, f"mmir {stage}"), "task": stage,
                  **{k: str(v) for k, v in u.get("tags", {}).items()}},
            metrics={k: v for k, v in metrics.items() if v == v}, artifacts=[str(a) for a in u.get("artifacts", [])],
            artifact_dirs={d: str(f) for d, f in u.get("artifact_dirs", {}).items()},
            dataset=(paths.PREPARED.format(dataset=ds, domain=dom), f"{ds}/{dom}") if ds and dom else None))
    with _store_lock(project_dir):  # holds the store lock (see _store_lock)
        return log_tree(_experiment(config, project_dir), parent, children)


def log_rag(config: dict, summaries: list[dict], artifacts: list[list[str]], project_dir: str | Path = ".") -> dict:
    """A parent run for the RAG stage and a child per (dataset, domain, setting): params = the rag config and
    the generator/judge settings, metrics = score, counts, judge failures, agreement, tokens; artifacts = the
    answers and judgments. Returns ``{"parent", "children"}``."""
    c = _sections(config, "rag", "generators")
    params = {"rag": fill(c.rag), "generator": fill(c.generators[c.rag.generator]), "judge": fill(c.generators[c.rag.judge])}
    units = [{"name": f"rag/{s['dataset']}/{s['domain']}/{s['setting']}",
              "tags": {"rule": "rag", "dataset": s["dataset"], "domain": s["domain"], "setting": s["setting"],
                       "skipped": str(s.get("skipped") or "")},
              "metrics": flatten({k: v for k, v in s.items()
                                  if k not in ("dataset", "domain", "setting", "generator", "judge", "skipped")}),
              "artifacts": arts} for s, arts in zip(summaries, artifacts)]
    return log_units(config, "rag", params, units, project_dir)


def external_run_tags(run_file: str | Path | None) -> dict[str, str]:
    """``external_run_file`` and ``external_run_sha256``: the file a ``kind: run`` unit's ranking comes from, read from
    its retrieve stats (``<run>.stats.json``; a reranked run: its first stage's). None for mmir's own runs."""
    stats = Path(str(run_file)).with_suffix(".stats.json") if run_file else None
    d = json.loads(stats.read_text(encoding="utf-8")) if stats is not None and stats.is_file() else {}
    if "external_sha256" in d:
        return {"external_run_file": str(d["external_file"]), "external_run_sha256": str(d["external_sha256"])}
    return external_run_tags(d["first_stage"]) if d.get("first_stage") else {}


def log_invocation(config: dict, task: str, entries: list[dict], project_dir: str | Path = ".",
                   run_name: str | None = None, parent_metrics: dict[str, float] | None = None) -> dict:
    """A parent run for this task (``run_name``, default the task) and a child per entry, kept current as
    :func:`log_tree` says; returns ``{"parent", "children"}`` ids."""
    project_dir = Path(project_dir).resolve()
    commit = commit_label(project_dir)
    name = run_name or f"{task}"
    evaluation = _sections(config, "evaluation").evaluation
    protocol = evaluation.protocol
    parent = UnitRun(key=name, name=name,
                     tags={"mmir.level": "invocation", "mmir.task": task, **run_tags(commit, f"mmir {task}")},
                     params={"task": task, "protocol": protocol, "top_k": str(evaluation.top_k),
                             "systems": ",".join(sorted({e["system"] for e in entries})),
                             "datasets": ",".join(sorted({e["dataset"] for e in entries}))},
                     metrics={k: float(v) for k, v in (parent_metrics or {}).items()})
    children = []
    for e in entries:
        summary = json.loads(Path(e["metrics_json"]).read_text(encoding="utf-8"))
        t = e.get("task", task)
        tags = {"mmir.level": "unit", **run_tags(commit, f"mmir {task} score"), "rule": "score",
                "wildcards": json.dumps({"task": t, "dataset": e["dataset"], "domain": e["domain"], "system": e["system"]}),
                "task": t, "dataset": e["dataset"], "domain": e["domain"], "system": e["system"], "protocol": protocol,
                **({"mmir.unscored": summary["unscored"]} if summary.get("unscored") else {}), **e.get("tags", {}),
                **external_run_tags(e.get("run_file"))}
        metrics = {_mlflow_key(m): float(v) for m, v in summary["measures"].items() if v is not None}  # None: no scorable query
        # every measure's tie-aware value beside it (the mean over every order of each tied group)
        metrics |= {f"{_mlflow_key(m)}_tie_aware": float(v) for m, v in summary.get("tie_orders", {}).get("expected", {}).items()
                    if v is not None}
        metrics |= {"queries": summary["queries"], "queries_without_results": summary["queries_without_results"]}
        metrics |= {k: float(v) for k, v in e.get("extra_metrics", {}).items()}
        child = f"{task}/{e['dataset']}/{e['domain']}/{e['system']}"
        children.append(UnitRun(
            key=f"{name}/{t}/{e['dataset']}/{e['domain']}/{e['system']}", name=child, tags=tags,
            params=flatten(e.get("params", {})), metrics=metrics,
            artifacts=[str(e[a]) for a in ("run_file", "perquery", "metrics_json") if e.get(a)],
            dataset=(paths.PREPARED.format(dataset=e["dataset"], domain=e["domain"]), f"{e['dataset']}/{e['domain']}")))
    with _store_lock(project_dir):  # holds the store lock (see _store_lock)
        return log_tree(_experiment(config, project_dir), parent, children)
