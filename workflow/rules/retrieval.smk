# retrieve: one system over one prepared domain for one task -> TREC run (top-k, protocol applied).


def retrieve_inputs(w):
    """Prepared files the task reads, plus the image text for a text system on Tasks 2-4."""
    names = {
        "task1": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
        "ablation": ["corpus.parquet", "topics.parquet", "excluded.tsv"],
        "task2": ["corpus.parquet", "topics_mm.parquet", "query_images.parquet", "excluded.task2.tsv"],
        "task3": ["topics_mm.parquet", "images.parquet", "query_images.parquet"],
        "task4": ["corpus.parquet", "topics_mm.parquet", "images.parquet", "query_images.parquet",
                  "pairs.parquet", "excluded.task4.tsv", "excluded.task4.always.tsv"],
    }[w.task]
    files = {n.replace(".", "_"): paths.prepared(w.dataset, w.domain, n) for n in names}
    if w.task not in ("task1", "ablation") and not mm_system(w.system):
        files["captions"] = paths.CAPTIONS.format(dataset=w.dataset, domain=w.domain,
                                                  captioner=config["evaluation"]["image_text"])
    if w.system in DERIVED:
        files["queries"] = paths.QUERIES.format(dataset=w.dataset, domain=w.domain, variant=DERIVED[w.system]["variant"])
    return files


rule retrieve:
    input:
        unpack(retrieve_inputs),
    output:
        run=paths.RUN,
        stats=paths.RUN_STATS,
    params:
        system=lambda w: system_config(w.system),
        evaluation={k: config["evaluation"][k] for k in ("protocol", "top_k")},
        prepared_dir=lambda w: paths.PREPARED.format(dataset=w.dataset, domain=w.domain),
        cache_root=config["paths"]["embedding_cache"],
    log:
        "logs/retrieve/{task}/{dataset}/{system}/{domain}.log",
    benchmark:
        "benchmarks/retrieve/{task}/{dataset}/{system}/{domain}.tsv"
    threads: 2
    resources:
        # encoder systems: cluster profiles route them to GPU nodes
        gpu=lambda w: 0 if system_config(w.system)["kind"] == "bm25" else 1,
        mem_mb=lambda w: 4000 if system_config(w.system)["kind"] == "bm25" else 8000,
    script:
        "../scripts/retrieve.py"
