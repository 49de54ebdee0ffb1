"""OCR of a domain's images, one shard a job (rule ``ocr``), and the caption file gathered from the shards (rule
``caption`` of an OCR captioner).

A shard is rows ``[start, stop)`` of ``images.parquet`` (``kind`` images, the corpus images) or all of
``query_images.parquet`` (:func:`mmir.workflow.shards.shard_range`, the same cut as encoding). Its images are read
on the job's threads (one OCR process a thread, :mod:`mmir.encoders.ocr_pool`), through the OCR cache. An image
prepare marked not ok, or that does not decode, gets "" and is counted (``skipped_corrupt``); an engine failure
too (``failed``, not cached: a rerun retries it); neither stops the shard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

from mmir.config.models import OCRCaptioner, parse
from mmir.core.io import write_json, write_parquet
from mmir.workflow.shards import OCR_KINDS, shard_range

log = logging.getLogger(__name__)

COLUMNS = ["path", "role", "text"]
#: counts a shard reports and the caption file sums
COUNTS = ("images", "empty", "skipped_corrupt", "failed", "engine_calls", "cache_hits")


def ocr_frame(frame, role: str, ocr) -> tuple[list[dict], dict]:
    """Caption rows (``path, role, text``, in frame order) of an image frame (``path, bytes, ok``) and their counts."""
    ok = [bool(v) for v in frame["ok"]]
    paths, datas = list(frame["path"]), list(frame["bytes"])
    got = iter(ocr.read_many([d for d, k in zip(datas, ok) if k], sources=[p for p, k in zip(paths, ok) if k]))
    rows, n = [], dict.fromkeys(COUNTS, 0)
    for path, good in zip(paths, ok):
        res = next(got) if good else None
        text = res.text if res is not None else ""
        n["skipped_corrupt"] += res is None or res.status == "corrupt"
        n["failed"] += res is not None and res.status == "failed"
        n["cache_hits"] += res is not None and res.status == "cached"
        n["engine_calls"] += res is not None and res.status == "read"
        n["empty"] += not text
        rows.append({"path": path, "role": role, "text": text})
    n["images"] = len(rows)
    return rows, n


def _frame(rows: Sequence[dict]):
    import pandas as pd

    return pd.DataFrame({c: [r[c] for r in rows] for c in COLUMNS}, columns=COLUMNS)


def ocr_shard(images_parquet: str | Path, kind: str, captioner: dict, cache_path: str | Path | None, shard: int,
              shards: int, threads: int, out_parquet: str | Path, out_stats: str | Path) -> dict:
    """OCR shard ``shard`` of ``shards`` of ``kind`` (images | query_images) on ``threads`` processes; writes the
    caption rows (``path, role, text``) and the counts (with ``rows``, ``seconds``, ``images_per_s``, ``engine``,
    ``workers`` and up to five ``errors``) atomically, and returns the counts."""
    import pandas as pd

    from mmir.encoders.ocr import OcrCaptioner

    cap = parse(OCRCaptioner, captioner, "captioners.<ocr>")
    df = pd.read_parquet(images_parquet, columns=["path", "bytes", "ok"])
    start, stop = shard_range(len(df), shard, shards, cap.shard_size) if kind == "images" else (0, len(df))
    t0 = time.perf_counter()
    with OcrCaptioner.from_config(cap, cache_path, workers=max(1, threads)) as ocr:
        rows, n = ocr_frame(df.iloc[start:stop], OCR_KINDS[kind], ocr)
        errors, engine = list(ocr.errors), ocr.engine_version
    seconds = time.perf_counter() - t0
    write_parquet(out_parquet, _frame(rows))
    stats = n | {"rows": [start, stop], "seconds": round(seconds, 3), "workers": max(1, threads), "engine": engine,
                 "images_per_s": round(n["engine_calls"] / seconds, 3) if seconds > 0 else None, "errors": errors}
    write_json(out_stats, stats)
    log.info("read %s rows %d-%d (shard %d of %d) with %s on %d workers; wrote %s: %d captions (%d empty, %d corrupt "
             "images skipped, %d engine failures, %d OCR runs at %s images/s, %d from the cache)", images_parquet, start,
             stop, shard, shards, engine, max(1, threads), out_parquet, n["images"], n["empty"], n["skipped_corrupt"],
             n["failed"], n["engine_calls"], stats["images_per_s"], n["cache_hits"])
    for e in errors:
        log.warning("OCR: %s", e)
    return stats


def gather_captions(shard_files: Sequence[str | Path], stats_files: Sequence[str | Path], out_parquet: str | Path,
                    out_stats: str | Path | None = None) -> dict:
    """The caption file of a domain: the shards' rows in the given order (corpus shards, then query images) and
    the sum of their counts (``stats_files``, one a shard)."""
    import json

    import pandas as pd

    if len(shard_files) != len(stats_files):
        raise ValueError(f"{len(shard_files)} OCR shards but {len(stats_files)} stats files")
    rows, n = [], dict.fromkeys(COUNTS, 0)
    for f, s in zip(shard_files, stats_files, strict=True):
        rows += pd.read_parquet(f, columns=COLUMNS).to_dict("records")
        st = json.loads(Path(s).read_text(encoding="utf-8"))
        for k in COUNTS:
            n[k] += st[k]
    write_parquet(out_parquet, _frame(rows))
    if out_stats is not None:
        write_json(out_stats, n)
    log.info("read %d OCR shards; wrote %s: %d captions (%d empty, %d corrupt images skipped, %d engine failures, "
             "%d OCR runs, %d from the cache)", len(shard_files), out_parquet, n["images"], n["empty"],
             n["skipped_corrupt"], n["failed"], n["engine_calls"], n["cache_hits"])
    return n
