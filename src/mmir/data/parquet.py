"""Reading the MM-BRIGHT parquet layout (``<root>/<config>/<domain>.parquet`` or hub shards) into typed values.

Accepted shapes: list cells as numpy arrays or lists, images as strings or ``{"image_path": ...}`` structs; ids
as strings or integers; Windows separators in references (normalised by :func:`norm_ref`, free text never);
``gold_answers`` as a list or one string; text as UTF-8 bytes. Undeclared columns are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mmir.core.errors import DataError

CONFIGS = ("documents", "examples", "examples_multimodal", "document_images", "examples_images")
#: BRIGHT's placeholder for "no entry" in list cells (e.g. ``negative_ids == ["N/A"]``).
PLACEHOLDER = "N/A"


def domain_files(root: str | Path, config: str, domain: str) -> list[Path]:
    """Files holding ``config`` for ``domain``: ``<domain>.parquet``, else the hub's shards
    ``<domain>-NNNNN-of-NNNNN.parquet`` in shard order. Empty list when neither exists."""
    folder = Path(root) / config
    single = folder / f"{domain}.parquet"
    if single.is_file():
        return [single]
    pat = re.compile(rf"^{re.escape(domain)}-\d{{5}}-of-\d{{5}}\.parquet$")
    return sorted(p for p in folder.glob(f"{domain}-*.parquet") if pat.match(p.name))


def _bad_utf8(table, path: Path) -> DataError | None:
    """A DataError naming row, id, field and byte offset of the first string cell of ``table`` (read from
    ``path``) that is not valid UTF-8, or None."""
    for name in table.column_names:
        col = table.column(name)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        raw = col.cast(pa.large_binary() if pa.types.is_large_string(col.type) else pa.binary(), safe=False)
        for row, value in enumerate(raw.to_pylist()):
            if value is None:
                continue
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                return DataError(path, f"invalid UTF-8 in {name!r} of {_row_id(table, row)!r} at byte offset {exc.start} "
                                       f"(byte 0x{value[exc.start]:02x})", row, name)
    return None


def _row_id(table, row: int):
    """The ``id`` (or ``path``) of one row, decoded leniently, for messages."""
    for key in ("id", "path"):
        if key in table.column_names:
            v = table.column(key)[row]
            if pa.types.is_string(v.type):
                v = v.cast(pa.binary(), safe=False)
            v = v.as_py()
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return None


def read_config(root: str | Path, config: str, domain: str, columns: list[str], required: bool = True) -> pd.DataFrame | None:
    """Read one config of one domain, checking that ``columns`` exist; ``None`` when absent and not required.

    Adds ``_file`` and ``_row`` columns so later checks can name the place of a problem.

    Raises:
        DataError: files missing (when required), unreadable/corrupt parquet, a string cell that is not
            valid UTF-8 (row, field, id and byte offset named), or a missing column.
    """
    files = domain_files(root, config, domain)
    if not files:
        if required:
            raise DataError(Path(root) / config / f"{domain}.parquet", f"missing: no {config} file for domain '{domain}'")
        return None
    frames = []
    for f in files:
        try:
            table = pq.read_table(f)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise DataError(f, f"not a readable parquet file ({type(exc).__name__}: {exc})") from exc
        try:
            table.validate(full=True)  # e.g. string cells that are not UTF-8 (checked in C++, fast)
        except pa.ArrowInvalid as exc:
            raise (_bad_utf8(table, f) or DataError(f, f"invalid parquet data ({exc})")) from exc
        df = table.to_pandas()
        for col in columns:
            if col not in df.columns:
                raise DataError(f, f"missing column (has: {', '.join(map(str, df.columns))})", field=col)
        df = df.reset_index(drop=True)
        df["_file"] = str(f)
        df["_row"] = range(len(df))
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------------------
# cells
# ---------------------------------------------------------------------------------------------------------

def is_null(value) -> bool:
    """None, NaN, pd.NA or NaT (a scalar null cell); False for lists and arrays."""
    if value is None:
        return True
    if isinstance(value, (list, tuple, dict, np.ndarray, str, bytes)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def norm_ref(ref: str) -> str:
    """A path or id reference with Windows separators as ``/`` (``d\\x_1\\image_1.png`` ->
    ``d/x_1/image_1.png``): the one normalisation applied to both sides of every reference."""
    return ref.replace("\\", "/")


def as_text(value, file: str, row: int, field: str, what: str) -> str | None:
    """A text cell as ``str``; bytes are decoded as UTF-8; None for a null cell.

    Raises:
        DataError: bytes that are not valid UTF-8 (the byte offset is named), or a non-text value.
    """
    if is_null(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(file, f"invalid UTF-8 in {what} at byte offset {exc.start} (byte 0x{data[exc.start]:02x})",
                            row, field) from exc
    raise DataError(file, f"expected text for {what}, got {type(value).__name__} {value!r:.60}", row, field)


def as_id(value, file: str, row: int, field: str) -> str | None:
    """An id cell as ``str`` (integers, or ``5.0`` from a column with nulls, as digits); None for null or blank.

    Raises:
        DataError: a boolean, a non-integer float, or any other type.
    """
    if is_null(value):
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = as_text(value, file, row, field, "an id")
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (bool, np.bool_)):
        raise DataError(file, f"expected a string or integer id, got the boolean {value!r}", row, field)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    raise DataError(file, f"expected a string or integer id, got {type(value).__name__} {value!r:.60}", row, field)


def as_ref_list(value, file: str, row: int, field: str, counts: dict | None = None, norm: bool = True) -> list[str] | None:
    """A list-of-references cell as strings (None for null), normalised (:func:`norm_ref`, counted) when ``norm``;
    ``'N/A'`` dropped.

    Raises:
        DataError: the cell is a string or a scalar, or holds an entry that is not a string, integer or struct.
    """
    if is_null(value):
        return None
    if isinstance(value, (str, bytes)):
        raise DataError(file, f"expected a list, got the string {str(value)[:60]!r}", row, field)
    if isinstance(value, dict):
        raise DataError(file, f"expected a list, got a struct {value!r:.80}", row, field)
    try:
        items = list(value)
    except TypeError as exc:
        raise DataError(file, f"expected a list, got {type(value).__name__}", row, field) from exc
    out = []
    for it in items:
        if isinstance(it, dict):  # examples_multimodal positive/negative_images
            if "image_path" not in it:
                raise DataError(file, f"expected a struct with 'image_path', found {it!r:.80}", row, field)
            it = it["image_path"]
        if isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
            it = str(int(it))
        if not isinstance(it, str):
            raise DataError(file, f"expected strings, found {type(it).__name__} {it!r:.60}", row, field)
        if it == PLACEHOLDER:
            continue
        ref = norm_ref(it) if norm else it
        if counts is not None and ref != it:
            counts["backslash_refs"] = counts.get("backslash_refs", 0) + 1
        out.append(ref)
    return out


def as_answers(value, file: str, row: int, field: str = "gold_answers") -> list[str]:
    """``gold_answers`` as a list of strings, never rewritten; null, ``''`` or ``'N/A'`` as no answer.

    Raises:
        DataError: an entry that is not text.
    """
    if is_null(value):
        return []
    if isinstance(value, (str, bytes, bytearray)):
        text = as_text(value, file, row, field, "a gold answer")
        return [text] if text.strip() and text != PLACEHOLDER else []
    try:
        items = list(value)
    except TypeError as exc:
        raise DataError(file, f"expected a list of strings or a string, got {type(value).__name__}", row, field) from exc
    out = []
    for it in items:
        text = as_text(it, file, row, field, "a gold answer")
        if text is None or text == PLACEHOLDER:
            continue
        out.append(text)
    return out

