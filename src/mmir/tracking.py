"""MLflow run hierarchy: one parent run per workflow invocation, one child per (task, dataset, domain, system).

Store: ``MLFLOW_TRACKING_URI``, else ``mlflow.tracking_uri`` of params.yaml, else ``mlflow.db`` (SQLite).
Nothing from the environment is logged, so API keys never reach the store. README: "Outputs and tracking".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

from mmir.core import paths
from mmir.core.gitinfo import commit_label


def tracking_uri(config: dict, project_dir: str | Path = ".") -> str:
    """The MLflow store URI to use (see module docstring)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if config.get("mlflow", {}).get("tracking_uri"):
        return config["mlflow"]["tracking_uri"]
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
    """MLflow's standard tags for a run of this project: the code commit (``mlflow.source.git.commit``; the UI's
    Version column) and what ran it (``mlflow.source.name``, shown as Source), plus our ``git_commit``."""
    from mlflow.utils.mlflow_tags import MLFLOW_GIT_COMMIT, MLFLOW_SOURCE_NAME, MLFLOW_SOURCE_TYPE

    return {MLFLOW_GIT_COMMIT: commit.removesuffix("-dirty"), MLFLOW_SOURCE_NAME: source, MLFLOW_SOURCE_TYPE: "PROJECT",
            "git_commit": commit}


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


def _experiment(config: dict, project_dir: Path) -> str:
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(config, project_dir))
    name = config.get("mlflow", {}).get("experiment", "mmir")
    exp = mlflow.get_experiment_by_name(name)
    kind = {EXPERIMENT_KIND: "custom_model_development"}  # the UI opens on the runs table, not on GenAI traces
    if exp is None:
        return mlflow.create_experiment(name, artifact_location=(project_dir / "mlartifacts").as_uri(), tags=kind)
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


def log_units(config: dict, stage: str, params: dict, units: list[dict], project_dir: str | Path = ".") -> dict:
    """A parent run for a generative stage (``rag``, ``m2rag``, ``mmdr``) and one child per unit.

    Args:
        units: ``{"name", "tags", "metrics", "artifacts", "artifact_dirs"}``; ``None``/NaN metrics are left out.

    Returns:
        ``{"parent": run id, "children": [run ids]}``.
    """
    with _store_lock(Path(project_dir).resolve()):  # holds the store lock (see _store_lock)
        import mlflow

        exp_id = _experiment(config, Path(project_dir).resolve())
        commit = commit_label(project_dir)
        flat = flatten(params)
        ids: dict = {"parent": None, "children": []}
        with mlflow.start_run(experiment_id=exp_id, run_name=stage,
                              tags={"mmir.level": "invocation", "mmir.task": stage,
                                    **run_tags(commit, f"mmir {stage}")}) as parent:
            ids["parent"] = parent.info.run_id
            mlflow.log_params(flat)
            for u in units:
                tags = {"mmir.level": "unit", **run_tags(commit, f"mmir {stage}"), "task": stage,
                        **{k: str(v) for k, v in u.get("tags", {}).items()}}
                with mlflow.start_run(experiment_id=exp_id, nested=True, run_name=u["name"], tags=tags) as child:
                    mlflow.log_params(flat)
                    ds, dom = u.get("tags", {}).get("dataset"), u.get("tags", {}).get("domain")
                    if ds and dom:
                        log_dataset_input(paths.PREPARED.format(dataset=ds, domain=dom), f"{ds}/{dom}")
                    metrics = {}
                    for k, v in u.get("metrics", {}).items():
                        try:
                            metrics[k.replace(".", "_").replace("@", "_at_")] = float(v)
                        except (TypeError, ValueError):
                            continue
                    mlflow.log_metrics({k: v for k, v in metrics.items() if v == v})
                    for a in u.get("artifacts", []):
                        mlflow.log_artifact(a)
                    for dest, folder in u.get("artifact_dirs", {}).items():
                        mlflow.log_artifacts(folder, artifact_path=dest)
                    ids["children"].append(child.info.run_id)
        return ids


def log_rag(config: dict, summaries: list[dict], artifacts: list[list[str]], project_dir: str | Path = ".") -> dict:
    """A parent run for the RAG stage and a child per (dataset, domain, setting): params = the rag config and
    the generator/judge settings, metrics = score, counts, judge failures, agreement, tokens; artifacts = the
    answers and judgments. Returns ``{"parent", "children"}``."""
    rag = config["rag"]
    params = {"rag": rag, "generator": config["generators"][rag["generator"]], "judge": config["generators"][rag["judge"]]}
    units = [{"name": f"rag/{s['dataset']}/{s['domain']}/{s['setting']}",
              "tags": {"rule": "rag", "dataset": s["dataset"], "domain": s["domain"], "setting": s["setting"],
                       "skipped": str(s.get("skipped") or "")},
              "metrics": flatten({k: v for k, v in s.items()
                                  if k not in ("dataset", "domain", "setting", "generator", "judge", "skipped")}),
              "artifacts": arts} for s, arts in zip(summaries, artifacts)]
    return log_units(config, "rag", params, units, project_dir)


def log_invocation(config: dict, task: str, entries: list[dict], project_dir: str | Path = ".",
                   run_name: str | None = None, parent_metrics: dict[str, float] | None = None) -> dict:
    """Log a parent run for this invocation and a child per entry; returns ``{"parent", "children"}`` ids."""
    # holds the store lock (see _store_lock)
    with _store_lock(Path(project_dir).resolve()):
        return _log_invocation(config, task, entries, project_dir, run_name, parent_metrics)


def _log_invocation(config: dict, task: str, entries: list[dict], project_dir: str | Path = ".",
                    run_name: str | None = None, parent_metrics: dict[str, float] | None = None) -> dict:
    import mlflow

    project_dir = Path(project_dir).resolve()
    exp_id = _experiment(config, project_dir)
    commit = commit_label(project_dir)
    ids: dict = {"parent": None, "children": []}
    tags = {"mmir.level": "invocation", "mmir.task": task, **run_tags(commit, f"mmir {task}")}
    with mlflow.start_run(experiment_id=exp_id, run_name=run_name or f"{task}", tags=tags) as parent:
        ids["parent"] = parent.info.run_id
        mlflow.log_params({"task": task, "protocol": config["evaluation"]["protocol"], "top_k": config["evaluation"]["top_k"],
                           "systems": ",".join(sorted({e["system"] for e in entries})),
                           "datasets": ",".join(sorted({e["dataset"] for e in entries}))})
        if parent_metrics:
            mlflow.log_metrics({k: float(v) for k, v in parent_metrics.items()})
        for e in entries:
            summary = json.loads(Path(e["metrics_json"]).read_text(encoding="utf-8"))
            tags = {"mmir.level": "unit", **run_tags(commit, f"mmir {task} score"), "rule": "score",
                    "wildcards": json.dumps({"task": e.get("task", task), "dataset": e["dataset"], "domain": e["domain"],
                                             "system": e["system"]}),
                    "task": e.get("task", task), "dataset": e["dataset"], "domain": e["domain"], "system": e["system"],
                    "protocol": config["evaluation"]["protocol"], **e.get("tags", {})}
            name = f"{task}/{e['dataset']}/{e['domain']}/{e['system']}"
            with mlflow.start_run(experiment_id=exp_id, nested=True, run_name=name, tags=tags) as child:
                mlflow.log_params(flatten(e.get("params", {})))
                log_dataset_input(paths.PREPARED.format(dataset=e["dataset"], domain=e["domain"]), f"{e['dataset']}/{e['domain']}")
                metrics = {_mlflow_key(m): float(v) for m, v in summary["measures"].items()}
                metrics |= {"queries": summary["queries"], "queries_without_results": summary["queries_without_results"]}
                metrics |= {k: float(v) for k, v in e.get("extra_metrics", {}).items()}
                mlflow.log_metrics(metrics)
                for art in ("run_file", "perquery", "metrics_json"):
                    if e.get(art):
                        mlflow.log_artifact(str(e[art]))
                ids["children"].append(child.info.run_id)
    return ids
