"""Reading the MM-BRIGHT parquet layout: ``<root>/<config>/<domain>.parquet`` or hub shards."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from mmir.core.errors import DataError

CONFIGS = ("documents", "examples", "examples_multimodal", "document_images", "examples_images")


def domain_files(root: str | Path, config: str, domain: str) -> list[Path]:
    """Files holding ``config`` for ``domain``: ``<domain>.parquet``, else the hub's shards
    ``<domain>-NNNNN-of-NNNNN.parquet`` in shard order. Empty list when neither exists."""
    folder = Path(root) / config
    single = folder / f"{domain}.parquet"
    if single.is_file():
        return [single]
    pat = re.compile(rf"^{re.escape(domain)}-\d{{5}}-of-\d{{5}}\.parquet$")
    return sorted(p for p in folder.glob(f"{domain}-*.parquet") if pat.match(p.name))


def read_config(root: str | Path, config: str, domain: str, columns: list[str], required: bool = True) -> pd.DataFrame | None:
    """Read one config of one domain, checking that ``columns`` exist.

    Returns a DataFrame with a ``_file`` and ``_row`` column (source file, 0-based row within it) so later
    checks can name the exact place of a problem. Returns None when the files are absent and not required.

    Raises:
        DataError: files missing (when required), unreadable/corrupt parquet, or a missing column.
    """
    files = domain_files(root, config, domain)
    if not files:
        if required:
            raise DataError(Path(root) / config / f"{domain}.parquet", f"missing: no {config} file for domain '{domain}'")
        return None
    frames = []
    for f in files:
        try:
            df = pd.read_parquet(f)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise DataError(f, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc
        for col in columns:
            if col not in df.columns:
                raise DataError(f, f"missing column (has: {', '.join(map(str, df.columns))})", field=col)
        df = df.reset_index(drop=True)
        df["_file"] = str(f)
        df["_row"] = range(len(df))
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def as_str_list(value, file: str, row: int, field: str) -> list[str]:
    """A list-of-strings cell as a Python list; None/NaN -> []; BRIGHT's 'N/A' placeholder entries dropped.

    Raises DataError when the cell is neither a sequence nor null, or holds a non-string.
    """
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return []
    if isinstance(value, str):
        raise DataError(file, f"expected a list of strings, got the string {value[:60]!r}", row, field)
    try:
        items = list(value)
    except TypeError as exc:
        raise DataError(file, f"expected a list of strings, got {type(value).__name__}", row, field) from exc
    out = []
    for it in items:
        if isinstance(it, dict) and "image_path" in it:  # examples_multimodal positive/negative_images
            it = it["image_path"]
        if not isinstance(it, str):
            raise DataError(file, f"expected strings, found {type(it).__name__} {it!r}", row, field)
        if it != "N/A":
            out.append(it.replace("\\", "/"))
    return out
