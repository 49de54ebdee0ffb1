"""Published MTEB result files as reference rows of a task table ("published in MTEB results").

Each file is read with mteb's own loader (``mteb.results.TaskResult.from_disk``; the model's name and revision from
its folder's ``model_meta.json``, else from the path, as mteb's loader does). A file of the MTEB port of MM-BRIGHT
(``MMBrightT2TRetrieval`` ... or mmir's ``<port name>-<dataset>``) gives one row per (model, revision) in the table of
its mmir task, under the dataset the config names (``mteb.references[].dataset``): split ``test``, each
``hf_subset`` a domain column, the measure's MTEB score ×100 (the tables' scale). The rows are appended to the
markdown and CSV written by :func:`mmir.reporting.tables.write_task_table`, after the table, its best-per-column bold
and its significance tests were computed: they never take part in either. CSV rows carry ``label`` = :data:`LABEL`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import pandas as pd

from mmir.core import mteb_port
from mmir.core.io import write_text
from mmir.reporting.mteb_export import NO_REVISION, mteb_score_name
from mmir.reporting.tables import AVG

log = logging.getLogger("mmir.reporting.mteb_reference")

LABEL = "published in MTEB results"
_INSTALL = "reading MTEB result files (mteb.references) needs the optional extra mmir[mteb]: pip install 'mteb==2.26.24'"


def result_files(path: str | Path) -> list[Path]:
    """The MTEB result files under ``path``: the file itself, ``<path>/<model>/<revision>/*.json`` of a results
    folder, or ``<path>/results/...`` of an MTEB cache (``model_meta.json`` excluded), sorted.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"MTEB results {p}: no such file or folder")
    root = p / "results" if (p / "results").is_dir() else p
    return sorted(f for f in root.glob("*/*/*.json") if f.name != "model_meta.json")


def model_of(file: Path) -> tuple[str, str]:
    """``(model name, revision)`` of a result file: its folder's ``model_meta.json``, else ``<model>/<revision>/`` of
    the path (``__`` -> ``/``), as mteb's ``load_results``."""
    meta = file.parent / "model_meta.json"
    if meta.is_file():
        d = json.loads(meta.read_text(encoding="utf-8"))
        return str(d["name"]), str(d.get("revision") or NO_REVISION)
    return file.parent.parent.name.replace("__", "/"), file.parent.name


@dataclass(frozen=True)
class Reference:
    """``mteb.references[i]``: MTEB result files (a file or a folder) shown under ``dataset``."""

    path: str
    dataset: str


def reference_rows(references: Sequence[Reference | Mapping], task: str, measure: str) -> pd.DataFrame:
    """Long frame ``dataset, system, domain, value (×100), source`` of the result files of ``task`` among
    ``references``; ``system`` is ``<model>@<revision[:8]>`` (just the model without a revision).

    Raises:
        ImportError: mteb is not installed; FileNotFoundError: a reference path does not exist;
        ValueError: a file of this task without the measure's MTEB score (naming the file and subset).
    """
    try:
        from mteb.results import TaskResult
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    key = mteb_score_name(measure)
    rows = []
    for ref in references:
        ref = ref if isinstance(ref, Reference) else Reference(str(ref["path"]), str(ref["dataset"]))
        for f in result_files(ref.path):
            result = TaskResult.from_disk(f)
            if mteb_port.task_of(result.task_name) != task:
                continue
            name, revision = model_of(f)
            system = name if revision == NO_REVISION else f"{name}@{revision[:8]}"
            entries = result.scores.get(mteb_port.SPLIT)
            if not entries:
                log.warning("%s: no %r split (splits: %s); skipped", f, mteb_port.SPLIT, ", ".join(result.scores) or "none")
                continue
            for e in entries:
                value = e.get(key, e["main_score"] if key == mteb_port.MAIN_SCORE else None)
                if value is None:
                    raise ValueError(f"{f}: subset {e['hf_subset']!r} of split {mteb_port.SPLIT} has no {key!r} ({measure})")
                rows.append({"dataset": ref.dataset, "system": system, "domain": e["hf_subset"], "value": float(value) * 100,
                             "source": str(f)})
    return pd.DataFrame(rows, columns=["dataset", "system", "domain", "value", "source"])


def _cells(rows: pd.DataFrame, columns: list[str]) -> dict[str, dict[str, float]]:
    """``{system: {column: value}}`` over a table's domain ``columns`` (then Avg.: their mean, NaN when one lacks)."""
    out = {}
    for system, g in rows.groupby("system", sort=False):
        vals = dict(zip(g["domain"], g["value"]))
        domains = [c for c in columns if c != AVG]
        cells = {c: vals.get(c, math.nan) for c in domains}
        cells[AVG] = sum(cells.values()) / len(domains) if domains and not any(math.isnan(v) for v in cells.values()) else math.nan
        out[system] = cells
    return out


def _note(rows: pd.DataFrame) -> str:
    sources = ", ".join(f"`{s}`" for s in dict.fromkeys(rows["source"]))
    return (f"Rows marked ({LABEL}) are read from MTEB result files ({sources}), not computed by this run: no bold, no "
            "interval, no test; Avg. over this table's domains (– where a file lacks one).")


def add_reference_rows(md_path: str | Path, csv_path: str | Path, rows: pd.DataFrame, digits: int = 1) -> int:
    """Append ``rows`` (:func:`reference_rows`) to a task table written by ``write_task_table``: in each dataset's
    markdown section after its table, as ``<system> (published in MTEB results)``, with a note; in the CSV with
    ``label`` = :data:`LABEL` (the column added after ``system`` when absent, empty for this run's rows). Rows of a
    dataset the table lacks are skipped (logged). Both files rewritten atomically. Returns the rows added.
    """
    if rows.empty:
        return 0
    md = Path(md_path).read_text(encoding="utf-8").split("\n")
    csv = pd.read_csv(csv_path, dtype={"system": str})
    if "label" not in csv.columns:
        csv.insert(csv.columns.get_loc("system") + 1, "label", "")
    added, new_rows = 0, []
    for ds, g in rows.groupby("dataset", sort=False):
        head = next((i for i, line in enumerate(md) if line == f"## {ds}"), None)
        start = next((i for i in range(head + 1, len(md)) if md[i].startswith("|")), None) if head is not None else None
        if start is None:
            log.warning("task table %s has no section for dataset %s: %d MTEB reference rows skipped", md_path, ds, len(g))
            continue
        end = start
        while end + 1 < len(md) and md[end + 1].startswith("|"):
            end += 1
        columns = [c.strip() for c in md[start].strip("|").split("|")][1:]
        cells = _cells(g, columns)
        lines = [f"| {s} ({LABEL}) | " + " | ".join("–" if math.isnan(v[c]) else f"{v[c]:.{digits}f}" for c in columns) + " |"
                 for s, v in cells.items()]
        md[end + 1:end + 1] = [*lines, "", _note(g)]
        for s, v in cells.items():
            new_rows.append({"dataset": ds, "system": s, "label": LABEL, **{c: round(x, 4) if not math.isnan(x) else None
                                                                              for c, x in v.items()}})
        added += len(cells)
    if new_rows:
        csv = pd.concat([csv, pd.DataFrame(new_rows)], ignore_index=True)
        buf = StringIO()
        csv.to_csv(buf, index=False)
        write_text(csv_path, buf.getvalue())
        write_text(md_path, "\n".join(md))
    return added
