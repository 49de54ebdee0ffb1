"""How many documents and corpus images a domain has, known before it is prepared (to plan encoding shards).

Local copies: the row counts in the parquet footers (no data read). Hub datasets: the fetched files once they
exist, else the sizes of the pinned hub revision (:data:`MM_BRIGHT_SIZES`). TREC collections: an estimate from the
corpus files' byte size (2,000 bytes a document). A plan only needs to be deterministic: the last shard takes
whatever rows the prepared domain has beyond the planned ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from mmir.config.models import Dataset, parse_dataset
from mmir.core.paths import resolve_path

# documents, corpus images per hub domain at revision 97702ca9ea81cd0a25288e74a9402439550d6bd4
# (../shared/data/mm-bright-stats/domains.tsv: t1_documents, t3_images)
MM_BRIGHT_SIZES = {
    "academia": (60050, 306), "apple": (29285, 291), "askubuntu": (90198, 276), "aviation": (203938, 2082),
    "bioacoustics": (29812, 559), "bioinformatics": (45545, 222), "biology": (89435, 856), "bitcoin": (29595, 644),
    "chemistry": (36043, 892), "christianity": (37875, 226), "crypto": (24054, 311), "earthscience": (73451, 1637),
    "economics": (18431, 283), "gaming": (68321, 200), "gis": (20705, 407), "islam": (14079, 469), "law": (26142, 219),
    "math": (151867, 626), "medicalsciences": (240844, 453), "philosophy": (137860, 331), "physics": (338291, 1184),
    "pm": (93376, 510), "psychology": (328520, 671), "quant": (64044, 488), "quantumcomputing": (127009, 677),
    "robotics": (11185, 1053), "salesforce": (8890, 101), "sustainability": (32365, 1047), "travel": (68063, 652),
}
TREC_BYTES_PER_DOCUMENT = 2000


def _parquet_rows(files) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def raw_sizes(ds: Dataset | Mapping, domain: str, raw_root: str | Path | None = None) -> tuple[int, int]:
    """``(documents, corpus images)`` of one domain of a validated dataset entry, before preparing it."""
    from mmir.data.parquet import domain_files

    ds = parse_dataset(ds)
    if ds.source == "trec":
        root = resolve_path(ds.root)
        corpus = root / ds.corpus
        files = [corpus] if corpus.is_file() else [f for f in corpus.rglob("*") if f.is_file()]
        return max(1, math.ceil(sum(f.stat().st_size for f in files) / TREC_BYTES_PER_DOCUMENT)), 0
    root = Path(raw_root) if raw_root is not None else (resolve_path(ds.root) if ds.root else None)
    if root is not None and domain_files(root, "documents", domain):
        return (_parquet_rows(domain_files(root, "documents", domain)),
                _parquet_rows(domain_files(root, "document_images", domain)))
    return MM_BRIGHT_SIZES.get(domain, (1, 1))
