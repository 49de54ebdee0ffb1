"""MMDR-Bench task schema (spec §1): loading tasks and ground truth, ids, splits and scoring profiles.

Stricter than the published loader: a bad line, row or field raises :class:`~mmir.core.errors.DataError`
(file, row, field named) instead of being skipped; ground truth is matched by row index and by id in
separate maps (the published single dict lets a numeric GT id shadow another row's index).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmir.core.errors import DataError

#: Default tasks file, relative to the benchmark root (overridden by ``MMDR_RESEARCH_JSON``).
DEFAULT_TASKS_PATH = Path("research questions") / "quiz" / "quiz.json"
ENV_TASKS = "MMDR_RESEARCH_JSON"
ENV_IMAGE_ROOT = "MMDR_RESEARCH_IMAGE_ROOT"

#: Canonical split (spec §1): Q0-Q99 research, Q100-Q139 daily.
N_RESEARCH, N_TASKS = 100, 140
PROFILES = ("research", "daily_easy", "daily_medium", "daily_hard")
DIFFICULTIES = ("easy", "medium", "hard", "complex")

_QID_RE = re.compile(r"Q(\d+)", re.IGNORECASE)
_HTTP_RE = re.compile(r"^https?://", re.IGNORECASE)

# field -> aliases, in lookup order (spec §1 table)
ALIASES: dict[str, tuple[str, ...]] = {
    "qid": ("qid", "id"),
    "caption": ("caption", "title"),
    "body": ("body", "text"),
    "images": ("image_url", "images"),
    "set": ("set", "split", "regime"),
}
GT_TEXT_FIELDS = ("body", "text", "answer", "gt")


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    Attributes:
        qid: canonical id (``Q<n>``; ``Q<n>_<k>`` for the k-th duplicate).
        raw_id: the id before de-duplication (used for ground-truth matching).
        images: ``http(s)`` URLs as given, other entries as absolute paths under the image root.
        set: ``"research"`` or ``"daily"`` (explicit, else from the id number).
        ground_truth: the textualised visual ground truth for VEF (``""`` when none).
    """

    qid: str
    raw_id: str
    index: int
    title: str
    text: str
    images: tuple[str, ...] = ()
    set: str = "research"
    difficulty: str | None = None
    language: str | None = None
    tags: tuple[Any, ...] = ()
    ground_truth: str = ""
    source: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def profile(self) -> str:
        """Scoring profile, see :func:`report_profile`."""
        return report_profile(self)


# ---------------------------------------------------------------------------------------------- reading
def _read_records(path: Path) -> list[tuple[int, Any]]:
    """``(row, object)`` pairs of a JSON list or a JSONL file; rows are 0-based (JSONL: line index)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise DataError(str(path), "file not found") from e
    except UnicodeDecodeError as e:
        raise DataError(str(path), f"not UTF-8 text: {e}") from e
    if path.suffix.lower() == ".jsonl":
        out = []
        for i, line in enumerate(text.split("\n")):
            if not line.strip():
                continue
            try:
                out.append((i, json.loads(line)))
            except json.JSONDecodeError as e:
                raise DataError(str(path), f"not valid JSON: {e.msg} (column {e.colno})", row=i) from e
        return out
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(str(path), f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from e
    if not isinstance(obj, list):
        raise DataError(str(path), f"expected a JSON list of task objects, got {type(obj).__name__}")
    return list(enumerate(obj))


def _get(obj: Mapping[str, Any], name: str) -> tuple[str | None, Any]:
    """First alias of ``name`` present with a truthy value: ``(alias, value)``; ``(None, None)`` if none."""
    for alias in ALIASES[name]:
        v = obj.get(alias)
        if v not in (None, "", []):
            return alias, v
    return None, None


def _str_field(obj: Mapping[str, Any], name: str, file: str, row: int, *, allow_int: bool = False) -> str:
    alias, v = _get(obj, name)
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, (str, int) if allow_int else str):
        kinds = "a string or an integer" if allow_int else "a string"
        raise DataError(file, f"must be {kinds}, got {type(v).__name__}", row=row, field=alias)
    return str(v).strip()


def _opt_lower(obj: Mapping[str, Any], key: str, file: str, row: int) -> str | None:
    v = obj.get(key)
    if v in (None, ""):
        return None
    if not isinstance(v, str):
        raise DataError(file, f"must be a string, got {type(v).__name__}", row=row, field=key)
    return v.strip().lower() or None


def _images(obj: Mapping[str, Any], root: Path, file: str, row: int) -> tuple[str, ...]:
    alias, v = _get(obj, "images")
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list):
        raise DataError(file, f"must be a string or a list of strings, got {type(v).__name__}", row=row, field=alias)
    out = []
    for j, rel in enumerate(v):
        if rel in (None, ""):
            continue
        if not isinstance(rel, str):
            raise DataError(file, f"entry {j} must be a string, got {type(rel).__name__}", row=row, field=alias)
        rel = rel.strip()
        if _HTTP_RE.match(rel):
            out.append(rel)
        else:
            out.append(str((root / rel.replace("\\", "/")).resolve()))
    return tuple(out)


def resolve_task_paths(
    tasks_path: str | os.PathLike | None = None,
    image_root: str | os.PathLike | None = None,
    *,
    benchmark_root: str | os.PathLike = ".",
    env: Mapping[str, str] | None = None,
) -> tuple[Path, Path]:
    """The tasks file and image root: explicit arguments, else ``MMDR_RESEARCH_JSON`` /
    ``MMDR_RESEARCH_IMAGE_ROOT``, else ``<benchmark_root>/research questions/quiz/quiz.json`` and the
    tasks file's folder (spec §1)."""
    env = os.environ if env is None else env
    p = Path(tasks_path) if tasks_path else Path(env[ENV_TASKS]) if env.get(ENV_TASKS) else Path(benchmark_root) / DEFAULT_TASKS_PATH
    r = Path(image_root) if image_root else Path(env[ENV_IMAGE_ROOT]) if env.get(ENV_IMAGE_ROOT) else p.parent
    return p, r.resolve()


def load_ground_truth(path: str | os.PathLike) -> tuple[dict[int, str], dict[str, str]]:
    """Ground-truth records (list or JSONL) as ``(by_row, by_id)`` maps of GT text (spec §1).

    Raises:
        DataError: unreadable file, bad JSON, a record that is not an object, a GT text that is not a string.
    """
    p = Path(path)
    by_row: dict[int, str] = {}
    by_id: dict[str, str] = {}
    for row, obj in _read_records(p):
        if not isinstance(obj, Mapping):
            raise DataError(str(p), f"expected an object, got {type(obj).__name__}", row=row)
        text = ""
        for k in GT_TEXT_FIELDS:
            v = obj.get(k)
            if v in (None, ""):
                continue
            if not isinstance(v, str):
                raise DataError(str(p), f"must be a string, got {type(v).__name__}", row=row, field=k)
            text = v
            break
        by_row[row] = text
        rid = obj.get("qid") or obj.get("id")
        if rid not in (None, ""):
            rid = str(rid).strip()
            by_id[rid] = text
            if rid.isdigit():
                by_id[f"Q{rid}"] = text
    return by_row, by_id


def load_tasks(
    tasks_path: str | os.PathLike,
    image_root: str | os.PathLike | None = None,
    gt_path: str | os.PathLike | None = None,
) -> list[Task]:
    """Load the benchmark tasks (spec §1) from ``quiz.json`` (JSON list) or ``*.jsonl``, in file order.

    Ids: all-digit -> ``Q<id>``, missing -> ``Q<row>``, k-th repeat -> ``<id>_<k>``. Set: explicit, else research
    when the id number (or row) is below 100. Ground truth matched by row index first, then by raw id.

    Raises:
        DataError: unreadable or invalid file, a row that is not an object, a field of the wrong type,
            a task with neither text nor title (names file, row and field).
    """
    p = Path(tasks_path)
    root = Path(image_root).resolve() if image_root else p.parent.resolve()
    gt_rows: dict[int, str] = {}
    gt_ids: dict[str, str] = {}
    if gt_path is not None:
        gt_rows, gt_ids = load_ground_truth(gt_path)

    file = str(p)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for i, obj in _read_records(p):
        if not isinstance(obj, Mapping):
            raise DataError(file, f"expected a task object, got {type(obj).__name__}", row=i)
        caption = _str_field(obj, "caption", file, i)
        body = _str_field(obj, "body", file, i)
        if not caption and not body:
            raise DataError(file, "task has neither text (body/text) nor title (caption/title)", row=i, field="body")
        raw_id = _str_field(obj, "qid", file, i, allow_int=True)
        if raw_id.isdigit():
            raw_id = f"Q{raw_id}"
        if not raw_id:
            raw_id = f"Q{i}"
        qid = raw_id
        if qid in seen:
            seen[qid] += 1
            qid = f"{qid}_{seen[qid]}"
        else:
            seen[qid] = 0

        m = _QID_RE.fullmatch(raw_id)
        canonical_index = int(m.group(1)) if m else i
        explicit = _str_field(obj, "set", file, i).lower()
        task_set = explicit if explicit in ("research", "daily") else ("research" if canonical_index < N_RESEARCH else "daily")

        tags = obj.get("tags") or []
        if not isinstance(tags, (list, tuple)):
            tags = [tags]
        gt = gt_rows.get(i) or gt_ids.get(raw_id) or ""
        tasks.append(
            Task(
                qid=qid,
                raw_id=raw_id,
                index=i,
                title=caption or "Untitled",
                text=body or caption,
                images=_images(obj, root, file, i),
                set=task_set,
                difficulty=_opt_lower(obj, "difficulty", file, i),
                language=_opt_lower(obj, "language", file, i),
                tags=tuple(tags),
                ground_truth=gt,
                source=f"{file}:{i}",
            )
        )
    return tasks


# ----------------------------------------------------------------------------------------------- profiles
def report_profile(task: Task) -> str:
    """Scoring profile of a task (spec §1 ``determine_report_type``): research, or daily_easy/medium/hard by difficulty."""
    task_set = (task.set or "").strip().lower()
    diff = (task.difficulty or "").strip().lower()
    if task_set in ("research", "academic"):
        return "research"
    if task_set == "daily":
        return f"daily_{diff}" if diff in ("easy", "hard") else "daily_medium"
    m = _QID_RE.fullmatch((task.qid or "").strip())
    if m:
        return "research" if int(m.group(1)) < N_RESEARCH else "daily_medium"
    return "daily_medium"


def normalize_report_type(report_type: str) -> str:
    """Map a free-form profile name onto one of :data:`PROFILES` (the scorer's normalisation; default daily_medium)."""
    rt = (report_type or "").strip().lower().replace("-", "_").replace(" ", "_")
    if rt.startswith("research_") or rt in {"research", "academic", "publishable", "top_conference", "deep"}:
        return "research"
    if "daily_easy" in rt or rt == "easy":
        return "daily_easy"
    if "daily_hard" in rt or rt == "hard":
        return "daily_hard"
    return "daily_medium"


def canonical_split(qid: str, report_type: str = "") -> str:
    """Leaderboard split of a task id: ``"Research"`` for Q0-Q99, ``"Daily"`` for Q100-Q139; otherwise
    ``"Research"`` if ``report_type`` starts with "research", else ``"Daily"`` (spec §8)."""
    m = _QID_RE.fullmatch(str(qid).strip())
    if m:
        n = int(m.group(1))
        if 0 <= n < N_RESEARCH:
            return "Research"
        if N_RESEARCH <= n < N_TASKS:
            return "Daily"
    return "Research" if str(report_type).lower().startswith("research") else "Daily"


def format_task_for_llm(task: Task) -> str:
    """Task text for the agent and judges (spec §1): title, blank line, text, blank line, then ``[Images]``
    with one ``- <path or URL>`` line per image and a note that local images are evidence targets."""
    parts = []
    if task.title.strip():
        parts.append(task.title.strip())
    if task.text.strip():
        parts.append(task.text.strip())
    if task.images:
        parts.append(
            "[Images]\n" + "\n".join(f"- {p}" for p in task.images)
            + "\n\nNOTE: If images are local, use them as evidence targets."
        )
    return "\n\n".join(parts).strip()
