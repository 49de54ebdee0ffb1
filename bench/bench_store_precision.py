"""What a float16 vector store changes against the float32 default (issue 38 item 3), on the first run's data.

For each (task, prepared domain) it encodes a dense system's kinds twice through the retrieval stage, into a float32
and a float16 store (the embedding cache holds float32 vectors, so the second store costs no model call), retrieves
both runs with the config's protocol and top_k, scores them with the config's measures, and prints per domain: the
queries whose ranking changes (anywhere in the top_k, and in the top 10) and the deltas of nDCG@10, nDCG@100 and MAP
(float16 - float32).

Usage (after ``snakemake results/tables/task1.md results/tables/task2.md`` has prepared and captioned the data)::

    .venv/bin/python bench/bench_store_precision.py [--system minilm] [--task task1 --task task2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

MEASURES = ["nDCG@10", "nDCG@100", "MAP"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="params.yaml")
    ap.add_argument("--system", default="minilm")
    ap.add_argument("--task", action="append", default=None)
    args = ap.parse_args()
    from mmir.core.tasks import task as task_spec
    from mmir.evaluation.scoring import score_run
    from mmir.retrieval.encoding import kinds_of
    from mmir.retrieval.runs import read_run
    from mmir.workflow import retrieval_steps
    from mmir.workflow.units import typed
    from mmir.workflow.validate import load_config

    config = load_config(args.config)
    cfg = typed(config)
    system = config["systems"][args.system]
    ev = {"protocol": cfg.evaluation.protocol, "top_k": cfg.evaluation.top_k, "alt_text": cfg.evaluation.alt_text,
          "task4_protocol": cfg.evaluation.task4_protocol}
    print(f"{args.system}: float16 store against float32, top_k {cfg.evaluation.top_k}, protocol {cfg.evaluation.protocol}")
    print("| task | domain | queries | rankings changed (top_k) | (top 10) | Δ nDCG@10 | Δ nDCG@100 | Δ MAP |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for task in args.task or ["task1", "task2"]:
        spec = task_spec(task)
        for prep in sorted(Path("data/prepared").glob("*/*")):
            dataset, domain = prep.parent.name, prep.name
            captions = Path(f"results/captions/{dataset}/{domain}/{cfg.evaluation.image_text}.parquet")
            if spec.multimodal and not json.loads((prep / "prepare.json").read_text()).get("multimodal"):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                runs, means = {}, {}
                for dtype in ("float32", "float16"):
                    work = Path(tmp) / dtype
                    stores = {}
                    for kind in kinds_of(cfg.systems[args.system], task):
                        store = work / kind
                        retrieval_steps.encode(retrieval_steps.EncodeJob(
                            prep, args.system, system, kind, 0, 1, {**config["encoding"], "dtype": dtype},
                            config["paths"]["embedding_cache"], store, store / "shard-00000.sealed.json",
                            store / "shard-00000.stats.json", str(captions) if captions.exists() else None, False))
                        stores[kind] = str(store)
                    run_file = work / "run.trec"
                    retrieval_steps.retrieve(retrieval_steps.RetrieveJob(
                        task, prep, args.system, system, ev, run_file, work / "run.stats.json", stores,
                        str(captions) if captions.exists() else None))
                    runs[dtype] = read_run(run_file)
                    qrels = prep / spec.qrels_file(cfg.evaluation.task4_protocol)
                    means[dtype] = score_run(run_file, qrels, MEASURES, work / "m.json", work / "pq.tsv")["measures"]
                a, b = runs["float32"], runs["float16"]
                changed = sum([d for d, _ in a[q]] != [d for d, _ in b.get(q, [])] for q in a)
                changed10 = sum([d for d, _ in a[q][:10]] != [d for d, _ in b.get(q, [])[:10]] for q in a)
                deltas = " | ".join(f"{means['float16'][m] - means['float32'][m]:+.2e}" for m in MEASURES)
                print(f"| {task} | {dataset}/{domain} | {len(a)} | {changed} | {changed10} | {deltas} |")


if __name__ == "__main__":
    main()
