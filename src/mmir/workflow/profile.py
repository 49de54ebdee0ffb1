"""Where a run's time went: per-rule wall time from Snakemake's ``benchmark:`` files (one TSV per job, columns ``s``
(wall seconds), ``max_rss`` (MB), … as ``snakemake.benchmark`` writes them), sorted by time.

    python -m mmir.workflow.profile [--root PROJECT] [--rules DIR]

A file is given to the rule whose ``benchmark:`` pattern (read from ``pipeline/rules/*.smk``) it matches; where two
patterns match (``m2rag/…/kb.tsv`` and ``m2rag/…/{strategy}.tsv``) the one with more literal text wins.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mmir.core.paths import PIPELINE

_RULE = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:", re.M)  # prepare is a checkpoint
_BENCHMARK = re.compile(r"^\s+benchmark:\s*\n\s+\"([^\"]+)\"", re.M)


@dataclass(frozen=True)
class BenchmarkPattern:
    rule: str
    pattern: str  # e.g. "benchmarks/encode/{dataset}/{domain}/{system}/{kind}/{shard}.tsv"

    @property
    def regex(self) -> re.Pattern:
        parts = re.split(r"\{[^}]+\}", self.pattern)
        return re.compile("[^/]+".join(re.escape(p) for p in parts) + r"\Z")

    @property
    def literal(self) -> int:
        """Characters outside the wildcards: the more, the more specific."""
        return len(re.sub(r"\{[^}]+\}", "", self.pattern))


def benchmark_patterns(rules_dir: str | Path) -> list[BenchmarkPattern]:
    """Every rule's ``benchmark:`` pattern in ``rules_dir/*.smk``, most specific first."""
    out = []
    for smk in sorted(Path(rules_dir).glob("*.smk")):
        text = smk.read_text(encoding="utf-8")
        starts = [(m.start(), m.group(1)) for m in _RULE.finditer(text)] + [(len(text), "")]
        for (a, rule), (b, _) in zip(starts, starts[1:]):
            if m := _BENCHMARK.search(text, a, b):
                out.append(BenchmarkPattern(rule, m.group(1)))
    return sorted(out, key=lambda p: -p.literal)


def rule_times(bench_root: str | Path, patterns: list[BenchmarkPattern]) -> pd.DataFrame:
    """One row per rule: ``rule``, ``jobs``, ``seconds`` (summed wall time), ``max_rss_mb`` (largest job), sorted by
    ``seconds`` descending; files matching no pattern are rows of rule ``?``. ``bench_root`` is the directory that
    holds ``benchmarks/`` (the project root).

    Raises:
        ValueError: a benchmark file without the ``s`` column (names the file).
    """
    root = Path(bench_root)
    rows = []
    for f in sorted((root / "benchmarks").rglob("*.tsv")):
        rel = f.relative_to(root).as_posix()
        rule = next((p.rule for p in patterns if p.regex.match(rel)), "?")
        table = pd.read_csv(f, sep="\t")
        if "s" not in table.columns or table.empty:
            raise ValueError(f"{f}: not a Snakemake benchmark file (no 's' column or no row)")
        rows.append({"rule": rule, "seconds": float(table["s"].iloc[-1]),
                     "max_rss_mb": float(pd.to_numeric(table.get("max_rss"), errors="coerce").iloc[-1])
                     if "max_rss" in table.columns else float("nan")})
    if not rows:
        return pd.DataFrame(columns=["rule", "jobs", "seconds", "max_rss_mb"])
    df = pd.DataFrame(rows).groupby("rule").agg(jobs=("seconds", "size"), seconds=("seconds", "sum"),
                                                max_rss_mb=("max_rss_mb", "max")).reset_index()
    return df.sort_values(["seconds", "rule"], ascending=[False, True], ignore_index=True)


def markdown(df: pd.DataFrame) -> str:
    """The table as Markdown, with a total row (seconds summed over jobs: more than the wall time when jobs overlap)."""
    lines = ["| rule | jobs | seconds | max RSS (MB) |", "|---|---:|---:|---:|"]
    lines += [f"| {r.rule} | {r.jobs} | {r.seconds:.1f} | {r.max_rss_mb:.0f} |" for r in df.itertuples()]
    lines.append(f"| all | {int(df['jobs'].sum())} | {df['seconds'].sum():.1f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmir.workflow.profile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="project root holding benchmarks/ (default: .)")
    ap.add_argument("--rules", default=str(PIPELINE / "rules"),
                    help="the .smk files' directory (default: the rules of the workflow shipped in the package)")
    args = ap.parse_args(argv)
    df = rule_times(args.root, benchmark_patterns(args.rules))
    if df.empty:
        print(f"no benchmark files under {Path(args.root) / 'benchmarks'}: run the workflow first (from that root)", file=sys.stderr)
        return 1
    print(markdown(df))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
