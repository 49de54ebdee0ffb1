"""MMDeepResearch-Bench (MMDR-Bench) evaluator as a library (spec ``shared/specs/mmdr-bench.md``).

Modules: ``tasks`` (§1), ``report_parser`` (§2), ``judge``, ``controller`` (§4.5), ``flae`` (§4),
``claims``/``sources``/``fetch``/``trace`` (§5.1-5.4), ``vef`` (§5.5), ``image_resolver``/``mm_engines``/``mosaic``
(§6), ``aggregate`` (§7), ``export`` (§8), ``scorer``; settings: :mod:`mmir.config.models.mmdr_evaluator`. Where
the paper and the published code differ,
the code is the default and the paper's reading an option (spec §10).
"""

from mmir.benchmarks.mmdr.aggregate import (
    final_mmdr,
    mosaic_gate,
    overall_score,
    trace_value,
)
from mmir.benchmarks.mmdr.export import export_leaderboard
from mmir.benchmarks.mmdr.judge import Judge
from mmir.benchmarks.mmdr.scorer import TaskScore, score_task
from mmir.benchmarks.mmdr.tasks import Task, load_tasks
from mmir.config.models.mmdr_evaluator import MMDREvaluatorConfig

__all__ = [
    "Judge", "MMDREvaluatorConfig", "Task", "TaskScore", "export_leaderboard", "final_mmdr", "load_tasks",
    "mosaic_gate", "overall_score", "score_task", "trace_value",
]
