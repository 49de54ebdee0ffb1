"""The BRIGHT loader on hub-shaped fixtures built from ../shared/data/bright-topics (anserini-tools' copy of BRIGHT's
examples, qrels and excluded ids): for each of the 12 tasks, the prepared qrels equal ``qrels.bright-<task>.txt``
(``.fixed.txt`` with ``qrels_from: anserini-fixed``) and the prepared exclusions equal ``exclude.bright-<task>.txt``
where anserini ships one (leetcode; the aops and theoremqa-questions files are absent from the copy, so their
exclusions are checked against the topics' own ``excluded_ids``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import shared

from mmir.data.bright import BRIGHT_TASKS, LONG_TASKS, anserini_name, read_reasoning
from mmir.data.prepare import prepare_domain, read_excluded, write_prepared
from mmir.data.trec import read_qrels

SHARD = "-00000-of-00001.parquet"


def _topics(root: Path, task: str) -> list[dict]:
    with gzip.open(root / "topics" / f"topics.bright-{anserini_name(task)}-original.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _qrels_ids(root: Path, task: str) -> set[str]:
    out = set()
    for suffix in ("", ".fixed"):
        out |= {d for v in read_qrels(root / "qrels" / f"qrels.bright-{anserini_name(task)}{suffix}.txt").values() for d in v}
    return out


def hub_fixture(topics_root: Path, dest: Path) -> Path:
    """xlangai/BRIGHT's layout: ``<config>/<task>-00000-of-00001.parquet`` for examples, documents, long_documents (8
    tasks) and gpt4_reason; every document id the topics or qrels name, with a stand-in text."""
    for task in BRIGHT_TASKS:
        recs = _topics(topics_root, task)
        ex = pd.DataFrame(recs)[["query", "reasoning", "id", "excluded_ids", "gold_ids_long", "gold_ids", "gold_answer"]]
        ids = sorted({d for r in recs for d in r["gold_ids"] + r["excluded_ids"] if d != "N/A"} | _qrels_ids(topics_root, task))
        long_ids = sorted({d for r in recs for d in r["gold_ids_long"] if d != "N/A"})
        tables = {"examples": ex, "documents": pd.DataFrame({"id": ids, "content": [f"text of {d}" for d in ids]}),
                  "gpt4_reason": ex.assign(query=["reasoned: " + r["query"][:50] for r in recs])}
        if task in LONG_TASKS:
            tables["long_documents"] = pd.DataFrame({"id": long_ids, "content": [f"long text of {d}" for d in long_ids]})
        for config, df in tables.items():
            (dest / config).mkdir(parents=True, exist_ok=True)
            df.to_parquet(dest / config / f"{task}{SHARD}", index=False)
    return dest


@pytest.fixture(scope="module")
def bright(tmp_path_factory):
    topics = shared("bright-topics")
    return topics, hub_fixture(topics, tmp_path_factory.mktemp("bright") / "BRIGHT")


def _prepare(tmp: Path, ds: dict, task: str) -> Path:
    out = tmp / task
    write_prepared(prepare_domain("bright", ds, task), out)
    return out


def test_qrels_and_exclusions_equal_anserini_files_for_all_12_tasks(bright, tmp_path):
    topics, root = bright
    counts = {}
    for task in BRIGHT_TASKS:
        name = anserini_name(task)
        out = _prepare(tmp_path / "hub", {"source": "bright", "root": str(root)}, task)
        assert read_qrels(out / "qrels.task1.txt") == read_qrels(topics / "qrels" / f"qrels.bright-{name}.txt"), task
        fixed = _prepare(tmp_path / "fixed", {"source": "bright", "root": str(root), "qrels_from": "anserini-fixed",
                                              "anserini_root": str(topics)}, task)
        assert read_qrels(fixed / "qrels.task1.txt") == read_qrels(topics / "qrels" / f"qrels.bright-{name}.fixed.txt"), task
        excluded = read_excluded(out / "excluded.tsv")
        exclude_file = topics / "qrels" / f"exclude.bright-{name}.txt"
        if exclude_file.is_file():
            expected: dict[str, set[str]] = {}
            for line in exclude_file.read_text(encoding="utf-8").splitlines():
                q, d = line.split()
                expected.setdefault(q, set()).add(d)
        else:  # absent from the copy: BRIGHT's own excluded_ids ("N/A" = none)
            expected = {r["id"]: set(r["excluded_ids"]) - {"N/A"} for r in _topics(topics, task)}
            expected = {q: v for q, v in expected.items() if v}
        assert excluded == expected, task
        counts[name] = (sum(map(len, read_qrels(out / "qrels.task1.txt").values())),
                        sum(map(len, read_qrels(fixed / "qrels.task1.txt").values())), len(excluded),
                        sum(map(len, excluded.values())), exclude_file.is_file())
    print("\ntask: qrels, qrels.fixed, queries with exclusions, excluded pairs, anserini exclude file present")
    for name, c in counts.items():
        print(f"{name}: {c}")
    # the README's table of ../shared/data/bright-topics
    assert counts["biology"][:2] == (372, 393) and counts["sustainable-living"][:2] == (576, 1073)
    assert counts["leetcode"][2:4] == (142, 33485)
    assert counts["aops"][2] == 111 and counts["theoremqa-questions"][2] == 194
    assert sum(c[2] for c in counts.values()) == 142 + 111 + 194


def test_long_context_judges_by_gold_ids_long(bright, tmp_path):
    topics, root = bright
    out = _prepare(tmp_path, {"source": "bright", "root": str(root), "long_context": True}, "biology")
    expected = {r["id"]: {d: 1 for d in r["gold_ids_long"]} for r in _topics(topics, "biology") if r["gold_ids_long"] != ["N/A"]}
    assert read_qrels(out / "qrels.task1.txt") == expected
    assert set(pd.read_parquet(out / "corpus.parquet")["text"].str[:5]) == {"long "}


def test_gold_answer_kept_and_reasoning_queries_are_a_query_variant(bright, tmp_path):
    topics, root = bright
    out = _prepare(tmp_path, {"source": "bright", "root": str(root)}, "biology")
    recs = _topics(topics, "biology")
    got = pd.read_parquet(out / "topics.parquet")
    assert [list(a) for a in got["gold_answers"]] == [[r["gold_answer"]] if r["gold_answer"] != "N/A" else [] for r in recs]
    variant = read_reasoning(_ds(root), "biology", "gpt4")
    assert list(variant["qid"]) == list(got["qid"])
    assert list(variant["query"]) == ["reasoned: " + r["query"][:50] for r in recs]


def _ds(root):
    from mmir.config.models import parse_dataset

    return parse_dataset({"source": "bright", "root": str(root), "reasoning": ["gpt4"]})
