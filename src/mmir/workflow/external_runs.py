"""The retrieve step of a ``kind: run`` system: its external TREC run of one task, dataset and domain checked
(:mod:`mmir.retrieval.external`), the protocol's exclusions removed, cut to ``evaluation.top_k`` and written where
mmir's own runs go (``results/runs/<task>/<dataset>/<system>/<domain>.trec``), so scoring, tables, significance,
reranking, MLflow and the report read it like any run."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from mmir.config.models import EvaluationConfig
from mmir.core.io import write_json
from mmir.core.tasks import task as task_spec

log = logging.getLogger("mmir.workflow.external_runs")


def copy_external_run(task: str, prepared_dir: str | Path, system_name: str, external: str | Path,
                      evaluation: EvaluationConfig, out_run: str | Path, out_stats: str | Path) -> dict:
    """Check ``external`` against ``task`` on the prepared domain and write it, as mmir writes its runs, to ``out_run``
    (each query's items in rank order with the file's scores, excluded items removed, at most ``top_k``), and the
    counts to ``out_stats``.

    The stats name the file as given and its sha256 (``external_file``, ``external_sha256``), its lines and queries,
    the topics it lacks (``topics_missing``: they score 0, and the score step counts them in
    ``queries_without_results``), the items the protocol removed and the rankings cut to ``top_k``.

    Raises:
        RunFileError: a bad line (file, 1-based line, field); FileNotFoundError: ``external`` does not exist.
    """
    from mmir.retrieval.exclusions import exclusions
    from mmir.retrieval.external import apply_protocol, read_checked_run, tie_counts
    from mmir.retrieval.items import task_items, task_queries
    from mmir.retrieval.runs import write_run

    t0 = time.perf_counter()
    prep, spec = Path(prepared_dir), task_spec(task)
    if not Path(external).is_file():
        raise FileNotFoundError(f"{external}: no such run file (systems.{system_name}.path, {task}, {prep})")
    items, qs = task_items(task, prep), task_queries(task, prep)
    sha = hashlib.sha256(Path(external).read_bytes()).hexdigest()
    run = read_checked_run(external, qs.qids, items.ids, spec.ranks, task)
    lines = sum(len(r) for r in run.values())
    excluded = exclusions(prep, task, evaluation.protocol, evaluation.task4_protocol)
    kept, counts = apply_protocol(run, excluded, evaluation.top_k)
    n = write_run(out_run, kept, tag=system_name)
    missing = sum(1 for q in qs.qids if q not in run)
    stats = {"task": task, "system": system_name, "search": "external run", "external_file": str(external),
             "external_sha256": sha, "external_lines": lines, "external_queries": len(run), "items": len(items),
             "topics": len(qs), "topics_missing": missing, "excluded_queries": len(excluded), "top_k": evaluation.top_k,
             **counts, **tie_counts(kept), "run_lines": n, "seconds": round(time.perf_counter() - t0, 3)}
    write_json(out_stats, stats)
    log.info("read %s (sha256 %s: %d lines, %d of %d topics ranked; %d topics missing, scored 0) and %s (%d items); "
             "removed %d excluded items (protocol %s) from %d queries; cut %d rankings to the top %d (%d items); wrote %s: "
             "%d lines; %.1fs", external, sha[:12], lines, len(run), len(qs), missing, prep, len(items),
             counts["excluded_removed"], evaluation.protocol, counts["queries_with_excluded_removed"],
             counts["queries_cut_to_top_k"], evaluation.top_k, counts["items_cut_by_top_k"], out_run, n, stats["seconds"])
    return stats
