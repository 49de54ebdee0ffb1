"""Per-rule times from Snakemake benchmark files (mmir.workflow.profile)."""

from pathlib import Path

import pytest

from mmir.core.paths import PIPELINE
from mmir.workflow.profile import benchmark_patterns, markdown, rule_times

RULES = PIPELINE / "rules"
HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"

# path under benchmarks/ -> (the rule that wrote it, seconds, max_rss)
JOBS = {
    "prepare/openstax/statistics.tsv": ("prepare", 6.5, 500.0),  # a checkpoint, not a rule
    "encode/openstax/statistics/minilm/documents/00000.tsv": ("encode", 10.5, 900.0),
    "encode/openstax/statistics/minilm/queries/00000.tsv": ("encode", 4.25, 700.0),
    "m2rag/openstax/statistics/bm25/kb.tsv": ("m2rag_kb", 30.0, 800.0),
    "m2rag/openstax/statistics/bm25/single_stage.tsv": ("m2rag_answer", 170.0, 1500.0),
    "track/task1.tsv": ("track", 5.0, 260.0),
    "track/caption_ablation.tsv": ("track_ablation", 4.0, 250.0),
    "report_html.tsv": ("report_html", 4.1, 269.0),
    "mmdr/openstax/statistics/score.tsv": ("mmdr_score", 160.5, 906.0),
}


def _write(root: Path, jobs=JOBS):
    for rel, (_, s, rss) in jobs.items():
        f = root / "benchmarks" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(HEADER + f"{s}\t0:00:{int(s):02d}\t{rss}\t1\t1\t1\t0\t0\t50\t{s}\n")


def test_every_rule_of_the_workflow_has_a_benchmark_pattern():
    names = {p.rule for p in benchmark_patterns(RULES)}
    assert {"prepare", "encode", "retrieve", "score", "ocr", "m2rag_kb", "m2rag_answer", "track", "track_ablation"} <= names


def test_rule_times_sum_each_rules_jobs_and_sort_by_time(tmp_path):
    _write(tmp_path)
    df = rule_times(tmp_path, benchmark_patterns(RULES))
    want: dict[str, list[float]] = {}
    for rule, s, _ in JOBS.values():
        want.setdefault(rule, []).append(s)
    got = {r.rule: (r.jobs, r.seconds) for r in df.itertuples()}
    assert got == {rule: (len(v), pytest.approx(sum(v))) for rule, v in want.items()}
    assert list(df["seconds"]) == sorted(df["seconds"], reverse=True)
    assert df.set_index("rule").loc["encode", "max_rss_mb"] == 900.0
    table = markdown(df)
    assert table.splitlines()[2].startswith("| m2rag_answer | 1 | 170.0 | 1500 |")
    assert table.splitlines()[-1] == f"| all | {len(JOBS)} | {sum(s for _, s, _ in JOBS.values()):.1f} | |"


def test_an_unknown_file_is_rule_question_mark_and_a_bad_file_is_named(tmp_path):
    _write(tmp_path, {"nobody/x.tsv": ("?", 1.0, 1.0)})
    assert list(rule_times(tmp_path, benchmark_patterns(RULES))["rule"]) == ["?"]
    bad = tmp_path / "benchmarks" / "score" / "t" / "d" / "s" / "x.tsv"
    bad.parent.mkdir(parents=True)
    bad.write_text("wall\n1\n")
    with pytest.raises(ValueError, match="x.tsv"):
        rule_times(tmp_path, benchmark_patterns(RULES))


def test_no_benchmark_files_is_a_message_and_exit_1_not_an_empty_table(tmp_path, capsys):
    from mmir.workflow.profile import main

    assert main(["--root", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert out.out == "" and f"no benchmark files under {tmp_path / 'benchmarks'}" in out.err
