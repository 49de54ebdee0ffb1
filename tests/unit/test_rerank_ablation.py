"""Reranking the Task 1 query ablations: ``<ablation system>+rr:<reranker>`` accepted by the config, run on the grid's
domains with the variant's query text (a tiny random-init cross-encoder checked against a direct computation), its own
row in the ablation table with the interval and the exact test against its first stage, and its MLflow child."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
import torch
from tiny_models import bert_tokenizer

from mmir.core.errors import ConfigError
from mmir.retrieval.runs import read_run, write_run


def _config(runs, **extra):
    from mmir.config import validate_config as schema_check

    cfg = {"datasets": {"t": {"source": "local", "root": "tests", "domains": ["d"]}},
           "systems": {"bm25": {"kind": "bm25"}},
           "captioners": {"ocr": {"kind": "ocr"}},
           "generators": {"g": {"backend": "llama_cpp"}},
           "reformulators": {"rf": {"generator": "g"}},
           "ablations": {"caption": {"systems": ["bm25"], "captioners": ["ocr"]},
                         "reformulation": {"systems": ["bm25"], "reformulators": ["rf"]}},
           "rerankers": {"ce": {"kind": "cross-encoder", "model": "m"}, "pw": {"kind": "llm-pointwise", "generator": "g"}},
           "rerank": {"runs": runs}} | extra
    return schema_check(cfg)


def _check(runs):
    from mmir.config.models import parse_params
    from mmir.workflow.validate import check_rerank

    check_rerank(parse_params(_config(runs)))


# ----------------------------------------------------------------------------------------------- the config
def test_config_accepts_ablation_systems_and_names_the_run_entry_of_an_unknown_one():
    _check([{"system": "bm25+cap:ocr", "reranker": "ce", "depth": 20}, {"system": "bm25+ref:rf", "reranker": "pw"},
            {"system": "bm25", "reranker": "ce"}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.1\.system.*'bm25\+cap:nope' is neither a key of systems nor an "
                                          r"ablation system \(bm25, bm25\+cap:ocr, bm25\+ref:rf\)"):
        _check([{"system": "bm25", "reranker": "ce"}, {"system": "bm25+cap:nope", "reranker": "ce"}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.system.*reranking a reranked system is not supported"):
        _check([{"system": "bm25+rr:ce+rr:pw", "reranker": "pw"}])
    with pytest.raises(ConfigError, match=r"rerank\.runs\.0\.tasks.*ablation system"):
        _check([{"system": "bm25+cap:ocr", "reranker": "ce", "tasks": ["task1"]}])


def test_reranked_ablation_systems_join_their_grid_not_the_task_tables(monkeypatch):
    from mmir.core.tasks import ABLATION_TASK
    from mmir.workflow import units as U
    from mmir.workflow.rules import RULES

    cfg = _config([{"system": "bm25+cap:ocr", "reranker": "ce", "depth": 20}, {"system": "bm25", "reranker": "ce"}])
    monkeypatch.setattr(U, "dataset_domains", lambda name, ds: ["d"])
    monkeypatch.setattr(U, "has_query_images", lambda ds, dom: True)
    caption = U.ablation_units(cfg, "caption")
    assert {"task": ABLATION_TASK, "dataset": "t", "domain": "d", "system": "bm25+cap:ocr+rr:ce"} in caption
    assert all("+rr:" not in u["system"] for u in U.ablation_units(cfg, "reformulation"))
    assert [u["system"] for u in U.task_units(cfg, "task1")] == ["bm25", "bm25+rr:ce"]  # the Task 1-4 path is unchanged
    w = {"task": ABLATION_TASK, "dataset": "t", "domain": "d", "system": "bm25+cap:ocr+rr:ce"}
    job = RULES["rerank"].job(cfg, w)
    assert job.input["first_stage"] == "results/runs/ablation/t/bm25+cap:ocr/d.trec"
    assert job.input["queries"] == "results/queries/t/d/cap-ocr.parquet"  # the text the first stage searched with
    assert job.params["depth"] == 20
    rep = RULES["ablation_report"].job(cfg, {"grid": "caption"})
    assert rep.params["reranked"] == {"bm25+cap:ocr+rr:ce": "bm25+cap:ocr"} and rep.params["untrained"] == []
    assert "results/metrics/ablation/t/bm25+cap:ocr+rr:ce/d.perquery.tsv" in rep.input["perquery"]
    assert "reranked" not in RULES["ablation_report"].job(cfg, {"grid": "reformulation"}).params  # unchanged without one


# ------------------------------------------------------------------------------------------------- the step
def _save_bert(path):
    from transformers import BertConfig, BertForSequenceClassification

    tok = bert_tokenizer()
    model = BertForSequenceClassification(BertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                                     num_hidden_layers=2, num_attention_heads=2, num_labels=1,
                                                     pad_token_id=tok.pad_token_id, max_position_embeddings=512))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_reranked_ablation_run_equals_a_direct_cross_encoder_sort_of_the_variant_queries(tmp_path):
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from mmir.workflow.rerank_steps import RerankJob, rerank

    prep = tmp_path / "prep"
    prep.mkdir()
    docs = ["the mean is the sum divided by the count", "a cat sat on the mat", "slope of the tangent line",
            "variance measures spread around the mean", "photosynthesis in green plants", "the median splits the data"]
    pd.DataFrame({"doc_id": [f"d{i}" for i in range(6)], "text": docs}).to_parquet(prep / "corpus.parquet")
    pd.DataFrame({"qid": ["q1", "q2"], "query": ["plain one", "plain two"]}).to_parquet(prep / "topics.parquet")
    variants = {"q1": "how do I average numbers? [image: a table of numbers]", "q2": "what is the spread of data?"}
    pd.DataFrame({"qid": list(variants), "query": list(variants.values())}).to_parquet(tmp_path / "cap-ocr.parquet")
    first = {"q1": [(f"d{i}", 6.0 - i) for i in range(6)], "q2": [(f"d{i}", 6.0 - i) for i in (5, 4, 3, 2, 1, 0)]}
    write_run(tmp_path / "first.trec", first, "bm25+cap:ocr")
    model_dir = _save_bert(tmp_path / "bert")
    cfg = {"kind": "cross-encoder", "model": str(model_dir), "random_init": True, "seed": 3, "device": "cpu", "max_length": 64}
    job = RerankJob("ablation", prep, "bm25+cap:ocr+rr:ce", "ce", cfg, 4, tmp_path / "first.trec", tmp_path / "out.trec",
                    tmp_path / "out.json", tmp_path / "out.calls.jsonl", queries=tmp_path / "cap-ocr.parquet")
    stats = rerank(job)
    got = read_run(tmp_path / "out.trec")

    # independently: the architecture with the seeded random weights, one pair at a time, a stable sort of the top 4
    torch.manual_seed(3)
    model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    text = dict(zip([f"d{i}" for i in range(6)], docs))
    for qid, ranking in first.items():
        head = [d for d, _ in ranking[:4]]
        with torch.no_grad():
            s = [model(**tok(variants[qid], text[d], truncation=True, max_length=64, return_tensors="pt")).logits[0, 0].item()
                 for d in head]
        want = [head[i] for i in sorted(range(4), key=lambda i: (-s[i], i))] + [d for d, _ in ranking[4:]]
        assert [d for d, _ in got[qid]] == want
        assert [sc for _, sc in got[qid]] == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert stats["queries_file"] == str(tmp_path / "cap-ocr.parquet") and stats["pairs"] == 8


# ------------------------------------------------------------------------------------------------ the table
def _metrics(root, task, system, values, domain="d"):
    from mmir.core import paths
    from mmir.core.io import write_json, write_text

    f = dict(task=task, dataset="ds", system=system, domain=domain)
    write_json(root / paths.METRICS.format(**f), {**f, "queries": len(values), "measures": {"nDCG@10": float(np.mean(values))}})
    write_text(root / paths.PERQUERY.format(**f), "qid\tmeasure\tvalue\n" + "".join(f"q{i}\tnDCG@10\t{v}\n" for i, v in enumerate(values)))
    return str(root / paths.METRICS.format(**f)), str(root / paths.PERQUERY.format(**f))


def test_ablation_table_shows_the_reranked_row_with_interval_and_exact_test_against_its_first_stage(tmp_path, monkeypatch):
    from mmir.core import paths
    from mmir.core.io import write_json
    from mmir.workflow.steps import ablation_report

    monkeypatch.chdir(tmp_path)
    plain = [0.1, 0.2, 0.0, 0.5, 0.3, 0.1, 0.0, 0.4]
    cap = [0.2, 0.1, 0.1, 0.5, 0.4, 0.2, 0.0, 0.3]
    rr = [0.5, 0.3, 0.1, 0.7, 0.4, 0.6, 0.2, 0.3]  # better than its first stage on 5 queries, tied on 3
    files = [_metrics(tmp_path, "task1", "bm25", plain), _metrics(tmp_path, "ablation", "bm25+cap:ocr", cap),
             _metrics(tmp_path, "ablation", "bm25+cap:ocr+rr:ce", rr)]
    write_json(paths.RUN_STATS.format(task="ablation", dataset="ds", system="bm25+cap:ocr+rr:ce", domain="d"),
               {"llm_calls": 0, "llm_failures": 0})
    derived = {"bm25+cap:ocr": {"base": "bm25", "variant": "cap-ocr", "grid": "caption", "source": "ocr"}}
    out = [tmp_path / n for n in ("a.md", "a.csv", "a.png", "p.csv")]
    ablation_report("caption", [m for m, _ in files], "nDCG@10", derived, *out, perquery_files=[p for _, p in files],
                    reranked={"bm25+cap:ocr+rr:ce": "bm25+cap:ocr"}, significance={"resamples": 2000},
                    untrained=["bm25+cap:ocr+rr:ce"])
    csv = pd.read_csv(out[1])
    grid = csv[csv["system"] == "bm25"].iloc[0]
    assert (grid["variant"], grid["value"]) == ("ocr", pytest.approx(np.mean(cap) * 100, abs=1e-4))  # the grid as before
    row = csv[csv["system"] == "bm25+rr:ce"].iloc[0]
    d = np.array(rr) - np.array(cap)
    flips = [abs(np.mean(d * np.array(s))) for s in itertools.product([1, -1], repeat=len(d))]
    p_exact = np.mean([f >= abs(d.mean()) - 1e-12 for f in flips])  # all 256 sign patterns
    assert row["variant"] == "ocr" and row["first_stage"] == "bm25+cap:ocr" and row["reranked_system"] == "bm25+cap:ocr+rr:ce"
    assert row["untrained"]
    assert row["value"] == pytest.approx(np.mean(rr) * 100, abs=1e-4)
    assert row["first_stage_value"] == pytest.approx(np.mean(cap) * 100, abs=1e-4)
    assert row["rerank_diff"] == pytest.approx(d.mean() * 100, abs=1e-4)
    assert row["delta"] == pytest.approx((np.mean(rr) - np.mean(plain)) * 100, abs=1e-4)
    assert row["p"] == pytest.approx(p_exact, abs=1e-4)
    assert row["ci_low"] < row["value"] < row["ci_high"]
    assert min(rr) * 100 <= row["ci_low"] and row["ci_high"] <= max(rr) * 100
    md = out[0].read_text()
    assert "## ds: reranked query variants" in md
    assert (f"| bm25+rr:ce (untrained) | ocr | {np.mean(rr) * 100:.1f} [{row['ci_low']:.1f}, {row['ci_high']:.1f}] | bm25+cap:ocr | "
            f"{np.mean(cap) * 100:.1f} | +{d.mean() * 100:.1f} | {p_exact:.4f} |") in md


def test_mlflow_child_of_a_reranked_ablation_system_names_its_variant_and_reranker(tmp_path, monkeypatch):
    import mlflow

    from mmir.core import paths
    from mmir.core.io import write_json, write_text
    from mmir.workflow import units as U
    from mmir.workflow.rules.common import tracked_derived, tracked_reranked, tracked_slice
    from mmir.workflow.steps import track

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(U, "dataset_domains", lambda name, ds: ["d"])
    monkeypatch.setattr(U, "has_query_images", lambda ds, dom: True)
    cfg = _config([{"system": "bm25+cap:ocr", "reranker": "pw", "depth": 20}])
    units = U.ablation_units(cfg, "caption")
    assert [u["system"] for u in units] == ["bm25", "bm25+cap:ocr", "bm25+cap:ocr+rr:pw"]
    write_json(paths.prepared("t", "d", "prepare.json"), {"documents": 3})
    for u in units:
        write_json(paths.METRICS.format(**u), {**u, "queries": 2, "queries_without_results": 0,
                                               "run_queries_without_qrels": 0, "measures": {"nDCG@10": 0.5}})
        write_text(paths.PERQUERY.format(**u), "qid\tmeasure\tvalue\nq1\tnDCG@10\t0.5\n")
        write_text(paths.RUN.format(**u), "q1 Q0 a 1 2.0 x\n")
        write_json(paths.RUN_STATS.format(**u), {"seconds": 1.0, **({"llm_calls": 7, "llm_failures": 1} if "+rr:" in u["system"] else {})})
    ids = track(tracked_slice(cfg, units), "task1", units, tmp_path / "track.json", run_name="caption_ablation",
                derived=tracked_derived(cfg, units), reranked=tracked_reranked(cfg, units))
    client = mlflow.tracking.MlflowClient()
    kids = {json.loads(r.data.tags["wildcards"])["system"]: r for r in (client.get_run(i) for i in ids["children"])}
    kid = kids["bm25+cap:ocr+rr:pw"]
    assert kid.data.params["rerank.first_stage"] == "bm25+cap:ocr" and kid.data.params["rerank.depth"] == "20"
    assert kid.data.params["ablation.source"] == "ocr" and kid.data.params["system.name"] == "bm25"
    assert kid.data.params["rerank.reranker.kind"] == "llm-pointwise" and kid.data.params["generator.backend"] == "llama_cpp"
    assert (kid.data.metrics["llm_calls"], kid.data.metrics["llm_failures"]) == (7, 1)
