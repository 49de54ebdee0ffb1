"""MMDeepResearch-Bench (MMDR-Bench) evaluator as a library (spec ``shared/specs/mmdr-bench.md``).

Modules, one job each:

* :mod:`~mmir.benchmarks.mmdr.tasks` -- task/ground-truth loading, ids, profiles, canonical split (§1);
* :mod:`~mmir.benchmarks.mmdr.report_parser` -- references, citations, sentences, words, headings (§2);
* :mod:`~mmir.benchmarks.mmdr.judge` -- the prompt files and the judge client (over :mod:`mmir.llm`);
* :mod:`~mmir.benchmarks.mmdr.controller` -- the task controller (adaptive weights, §4.5);
* :mod:`~mmir.benchmarks.mmdr.flae` -- FLAE / GEN (§4);
* :mod:`~mmir.benchmarks.mmdr.claims`, :mod:`~mmir.benchmarks.mmdr.sources`, :mod:`~mmir.benchmarks.mmdr.fetch`,
  :mod:`~mmir.benchmarks.mmdr.trace`
  -- claim-URL pairs, source policy, evidence fetching with patience, EVI and TRACE (§5.1-5.4);
* :mod:`~mmir.benchmarks.mmdr.vef` -- Visual Evidence Fidelity (§5.5);
* :mod:`~mmir.benchmarks.mmdr.image_resolver`, :mod:`~mmir.benchmarks.mmdr.mm_engines`, :mod:`~mmir.benchmarks.mmdr.mosaic` -- MOSAIC (§6);
* :mod:`~mmir.benchmarks.mmdr.aggregate` -- final score, gate, results record (§7);
* :mod:`~mmir.benchmarks.mmdr.export` -- leaderboard CSVs and manifest (§8);
* :mod:`~mmir.benchmarks.mmdr.scorer` -- one task end to end; :mod:`~mmir.benchmarks.mmdr.config` -- all settings.

Where the paper and the published code differ, the code's behaviour is the default and the paper's
reading is an option (spec §10); each module's docstring names its options.
"""

from mmir.benchmarks.mmdr.aggregate import (
    final_mmdr,
    mosaic_gate,
    overall_score,
    trace_value,
)
from mmir.benchmarks.mmdr.config import MMDRConfig
from mmir.benchmarks.mmdr.export import export_leaderboard
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.scorer import TaskScore, score_task
from mmir.benchmarks.mmdr.tasks import Task, load_tasks

__all__ = [
    "Judge", "MMDRConfig", "Task", "TaskScore", "export_leaderboard", "final_mmdr", "load_tasks",
    "mosaic_gate", "overall_score", "score_task", "trace_value",
]
