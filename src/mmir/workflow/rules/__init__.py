"""Every rule of the workflow as data: its outputs, what it reads (inputs), the config slice it gets (params) and
the step it runs. One module per rule file (``pipeline/rules/<family>.smk`` <-> ``mmir.workflow.rules.<family>``),
each declaring its rules once, as :class:`Rule` literals in its ``RULES`` tuple; :data:`RULES` gathers them.

The Snakemake rule files take ``input``, ``output`` and ``params`` from here and run ``pipeline/scripts/step.py``,
which calls :func:`run_job`; ``mmir run <rule> key=value ...`` builds the same :class:`Job` from the same functions
and calls the same step. Nothing about a rule is derived twice.

``params`` is exactly the config slice the step reads, so a config change reruns only the jobs whose slice
changed (Snakemake's params rerun trigger): adding a RAG setting changes no existing RAG job's params.
"""

from __future__ import annotations

import logging
from typing import Any

from mmir.workflow.rules import audit, data, essentiality, evaluation, generation, m2rag, mmdr, mteb, rag, report, rerank, retrieval
from mmir.workflow.rules.common import Job, Rule, job_resources, retry_token, system_config

__all__ = ["RULES", "Job", "Rule", "job_resources", "retry_token", "run_job", "run_snakemake_job", "system_config"]

log = logging.getLogger("mmir.workflow")

#: every rule by name, in the order of the rule files
RULES: dict[str, Rule] = {r.name: r for m in (data, retrieval, generation, evaluation, report, rag, m2rag, mmdr,
                                              essentiality, audit, rerank, mteb) for r in m.RULES}


def run_job(job: Job) -> Any:
    """Run a job's step; an error is logged (with its traceback) before it propagates, so the rule log holds it. An
    error about the input or config (:class:`~mmir.core.errors.MmirError`: it names the file, line and field) is
    logged to the log file only: the console gets one line from the caller (``mmir: error: ...``)."""
    from mmir.core.errors import MmirError
    from mmir.core.logs import FILE_ONLY

    try:
        return RULES[job.rule].run(job)
    except MmirError as exc:
        log.error("rule %s failed (wildcards %s): %s", job.rule, job.wildcards, exc, exc_info=True, extra=FILE_ONLY)
        raise
    except Exception:
        log.exception("rule %s failed (wildcards %s)", job.rule, job.wildcards)
        raise


def run_snakemake_job(smk) -> Any:
    """The body of ``pipeline/scripts/step.py``: the job of a Snakemake script call, its log set up, run.

    ``smk`` is the ``snakemake`` object Snakemake injects (``rule``, ``wildcards``, ``input``, ``output``,
    ``params.slice``, ``log``). A data or config error ends the job with one ``mmir: error: <file>, line N, field
    'x': ...`` line on stderr and exit status 2, its traceback in the job's log file (``run_job``).
    """
    import sys

    from mmir.core import logs
    from mmir.core.errors import MmirError

    def plain(v):
        return v if isinstance(v, str) else [str(x) for x in v]

    logs.setup(smk.log[0] if smk.log else None)
    job = Job(smk.rule, {k: str(v) for k, v in smk.wildcards.items()}, {k: plain(v) for k, v in smk.input.items()},
              {k: str(v) for k, v in smk.output.items()}, smk.params.slice, int(smk.threads))
    try:
        return run_job(job)
    except MmirError as exc:
        print(f"mmir: error: {exc}" + (f" (traceback: {smk.log[0]})" if smk.log else ""), file=sys.stderr)
        sys.exit(2)
