"""MMDR results across domains: the model label, leaderboard means of complete rows, domains' results
combined under unique ids, and the judge audits read back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.core.io import write_text

RESULTS_STEM = "mmdr"


#: Columns of the readable table (leaderboard columns plus the three module scores of the task rows).
TABLE_COLUMNS = ["Overall", "FLAE", "Read.", "Insh.", "Stru.", "TRACE", "Vef.", "Con.", "Cov.", "Fid.", "MOSAIC", "Sem.", "Acc.", "VQA"]


NOTES = [
    "Offline run: reports cite the prepared corpus as mmir://<dataset>/<id>; the evaluator fetches them locally (no web).",
    "Tasks: the first max_tasks queries (topic order) with >= 1 image; visual ground truth = the images' alt text.",
    "A text-only judge sees images as their text (captioner text and/or alt text, see judge_image_text).",
]


def model_label(m: Mapping[str, Any]) -> str:
    """Display name of the report writer: ``mmdr-baseline(<generator>, <task>/<system> top-<k>)``."""
    return f"mmdr-baseline({m['generator']}, {m['task']}/{m['system']} top-{m['k']})"


def board(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means of :data:`TABLE_COLUMNS` over the complete rows (non-blank values), as the exporter's
    leaderboard; plus ``n`` (rows) and ``complete``."""
    from mmir.benchmarks.mmdr.export import mean

    complete = [r for r in rows if r["Complete"]]
    out: dict[str, Any] = {"n": len(rows), "complete": len(complete)}
    for c in TABLE_COLUMNS:
        out[c] = mean(r.get(c) for r in complete if r.get(c) not in ("", None))
    return out


# ------------------------------------------------------------------------------------------------- report
def combine_results(run_dirs: Sequence[str | Path], dest: str | Path) -> list[dict]:
    """Concatenate the domains' results into ``dest``, each qid made unique as ``<dataset>/<domain>/<qid>``.
    Returns the records."""
    recs = []
    for d in run_dirs:
        s = json.loads((Path(d) / "summary.json").read_text(encoding="utf-8"))
        for line in (Path(d) / "results" / f"{RESULTS_STEM}.jsonl").read_text(encoding="utf-8").split("\n"):
            if line.strip():
                r = json.loads(line)
                r["qid"] = f"{s['dataset']}/{s['domain']}/{r['qid']}"
                if "report_path" not in r:  # a too-short record: point at its report for the SHA-256
                    r["report_path"] = str(Path(d) / "reports" / f"{r['qid'].rsplit('/', 1)[-1]}.md")
                recs.append(r)
    write_text(dest, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    return recs


def read_audit(run_dirs: Sequence[str | Path]):
    """The :class:`~mmir.llm.audit.CallAudit` of the ``audit.jsonl`` of every scored run folder."""
    from mmir.llm.audit import CallAudit

    return CallAudit.read_jsonl(*(Path(d) / "audit.jsonl" for d in run_dirs))


def with_copies(counts: dict[str, dict[str, int]], copies: Mapping[str, int]) -> dict[str, dict[str, int]]:
    return {m: {**c, "example_copies": copies.get(m, 0)} for m, c in counts.items()}
