"""The ``report_html`` step: every table the config produced, as one self-contained HTML page
(``results/report/index.html``, :mod:`mmir.reporting.html`) that opens with a summary (:mod:`mmir.reporting.summary`)
and links one page per (task, dataset, domain) listing its queries (``results/report/queries/``,
:mod:`mmir.reporting.query_pages`), with the lineage of its numbers
(``results/report/lineage.json``, :mod:`mmir.reporting.lineage`), each table's markdown exported as LaTeX
(``results/report/tables/<name>.tex``, :mod:`mmir.reporting.latex`) and all of them in one compilable document
(``results/report/tables.tex``); logged to MLflow as one run with these files as artifacts."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.core.io import write_json, write_text

log = logging.getLogger("mmir.workflow.report")


def report_step(config: Mapping[str, Any], files: Sequence[str | Path], prepared: Sequence[str | Path], out_html: str | Path,
                out_lineage: str | Path, out_latex: str | Path, tex: Mapping[str, str | Path],
                out_tracking: str | Path | None = None, pages: Sequence[Any] = (), out_queries: str | Path | None = None,
                thumbnail_cache: str | Path = "results/cache/thumbnails", external_runs: Sequence[str | Path] = ()) -> dict[str, int]:
    """Build the page, its query pages, the lineage JSON, the LaTeX files; log them to MLflow when ``out_tracking``
    is given.

    Args:
        config: the rule's slice (datasets, systems, generators, captioners, reformulators, ablations, rag, m2rag, mmdr,
            mlflow).
        files: :func:`mmir.workflow.targets.report_files` of the config (tables, figures, MLflow records).
        prepared: the ``prepare.json`` of every prepared domain (sizes and fetched revisions for the lineage).
        tex: ``{name: results/report/tables/<name>.tex}`` for the markdown tables (from :func:`mmir.workflow.targets.tex_outputs`).
        external_runs: the retrieve stats of every ``kind: run`` unit (file and sha256 in the lineage).
        pages: one :class:`mmir.reporting.query_data.DomainFiles` per query page (their baseline and row labels are
            taken from the task's ``significance.json`` when it has the dataset, so pages and tables agree);
            written under ``out_queries`` (default: ``queries/`` beside ``out_html``), thumbnails cached in
            ``thumbnail_cache``.

    Returns:
        Counts: tables, figures, csv files, latex tables, html bytes, tables whose computing commit MLflow gave, query
        pages, their queries and bytes, thumbnails (distinct images shown) and undecodable images (the log also says
        how many thumbnails were made and how many came from the cache).

    Raises:
        FileNotFoundError: an input file is missing; ValueError: a figure of a type the page cannot embed.
    """
    from mmir.reporting.html import group_tables, mlflow_parent, write_report
    from mmir.reporting.latex import latex_document, markdown_to_latex
    from mmir.reporting.lineage import lineage
    from mmir.reporting.markdown import parse_tables, title
    from mmir.reporting.query_pages import QUERIES_DIR, write_query_pages
    from mmir.reporting.summary import summary_sections

    tables = group_tables(files)
    tex_by_stem = {Path(p).stem: Path(p) for p in tex.values()}
    fragments, n_latex, skipped = [], 0, []
    for t in tables:
        if t.md is None:
            skipped.append(t.name)
            continue
        text = t.md.read_text(encoding="utf-8")
        frag = markdown_to_latex(text, t.name, str(t.md))
        n_latex += len(parse_tables(text))
        if t.name in tex_by_stem:
            write_text(tex_by_stem[t.name], frag)
        fragments.append((title(text) or t.name, frag))
    missing = [str(p) for s, p in tex_by_stem.items() if not any(t.name == s and t.md is not None for t in tables)]
    for p in missing:  # declared but no markdown among the inputs: say so in the file rather than leave it absent
        write_text(p, f"% {Path(p).name}: no markdown table among the report's inputs\n")
    write_text(out_latex, latex_document(fragments, "mmir tables"))
    lin = lineage(config, prepared, external_runs=external_runs)
    latex_files = [str(p) for p in tex.values()] + [str(out_latex)]
    parents = {t.name: mlflow_parent(t) for t in tables if mlflow_parent(t)}
    commits = {}
    if parents and config.get("mlflow") is not None:
        from mmir.tracking import run_commits

        by_run = run_commits(dict(config), list(parents.values()))
        commits = {n: by_run[r] for n, r in parents.items() if r in by_run}
    lin["tables"] = {t.name: {"mlflow_parent": parents.get(t.name), "code_commit": commits.get(t.name)} for t in tables}
    report_dir = Path(out_queries).parent if out_queries is not None else Path(out_html).parent
    if out_queries is not None and Path(out_queries).name != QUERIES_DIR:
        raise ValueError(f"{out_queries}: the query pages' folder must be named {QUERIES_DIR!r} (index.html links it)")
    result = write_query_pages(_agree_with_tables(tables, pages), report_dir, thumbnail_cache)
    if out_queries is not None:
        Path(out_queries).mkdir(parents=True, exist_ok=True)  # declared even when the config has no task unit
    links = {}
    for d in result.domains:
        links.setdefault(d.files.task, {})[(d.files.dataset, d.files.domain)] = d.href
    size = write_report(tables, lin, out_html, "mmir results", latex_files, commits, summary_sections(tables, result.domains),
                        links)
    write_json(out_lineage, {**lin, "inputs": [str(f) for f in files]})
    counts = {"tables": len(tables), "figures": sum(len(t.figures) for t in tables),
              "csv": sum(t.csv is not None for t in tables), "latex_tables": n_latex, "html_bytes": size,
              "tables_with_commit": len(commits), "query_pages": result.pages, "query_page_queries": result.queries,
              "query_page_bytes": result.bytes, "thumbnails": result.thumbnails["thumbnails"],
              "images_undecodable": result.thumbnails["images_undecodable"]}
    log.info("read %d files (%d tables: %s; %d figures; %d prepare.json); wrote %s (%d bytes), %s, %s and %d LaTeX "
             "files (%d tables); %d of %d tables name the commit that computed them (MLflow)%s", len(files), len(tables),
             ", ".join(t.name for t in tables) or "none", counts["figures"], len(prepared), out_html, size, out_lineage,
             out_latex, len(tex), n_latex, len(commits), len(tables),
             f"; skipped (no markdown: figures or CSV only in the page, no LaTeX): {', '.join(skipped)}" if skipped else "")
    log.info("wrote %d query pages (%d queries, %d bytes) under %s in %.1fs; thumbnails: %d placed (%d made, %d from the "
             "cache %s), %d images undecodable%s", result.pages, result.queries, result.bytes, Path(report_dir) / QUERIES_DIR,
             result.seconds, result.thumbnails["thumbnails"], result.thumbnails["thumbnails_made"],
             result.thumbnails["thumbnails_cached"], thumbnail_cache, result.thumbnails["images_undecodable"],
             f" (e.g. {result.failures[0]})" if result.failures else "")
    if missing:
        log.warning("no markdown for %d declared LaTeX files (a note was written): %s", len(missing), ", ".join(missing))
    if out_tracking is not None:
        from mmir.tracking import log_units, redact, tracking_uri

        params = {"tables": [t.name for t in tables], "code_commit": lin["code"]["label"]}
        ids = log_units(dict(config), "report", params,
                        [{"name": "report/html", "tags": {"rule": "report_html"},
                          "metrics": {k: v for k, v in counts.items()},
                          "artifacts": [str(out_html), str(out_lineage), str(out_latex), *map(str, tex.values())]}])
        write_json(out_tracking, {"tracking_uri": redact(tracking_uri(dict(config))), **ids, "counts": counts})
    return counts


def _agree_with_tables(tables: Sequence[Any], pages: Sequence[Any]) -> list[Any]:
    """``pages`` with the baseline and row labels of their task table's ``significance.json`` (where it has the
    page's dataset): the table's baseline is the one its tests used."""
    import json
    from dataclasses import replace

    sig = {t.name: json.loads(t.significance.read_text(encoding="utf-8")) for t in tables if t.significance is not None}
    out = []
    for p in pages:
        s = sig.get(p.task)
        if s is None:
            out.append(p)
            continue
        labels = {**p.labels, **s.get("labels", {})}
        unlabel = {v: k for k, v in labels.items()}
        base = s.get("datasets", {}).get(p.dataset, {}).get("baseline")
        out.append(replace(p, labels=labels, baseline=unlabel.get(base, base) if base else p.baseline))
    return out
