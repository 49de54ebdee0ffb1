"""The ``reproduction`` step: every expected score (``expected/*.yaml``, config key ``expected``) checked against the
task tables, the ablation grids, the RAG table and the quality audit of this run (:mod:`mmir.evaluation.expected`), written to
``results/tables/reproduction.{md,csv}`` (:mod:`mmir.reporting.reproduction`) and logged to MLflow: one run with a
metric per checked row (its difference) and a tag per row (its status)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.config.models import ReproductionParams, parse
from mmir.core.io import write_json

log = logging.getLogger("mmir.workflow.reproduction")


def _key(*parts: str) -> str:
    """An MLflow-safe metric/tag name ([A-Za-z0-9_./ -])."""
    return "/".join(re.sub(r"[^A-Za-z0-9_. -]", "_", p.replace("@", "_at_")) for p in parts if p)


def observations(tables: Sequence[str | Path], ablations: Mapping[str, str | Path], rag: str | Path | None,
                 measure: str, audit: str | Path | None = None) -> tuple[list, set[str]]:
    """This run's numbers from its table files, and the tasks / tables they cover."""
    from mmir.evaluation.expected import (
        observations_from_ablation_csv,
        observations_from_audit_csv,
        observations_from_rag_csv,
        observations_from_task_metrics,
    )

    obs, ran = [], set()
    for t in tables:
        o = observations_from_task_metrics(t)
        obs += o
        ran |= {x.task for x in o}
    for grid, f in ablations.items():
        o = observations_from_ablation_csv(f, grid, measure)
        obs += o
        ran |= {f"{grid}_ablation"} if o else set()
    if rag:
        o = observations_from_rag_csv(rag)
        obs += o
        ran |= {"rag"} if o else set()
    if audit:
        o = observations_from_audit_csv(audit)
        obs += o
        ran |= {"audit"} if o else set()
    return obs, ran


def reproduction_step(config: Mapping[str, Any], expected_files: Sequence[str | Path], tables: Sequence[str | Path],
                      ablations: Mapping[str, str | Path], rag: str | Path | None, out_md: str | Path, out_csv: str | Path,
                      out_tracking: str | Path | None = None, audit: str | Path | None = None) -> dict[str, int]:
    """Check, write the table, log to MLflow (when ``out_tracking`` is given).

    Args:
        config: the rule's slice: ``expected`` (the files as configured), ``presets`` ({system: preset or None}),
            ``datasets`` ({dataset: repo_id or None}), ``samples`` ({dataset: its sample or None}),
            ``measure`` (the ablation grids' measure), ``mlflow``.
        expected_files: the resolved expected files.
        tables: ``results/tables/<task>.metrics.json`` of the configured tasks.
        ablations: ``{grid: results/tables/<grid>_ablation.csv}``.
        rag: ``results/tables/rag.csv`` or None.
        audit: ``results/tables/audit.csv`` or None.

    Returns:
        Rows per status.
    """
    from mmir.evaluation.expected import check, load_expected
    from mmir.reporting.reproduction import write_reproduction

    p = parse(ReproductionParams, dict(config), "params")
    entries = load_expected(expected_files)
    obs, ran = observations(tables, ablations, rag, p.measure, audit)
    frame = check(entries, obs, p.presets, p.datasets, ran, p.samples)
    counts = write_reproduction(frame, p.expected, out_md, out_csv)
    log.info("read %d expected values from %s and %d numbers of this run (%s); wrote %s, %s: %s", len(entries),
             ", ".join(map(str, expected_files)), len(obs), ", ".join(sorted(ran)) or "nothing", out_md, out_csv,
             ", ".join(f"{k} {v}" for k, v in counts.items()))
    for r in frame[frame["status"].isin(["FAIL", "OKish"])].itertuples():
        log.warning("%s: %s %s %s %s on %s: expected %.2f, observed %.2f (tolerance %.2f; %s)", r.status, r.benchmark, r.task,
                    r.run_system, r.domain, r.run_dataset, r.expected, r.observed, r.tolerance, r.source)
    if out_tracking is not None:
        from mmir.tracking import log_units, redact, tracking_uri

        metrics: dict[str, float] = {f"checks_{k.replace(' ', '_')}": v for k, v in counts.items()}
        tags: dict[str, str] = {}
        for r in frame.itertuples():
            name = _key(r.benchmark, r.task, r.run_dataset or r.dataset, r.run_system or r.system, r.domain, r.measure)
            tags[f"{name}/status"] = r.status
            if r.diff is not None and r.diff == r.diff:
                metrics[f"{name}/diff"] = float(r.diff)
                metrics[f"{name}/observed"] = float(r.observed)
        params = {"expected": p.expected, "presets": p.presets}
        ids = log_units(dict(config), "reproduction", params,
                        [{"name": "reproduction/checks", "tags": {"rule": "reproduction", **tags},
                          "metrics": metrics, "artifacts": [str(out_md), str(out_csv)]}])
        write_json(out_tracking, {"tracking_uri": redact(tracking_uri(dict(config))), **ids, "counts": counts})
    return counts
