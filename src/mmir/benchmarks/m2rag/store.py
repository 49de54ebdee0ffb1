"""M2RAG on disk: knowledge bases (``kb.jsonl``), stored evaluations, answer pages' names, and the rows of
the M2RAG table pooled from the answer units (spec §6.7).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmir.benchmarks.m2rag.aggregate import ALL_METRICS, IMAGE_METRICS, aggregate
from mmir.benchmarks.m2rag.records import Chunk, ImageItem, M2RAGQuery, Webpage
from mmir.benchmarks.m2rag.selection import SelectionConfig
from mmir.core.io import write_text

STRATEGIES = ("single_stage", "multi_stage", "separate")


METRIC_LABELS = {
    "fluency": "Fluency", "relevance": "Relevance", "context_precision": "Context Precision",
    "faithfulness": "Faithfulness", "image_coherence": "Image Coherence", "image_helpfulness": "Image Helpfulness",
    "image_reference": "Image Reference", "image_recall": "Image Recall",
}


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# ----------------------------------------------------------------------------------------- config
def selection_config(cfg: Mapping[str, Any], strategy: str | None = None) -> SelectionConfig:
    """The :class:`~mmir.benchmarks.m2rag.selection.SelectionConfig` of ``cfg["selection"]``; for ``separate`` the
    MuRAR settings (spec §4.3) with the same thumbnail size, chunk cap and curation filters."""
    sel = dict(cfg.get("selection") or {})
    if strategy == "separate":
        keep = {k: sel[k] for k in ("thumbnail_size", "max_chunks_per_page", "min_pixel_area", "max_pixel_area",
                                    "min_file_bytes", "phash_max_distance", "max_pages") if k in sel}
        return SelectionConfig.murar(**keep)
    return SelectionConfig(**sel)


# ------------------------------------------------------------------------------- kb.jsonl (de)serialise
def query_to_dict(query: M2RAGQuery) -> dict[str, Any]:
    """Every field of ``query`` as JSON (image ``data`` left out: prepared images are re-attached from
    ``images.parquet`` by path; ``path`` kept as a string)."""
    d = dataclasses.asdict(query)
    for im in [im for p in d["webpages"] for im in p["images"]] + d["aux_images"]:
        im.pop("data", None)
        im["path"] = None if im["path"] is None else str(im["path"])
    return d


def query_from_dict(d: Mapping[str, Any], image_bytes: Mapping[str, bytes] | None = None) -> M2RAGQuery:
    """Inverse of :func:`query_to_dict`; images without a ``path`` get their bytes from ``image_bytes``
    (``cached_image_url`` -> bytes) when present there."""
    image_bytes = image_bytes or {}

    def img(x: Mapping[str, Any]) -> ImageItem:
        x = dict(x)
        path = x.pop("path", None)
        item = ImageItem(**x, path=Path(path) if path else None)
        if item.path is None:
            item.data = image_bytes.get(item.cached_image_url)
        return item

    pages = [Webpage(webpage_id=p["webpage_id"], title=p["title"], url=p["url"],
                     chunks=None if p["chunks"] is None else [Chunk(**c) for c in p["chunks"]],
                     images=[img(i) for i in p["images"]]) for p in d["webpages"]]
    return M2RAGQuery(query_id=d["query_id"], content=d["content"], webpages=pages,
                      aux_images=[img(i) for i in d["aux_images"]], level=d.get("level"))


def write_kb(queries: Sequence[M2RAGQuery], out_jsonl: str | Path) -> None:
    """One :func:`query_to_dict` per line, written atomically."""
    write_text(out_jsonl, "".join(json.dumps(query_to_dict(q), ensure_ascii=False) + "\n" for q in queries))


def read_kb(kb_jsonl: str | Path, image_bytes: Mapping[str, bytes] | None = None) -> list[M2RAGQuery]:
    """The queries of a ``kb.jsonl``.

    Raises:
        DataError: a line is not JSON or not a knowledge-base record (file and line named).
    """
    from mmir.core.errors import DataError

    out = []
    path = Path(kb_jsonl)
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(query_from_dict(json.loads(line), image_bytes))
        except (ValueError, KeyError, TypeError) as e:
            raise DataError(str(path), f"line {n}: not a knowledge-base record ({type(e).__name__}: {e})") from e
    return out


def prepared_image_bytes(images_parquet: str | Path) -> dict[str, bytes]:
    """``{path: bytes}`` of a prepared domain's ``images.parquet`` (empty when the file does not exist)."""
    import pandas as pd

    f = Path(images_parquet)
    if not f.is_file():
        return {}
    df = pd.read_parquet(f, columns=["path", "bytes"])
    return {str(p): bytes(b) for p, b in zip(df["path"], df["bytes"]) if isinstance(b, (bytes, bytearray))}


# ------------------------------------------------------------------------------------------- answers
class StoredEvaluation:
    """An evaluation read back from ``evaluations.jsonl``, with the interface
    :func:`mmir.benchmarks.m2rag.aggregate.aggregate` pools (``text_value``, ``image_values``)."""

    def __init__(self, rec: Mapping[str, Any]):
        self.qid = rec["qid"]
        self._text = rec["values"]
        self._images = rec["image_values"]
        self.important_images = rec.get("important_images")

    def text_value(self, metric: str) -> float | None:
        return self._text[metric]

    def image_values(self, metric: str) -> list[float | None]:
        return list(self._images[metric])


def evaluation_record(ev, answer) -> dict[str, Any]:
    return {"qid": ev.query_id, "strategy": answer.strategy,
            "values": {m: ev.text_value(m) for m in ALL_METRICS if m not in IMAGE_METRICS},
            "image_values": {m: ev.image_values(m) for m in IMAGE_METRICS},
            "failures": ev.failures(), "important_images": ev.important_images, "notes": ev.notes,
            "detail": ev.to_dict()}


def page_name(qid: str) -> str:
    """File name of a query's answer page (``pages/<qid>.html``, unsafe characters replaced by ``_``)."""
    return _SAFE.sub("_", qid).strip("._") or "query"


# --------------------------------------------------------------------------------------------- table
def collect(summary_files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """One row per (dataset, source, strategy, generator, judge), its domains pooled as spec §6.7 (values x100)."""
    groups: dict[tuple, dict[str, Any]] = {}
    for f in summary_files:
        s = json.loads(Path(f).read_text(encoding="utf-8"))
        key = (s["dataset"], s["source"], s["strategy"], s["generator"], s["judge"])
        g = groups.setdefault(key, {"evaluations": [], "excluded": 0, "domains": [], "seconds": 0.0, "queries": 0,
                                    "llm_calls": 0, "llm_failures": 0, "kb_llm_calls": 0, "kb_llm_failures": 0})
        for k in ("llm_calls", "llm_failures", "kb_llm_calls", "kb_llm_failures"):
            g[k] += int(s.get(k, 0))
        g["evaluations"] += [StoredEvaluation(json.loads(line)) for line in
                             (Path(f).parent / "evaluations.jsonl").read_text(encoding="utf-8").split("\n") if line.strip()]
        g["excluded"] += len(s["generation_failures"])
        g["domains"].append(s["domain"])
        g["seconds"] += s["seconds"]
        g["queries"] += s["queries"]
    rows = []
    for (dataset, source, strategy, generator, judge), g in groups.items():
        run = aggregate(g["evaluations"], failed_generations=g["excluded"])
        row: dict[str, Any] = {"dataset": dataset, "source": source, "strategy": strategy, "generator": generator,
                               "judge": judge, "domains": ",".join(g["domains"]), "queries": g["queries"],
                               "answers": run.n_queries, "excluded": run.n_excluded, "llm_calls": g["llm_calls"],
                               "llm_failures": g["llm_failures"], "kb_llm_calls": g["kb_llm_calls"],
                               "kb_llm_failures": g["kb_llm_failures"]}
        for m, ms in run.metrics.items():
            row[m] = None if ms.value is None else round(ms.value * 100, 1)
            row[f"{m}_n"], row[f"{m}_failures"] = ms.n, ms.failures
        # image recall is 1.0 by definition for an answer whose inputs hold no image scored >= the threshold
        row["image_recall_vacuous"] = sum(e.important_images == 0 for e in g["evaluations"])
        row["overall"] = None if run.overall is None else round(run.overall * 100, 1)
        row["seconds"] = round(g["seconds"], 1)
        rows.append(row)
    order = {s: i for i, s in enumerate(STRATEGIES)}
    return sorted(rows, key=lambda r: (r["dataset"], r["source"], order.get(r["strategy"], 9), r["generator"]))
