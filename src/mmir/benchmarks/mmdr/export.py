"""Leaderboard export (spec §8): task-score CSV, leaderboard CSV and manifest from a results JSONL.

Byte format of the published exporter (CRLF, ``utf-8-sig``, 6 dp / 2 dp ``repr`` of rounded floats, no
trailing newline after the manifest); ``FileFormat(bom=False, manifest_trailing_newline=True)`` reproduces the stored
``shared/data/mmdr-reference`` files. A repeated ``qid`` keeps its last record; ``Overall`` and ``TRACE`` are
recomputed. Our additions go under the manifest keys ``provenance`` and ``warnings``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.benchmarks.mmdr.aggregate import overall_score, trace_value
from mmir.benchmarks.mmdr.tasks import canonical_split
from mmir.core.errors import DataError, MmirError
from mmir.core.gitinfo import code_commit
from mmir.core.io import write_bytes, write_text

LEADERBOARD_COLUMNS = ["Model", "Overall", "Read.", "Insh.", "Stru.", "Vef.", "Con.", "Cov.", "Fid.", "Sem.", "Acc.", "VQA"]
TASK_COLUMNS = [
    "Model", "Task ID", "Split", "Overall", "Stored Overall", "Overall Delta", "FLAE", "Read.", "Insh.", "Stru.",
    "TRACE", "Vef.", "Con.", "Cov.", "Fid.", "MOSAIC", "Sem.", "Acc.", "VQA", "Complete", "Report Path",
    "Report SHA256", "MOSAIC Summary Path", "MOSAIC Summary SHA256",
]
REQUIRED_COLUMNS = ["Overall", "FLAE", "Read.", "Insh.", "Stru.", "TRACE", "Vef.", "Con.", "Cov.", "Fid.", "MOSAIC"]
SPLITS = {"all": None, "research": 100, "daily": 40}
SCHEMA = "mmdr-leaderboard-v1"
FORMULAS = {
    "TRACE": "0.6 * EVI + 0.4 * VEF",
    "Overall": "0.2 * FLAE + 0.5 * TRACE + 0.3 * MOSAIC",
    "VEF": "100 * mean(thresholded PASS indicator; threshold=6/10)",
}
NOTES = [
    "Canonical split is Q0-Q99 Research and Q100-Q139 Daily.",
    "MOSAIC submetrics average only tasks on which that routed dimension is applicable and scored.",
    "VEF_Raw is intentionally excluded because historical caches contain both 0-10 and 0-100 raw scales.",
]


class ExportIncomplete(MmirError):
    """The run is not submission-ready (raised by ``require_complete`` after all files are written)."""


# ------------------------------------------------------------------------------------------------ helpers
def number(value: Any) -> float | None:
    """A finite float for ints and floats (not booleans); ``None`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the numeric values (``sum/len`` in order), ``None`` if there are none."""
    xs = [v for x in values if (v := number(x)) is not None]
    return sum(xs) / len(xs) if xs else None


def _percent(value: Any) -> float | None:
    v = number(value)
    return None if v is None else 100.0 * v


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1024 * 1024), b""):
            h.update(chunk)
    return h.hexdigest()


def _portable(path: Path | None, run_root: Path) -> str:
    if path is None:
        return ""
    try:
        return path.resolve().relative_to(run_root.resolve()).as_posix()
    except (OSError, ValueError):
        return str(path)


def read_results(path: str | os.PathLike) -> tuple[list[dict[str, Any]], list[str]]:
    """Records of a results JSONL with the last-record-wins rule.

    Returns:
        ``(records, duplicates)``: one record per qid in order of first appearance, and the repeated qids.

    Raises:
        DataError: unreadable file, a line that is not a JSON object, a record without ``qid``.
    """
    p = Path(path)
    kept: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    dups: list[str] = []
    try:
        lines = p.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(str(p), f"cannot read results: {e}") from e
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(str(p), f"line {n} is not valid JSON ({e.msg})", row=n - 1) from e
        if not isinstance(rec, dict):
            raise DataError(str(p), f"line {n} is not a JSON object", row=n - 1)
        qid = str(rec.get("qid") or "").strip()
        if not qid:
            raise DataError(str(p), f"line {n} has no qid", row=n - 1, field="qid")
        if qid in kept:
            dups.append(qid)
        else:
            order.append(qid)
        kept[qid] = rec
    return [kept[q] for q in order], dups


def _scores(rec: Mapping[str, Any]) -> Mapping[str, Any]:
    return rec.get("scores") or (rec.get("scoring") or {}).get("scores") or {}


def _raw(rec: Mapping[str, Any], part: str) -> Mapping[str, Any]:
    return ((rec.get("scoring") or {}).get("raw") or {}).get(part) or {}


def _report_path(rec: Mapping[str, Any], run_root: Path) -> Path | None:
    qid = str(rec.get("qid") or "")
    canonical = run_root / "reports" / f"{qid}.md"
    if canonical.exists():
        return canonical
    raw = rec.get("report_path") or (rec.get("generation") or {}).get("report_path")
    if isinstance(raw, str) and raw and Path(raw).exists():
        return Path(raw)
    return None


def _mm_summary_path(rec: Mapping[str, Any], run_root: Path) -> Path | None:
    raw = (rec.get("mm") or {}).get("l5_final_summary")
    if isinstance(raw, str) and raw and Path(raw).exists():
        return Path(raw)
    qid = str(rec.get("qid") or "")
    for cand in (run_root / "reports" / "mm" / qid / "mm_router_routed" / "final_summary.json",
                 run_root / "mm" / qid / "mm_router_routed" / "final_summary.json"):
        if cand.exists():
            return cand
    return None


def task_row(rec: Mapping[str, Any], model: str, run_root: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """One task-score row (spec §8 "Task row"), unrounded, missing values ``None``; an unreadable MOSAIC summary warns."""
    s = _scores(rec)
    gen, evi, mm, vef = (number(s.get(k)) for k in ("GEN", "EVI", "MM", "VEF"))
    trace = None if evi is None or vef is None else trace_value(evi, vef)
    overall = None if gen is None or trace is None or mm is None else overall_score(gen, trace, mm)
    stored = number(s.get("FINAL_MMDR"))
    if stored is None:
        stored = number(s.get("FINAL"))
    g, e = _raw(rec, "general"), _raw(rec, "evidence")
    read, insight, struct = _percent(g.get("R")), _percent(g.get("I")), _percent(g.get("S"))
    con, cov, fid = _percent(e.get("E_con")), _percent(e.get("E_cov")), _percent(e.get("E_fid"))
    complete = all(v is not None for v in (gen, evi, mm, vef, read, insight, struct, con, cov, fid))

    mm_path = _mm_summary_path(rec, run_root)
    dims: Mapping[str, Any] = {}
    if mm_path is not None:
        try:
            obj = json.loads(mm_path.read_text(encoding="utf-8"))
            summ = obj.get("summary") if isinstance(obj, dict) else None
            d = summ.get("avg_metric_by_dim") if isinstance(summ, dict) else None
            dims = d if isinstance(d, dict) else {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as ex:
            if warnings is not None:
                warnings.append(f"{rec.get('qid')}: MOSAIC summary {mm_path} unreadable ({ex}); Sem./Acc./VQA left blank")
    report = _report_path(rec, run_root)
    qid = str(rec.get("qid") or "")
    return {
        "Model": model, "Task ID": qid, "Split": canonical_split(qid, str(rec.get("report_type") or "")),
        "Overall": overall, "Stored Overall": stored,
        "Overall Delta": None if overall is None or stored is None else overall - stored,
        "FLAE": gen, "Read.": read, "Insh.": insight, "Stru.": struct, "TRACE": trace, "Vef.": vef,
        "Con.": con, "Cov.": cov, "Fid.": fid, "MOSAIC": mm,
        "Sem.": _percent(dims.get("semantic")), "Acc.": _percent(dims.get("data_accuracy")), "VQA": _percent(dims.get("vqa_score")),
        "Complete": complete,
        "Report Path": _portable(report, run_root), "Report SHA256": sha256_file(report) if report else "",
        "MOSAIC Summary Path": _portable(mm_path, run_root), "MOSAIC Summary SHA256": sha256_file(mm_path) if mm_path else "",
    }


def csv_bytes(fieldnames: Sequence[str], rows: Iterable[Mapping[str, Any]], digits: int, *, bom: bool = True) -> bytes:
    """CSV bytes in the published exporter's format: CRLF, numbers ``round(x, digits)``, None -> "",
    UTF-8 with a BOM when ``bom``."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(fieldnames), extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({k: round(v, digits) if (v := number(val)) is not None else val for k, val in row.items()})
    return (b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode("utf-8")


def model_name(records: Sequence[Mapping[str, Any]], given: str = "") -> str:
    """``given`` (stripped) if non-empty, else the most frequent ``report_model``, else ``"unknown-model"``."""
    if given.strip():
        return given.strip()
    c = Counter(str(r.get("report_model") or "") for r in records)
    c.pop("", None)
    return c.most_common(1)[0][0] if c else "unknown-model"


def provenance(judge: Any = None, *, prompt_hashes: Mapping[str, str] | None = None, repo_dir: str | os.PathLike | None = None,
               commit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Manifest ``provenance`` block: judge identity, prompt SHA-256s, the code commit and the judge audit counts."""
    hashes = dict(judge.prompt_hashes()) if judge is not None else {}
    hashes.update(prompt_hashes or {})
    out: dict[str, Any] = {
        "judge": judge.identity() if judge is not None else None,
        "prompt_sha256": dict(sorted(hashes.items())),
        "code": dict(commit) if commit is not None else code_commit(repo_dir),
    }
    if judge is not None:
        out["judge_calls"] = judge.audit.counts()
        out["judge_fallbacks"] = judge.audit.fallback_counts()
    return out


@dataclass
class ExportResult:
    """Paths written and what was computed: ``leaderboard``, ``tasks``, ``manifest`` paths; ``rows``
    (selected task rows, unrounded), ``leaderboard_row`` (unrounded means), ``manifest`` dict."""

    leaderboard: Path
    tasks: Path
    manifest_path: Path
    rows: list[dict[str, Any]]
    leaderboard_row: dict[str, Any]
    manifest: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def submission_ready(self) -> bool:
        """All expected tasks selected and complete."""
        return bool(self.manifest["submission_ready"])


@dataclass(frozen=True)
class FileFormat:
    """Byte layout of the exported files.

    Attributes:
        bom: UTF-8 BOM on the CSVs (published code: on; the stored reference files: off).
        manifest_trailing_newline: end the manifest with ``\\n`` (published code: no; reference file: yes).
    """

    bom: bool = True
    manifest_trailing_newline: bool = False


def export_leaderboard(
    results_jsonl: str | os.PathLike,
    output_dir: str | os.PathLike | None = None,
    *,
    model: str = "",
    split: str = "all",
    expected_tasks: int = 140,
    require_complete: bool = False,
    file_format: FileFormat = FileFormat(),
    extra_notes: Sequence[str] = (),
    provenance_info: Mapping[str, Any] | None = None,
) -> ExportResult:
    """Write ``<stem>.task_scores.csv``, ``<stem>.leaderboard.csv`` (``.partial_leaderboard.csv`` unless
    submission-ready) and ``<stem>.leaderboard_manifest.json`` (spec §8).

    Args:
        split: ``all``, ``research`` (100) or ``daily`` (40); a split adds ``.research``/``.daily`` to the stem.
        require_complete: after writing everything, raise :class:`ExportIncomplete` if not submission-ready.
        file_format: BOM on the CSVs, trailing newline of the manifest (:class:`FileFormat`).

    Raises:
        DataError: unreadable results (see :func:`read_results`).
        ValueError: unknown split.
        ExportIncomplete: ``require_complete`` and the run is not submission-ready.
    """
    results = Path(results_jsonl).resolve()
    if not results.exists():
        raise DataError(str(results), "results file not found")
    split_name = split.strip().lower()
    if split_name not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    records, dups = read_results(results)
    run_root = results.parent.parent
    name = model_name(records, model)
    warnings: list[str] = []
    rows = [task_row(r, name, run_root, warnings) for r in records]
    selected = rows if split_name == "all" else [r for r in rows if r["Split"].lower() == split_name]
    complete = [r for r in selected if r["Complete"]]
    expected = expected_tasks if split_name == "all" else SPLITS[split_name]
    ready = len(selected) == expected and len(complete) == expected

    board: dict[str, Any] = {"Model": name}
    for col in LEADERBOARD_COLUMNS[1:]:
        board[col] = mean(r.get(col) for r in complete if r.get(col) != "")

    out_dir = Path(output_dir).resolve() if output_dir is not None else run_root / "summary"
    stem = results.stem + ("" if split_name == "all" else f".{split_name}")
    lb_path = out_dir / f"{stem}.{'leaderboard' if ready else 'partial_leaderboard'}.csv"
    task_path = out_dir / f"{stem}.task_scores.csv"
    man_path = out_dir / f"{stem}.leaderboard_manifest.json"
    write_bytes(lb_path, csv_bytes(LEADERBOARD_COLUMNS, [board], 2, bom=file_format.bom))
    write_bytes(task_path, csv_bytes(TASK_COLUMNS, selected, 6, bom=file_format.bom))

    missing_tasks = []
    for r in selected:
        miss = [c for c in REQUIRED_COLUMNS if number(r.get(c)) is None]
        if miss:
            missing_tasks.append({"task_id": r["Task ID"], "missing": miss})
    deltas = [abs(float(r["Overall Delta"])) for r in complete if number(r.get("Overall Delta")) is not None]
    manifest: dict[str, Any] = {
        "schema": SCHEMA,
        "source_results": _portable(results, run_root),
        "source_sha256": sha256_file(results),
        "model": name,
        "split": split_name,
        "records_selected": len(selected),
        "records_complete": len(complete),
        "expected_records": expected,
        "submission_ready": ready,
        "duplicate_qids_last_record_retained": dups,
        "missing_component_tasks": missing_tasks,
        "metric_counts": {c: sum(number(r.get(c)) is not None for r in complete) for c in LEADERBOARD_COLUMNS[1:]},
        "formula_verification": {
            "records_compared": len(deltas),
            "mean_absolute_delta": mean(deltas),
            "max_absolute_delta": max(deltas) if deltas else None,
        },
        "formulas": dict(FORMULAS),
        "notes": [*extra_notes, *NOTES],
        "outputs": {"leaderboard_csv": lb_path.name, "task_scores_csv": task_path.name},
    }
    if provenance_info is not None:
        manifest["provenance"] = dict(provenance_info)
    if warnings:
        manifest["warnings"] = warnings
    text = json.dumps(manifest, ensure_ascii=False, indent=2) + ("\n" if file_format.manifest_trailing_newline else "")
    write_text(man_path, text)
    if require_complete and not ready:
        raise ExportIncomplete(
            f"{results}: not submission-ready: selected={len(selected)}, complete={len(complete)}, expected={expected}; "
            f"diagnostic CSVs and manifest were written to {out_dir}"
        )
    return ExportResult(lb_path, task_path, man_path, selected, board, manifest, warnings)
