"""Rules of ``pipeline/rules/evaluation.smk``: score (pytrec_eval measures per query and their domain means) against
the qrels file of the task's :class:`~mmir.core.tasks.TaskSpec`."""

from __future__ import annotations

from mmir.core import paths
from mmir.core.tasks import task as task_spec
from mmir.workflow.rules.common import Job, Rule, W


def _score(job: Job):
    from mmir.workflow import steps

    w = job.wildcards
    meta = {k: w[k] for k in ("task", "dataset", "domain", "system")}
    return steps.score(job.input["run"], job.input["qrels"], job.params["measures"], job.output["metrics"],
                       job.output["perquery"], meta, job.params["binary"], job.params["tie_order"])


def _score_inputs(config: dict, w: W) -> dict:
    qrels = task_spec(w["task"]).qrels_file(config["evaluation"]["task4_protocol"])
    return {"run": paths.RUN.format(**w), "qrels": paths.prepared(w["dataset"], w["domain"], qrels)}


def _score_params(config: dict, w: W) -> dict:
    # Task 4 official reads its own (binary) qrels: no label is collapsed here
    return {"measures": config["measures"], "tie_order": config["evaluation"]["tie_order"], "binary": False}


RULES = (
    Rule(name="score", output={"metrics": paths.METRICS, "perquery": paths.PERQUERY}, run=_score, input=_score_inputs,
         params=_score_params),
)
