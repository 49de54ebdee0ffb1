"""MMDeepResearch-Bench (MMDR-Bench) evaluator as a library (spec ``shared/specs/mmdr-bench.md``).

Modules, one job each:

* :mod:`~mmir.mmdr.tasks` -- task/ground-truth loading, ids, profiles, canonical split (§1);
* :mod:`~mmir.mmdr.report_parser` -- references, citations, sentences, words, headings (§2);
* :mod:`~mmir.mmdr.judge` -- the cached judge client, lenient-but-audited JSON parsing, audit log;
* :mod:`~mmir.mmdr.controller` -- the task controller (adaptive weights, §4.5);
* :mod:`~mmir.mmdr.flae` -- FLAE / GEN (§4);
* :mod:`~mmir.mmdr.claims`, :mod:`~mmir.mmdr.sources`, :mod:`~mmir.mmdr.fetch`, :mod:`~mmir.mmdr.trace`
  -- claim-URL pairs, source policy, evidence fetching with patience, EVI and TRACE (§5.1-5.4);
* :mod:`~mmir.mmdr.vef` -- Visual Evidence Fidelity (§5.5);
* :mod:`~mmir.mmdr.image_resolver`, :mod:`~mmir.mmdr.mm_engines`, :mod:`~mmir.mmdr.mosaic` -- MOSAIC (§6);
* :mod:`~mmir.mmdr.aggregate` -- final score, gate, results record (§7);
* :mod:`~mmir.mmdr.export` -- leaderboard CSVs and manifest (§8);
* :mod:`~mmir.mmdr.scorer` -- one task end to end; :mod:`~mmir.mmdr.config` -- all settings;
* :mod:`~mmir.mmdr.stub` -- a scripted judge backend for tests and dry runs.

Where the paper and the published code differ, the code's behaviour is the default and the paper's
reading is an option (spec §10); each module's docstring names its options.
"""

from mmir.mmdr.aggregate import final_mmdr, mosaic_gate, overall_score, trace_value
from mmir.mmdr.config import MMDRConfig
from mmir.mmdr.export import export_leaderboard
from mmir.mmdr.judge import Judge, JudgeAudit
from mmir.mmdr.scorer import TaskScore, score_task
from mmir.mmdr.tasks import Task, load_tasks

__all__ = [
    "Judge", "JudgeAudit", "MMDRConfig", "Task", "TaskScore", "export_leaderboard", "final_mmdr", "load_tasks",
    "mosaic_gate", "overall_score", "score_task", "trace_value",
]
